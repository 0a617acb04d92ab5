"""Batch size against the GPU (claim #44), read off the `gpu-batch-size` study: a model trained on the GPU at a
sweep of batch sizes, to the size whose step no longer fits in the GPU's memory."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.rules.claim import H200_REFERENCE, Metric, Question, finite, missing
from loaderbench.analysis.table.derive import on_gpu
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import INCONCLUSIVE, NOT_MEASURABLE, Outcome, at_least, both, decide_shift, fact

#: the batch sizes the claim calls balanced
BALANCED = (32, 128)
#: "balance best": the best of the balanced sizes reaches at least this share of the best size's samples/s
BEST_SHARE = 0.95
#: the step is compute-bound where the accelerator is busy at least this share of the window (MLPerf Storage's
#: "keeps up"); below it the loader bounds samples/s, which then says nothing of the GPU's balance
COMPUTE_BOUND = 0.9
OOM = "gpu_out_of_memory"


def batch_size_balance(rows: pd.DataFrame) -> Outcome:
    """#44: the largest sizes run out of GPU memory, and among those that run the best of 32-128 is within
    BEST_SHARE of the best."""
    if not on_gpu(rows):
        return Outcome(NOT_MEASURABLE, f"no step ran on a GPU: run {QUESTION.study_file} on a GPU node")
    sizes = pd.to_numeric(col(rows, "batch_size"), errors="coerce")
    ok = ok_rows(rows)
    ran = sorted(int(s) for s in pd.to_numeric(ok["batch_size"], errors="coerce").dropna().unique())
    oom = sorted(
        int(s)
        for s, grp in rows.groupby(sizes)
        if (grp["status"] != "ok").all() and (col(grp, "error_kind").astype(str) == OOM).all()
    )
    if len(ran) < 2:
        return missing("needs ok GPU cells at two or more batch sizes")
    small = [s for s in ran if BALANCED[0] <= s <= BALANCED[1]]
    if not small:
        return missing(f"needs a batch size from {BALANCED[0]} to {BALANCED[1]} that ran")
    medians = {s: pd.to_numeric(ok.loc[ok["batch_size"] == s, "samples_per_s"], errors="coerce").median() for s in ran}
    best = max(ran, key=lambda s: medians[s])
    best_small = max(small, key=lambda s: medians[s])
    au = pd.to_numeric(col(ok, "accelerator_busy_fraction"), errors="coerce").groupby(ok["batch_size"]).median()
    aus = f"AU {au.get(best_small, float('nan')):.2f} and {au.get(best, float('nan')):.2f}"
    if not min(au.get(best_small, 0.0), au.get(best, 0.0)) >= COMPUTE_BOUND:
        balance = missing(
            f"samples/s at {best_small} and at {best} ({aus}) were bound by the loader, not the GPU (AU below "
            f"{COMPUTE_BOUND:g}): the balance needs compute-bound cells"
        )
    else:
        balance = decide_shift(
            finite(ok.loc[ok["batch_size"] == best, "samples_per_s"]),
            finite(ok.loc[ok["batch_size"] == best_small, "samples_per_s"]),
            at_least(BEST_SHARE),
            label=f"samples/s at {best_small} / at {best} (the best; {aus})",
        )
    if oom:
        out_of_memory = fact(
            max(ran) < min(oom),
            f"out of GPU memory at {', '.join(map(str, oom))} in every repetition; the sizes up to {max(ran)} ran",
        )
    else:
        out_of_memory = Outcome(
            INCONCLUSIVE, f"every size measured ran (up to {max(ran)}): none was large enough to run out of GPU memory"
        )
    return both(out_of_memory, balance)


def _needs(rows: pd.DataFrame) -> bool:
    """A model's step at two or more batch sizes (a table of several studies has the columns of all)."""
    stepped = col(rows, "model", "none").fillna("none").astype(str) != "none"
    return "batch_size" in rows and rows.loc[stepped, "batch_size"].nunique() > 1


QUESTION = Question(
    "gpu-batch-size",
    ("batch_size", "model", "device", "decoder", "num_workers", "cores", "pin_memory", "non_blocking"),
    _needs,
    reference=H200_REFERENCE,
    figure="loaderbench.analysis.figures.questions.gpu_batch_size:samples_by_batch_size_on_the_gpu",
    tables={"gpu-batch-size": (Metric("samples_per_s", "samples/s"), Metric("accelerator_busy_fraction", "AU"))},
)
QUESTION.add(
    "batch sizes 32-128 balance best; large ones hit GPU out-of-memory",
    f"a model trained on the GPU at a sweep of batch sizes: holds if the largest sizes fail with {OOM} in every "
    f"repetition (and every smaller size ran) and the best samples/s of the sizes {BALANCED[0]}-{BALANCED[1]} is "
    f"at least {BEST_SHARE:g}x that of the best size, both compute-bound (AU at least {COMPUTE_BOUND:g}); does "
    "not hold if the interval lies below, or a size ran above one that ran out of memory; inconclusive while no "
    "size measured ran out of memory",
    batch_size_balance,
    number=44,
)

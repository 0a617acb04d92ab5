"""Batch size: how the time to load one batch, and one sample, moves with the batch size.

The tutorial timed loading alone: 10 batches took 0.18 s at batch size 16 and 0.93 s at 128. The `batch-size`
study loads CPU-bound samples (the `cpu` workload) with no training step, in the main process
(`num_workers = 0`: the loading time itself) and with 2 workers (what a loader delivers), at batch sizes 16 to
128. A batch's loading time is its samples over the measured throughput.
"""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.rules.claim import Metric, Question, finite, narrow
from loaderbench.analysis.rules.kinds import FEWEST, MOST, Shift
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import Outcome, all_of, at_least, decide_shift, within

WORKLOAD = "cpu"
#: "grows": the largest batch takes at least this share of its size ratio times the smallest batch's time
GROWS_SHARE = 0.5
#: "the same per sample": the per-sample time at the largest batch within these times that at the smallest
PER_SAMPLE = (0.8, 1.25)
_READ = ["status", "cell_id", "workload", "num_workers", "batch_size", "step_ms", "samples_per_s"]


def batch_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Ok cells of the cpu workload with no training step, each with its loading time per batch and per sample."""
    r = ok_rows(narrow(rows, _READ))
    if r.empty:
        return r
    r = r[(col(r, "workload") == WORKLOAD) & (pd.to_numeric(col(r, "step_ms", 0.0)).fillna(0) == 0)]
    rate = pd.to_numeric(r["samples_per_s"], errors="coerce")
    return r.assign(s_per_batch=r["batch_size"] / rate, s_per_sample=1.0 / rate)


def _ends(rows: pd.DataFrame, workers: int) -> tuple[int, int, pd.DataFrame, pd.DataFrame] | None:
    line = rows[rows["num_workers"] == workers]
    sizes = sorted(line["batch_size"].unique())
    if len(sizes) < 2:
        return None
    return int(sizes[0]), int(sizes[-1]), line[line["batch_size"] == sizes[0]], line[line["batch_size"] == sizes[-1]]


def _per_workers(rows: pd.DataFrame, check) -> Outcome:
    r = batch_rows(rows)
    out = []
    for workers in sorted(r["num_workers"].unique()) if not r.empty else []:
        ends = _ends(r, int(workers))
        if ends is not None:
            out.append(check(int(workers), *ends))
    return all_of(out, f"needs {WORKLOAD} cells with no step at two or more batch sizes")


def batch_time_grows(rows: pd.DataFrame) -> Outcome:
    """#43: per num_workers, the loading time of a batch at the largest size over the smallest at least
    GROWS_SHARE of their size ratio."""

    def check(workers: int, lo: int, hi: int, a: pd.DataFrame, b: pd.DataFrame) -> Outcome:
        need = GROWS_SHARE * hi / lo
        return decide_shift(
            finite(a["s_per_batch"]),
            finite(b["s_per_batch"]),
            at_least(need),
            label=f"w={workers}: s per batch {hi} / {lo}",
        )

    return _per_workers(rows, check)


sample_time_flat = Shift(
    "s_per_sample",
    "loading time of a sample",
    {"batch_size": FEWEST},
    {"batch_size": MOST},
    within(*PER_SAMPLE),
    ("num_workers",),
    frame=batch_rows,
    note=f"the {WORKLOAD} workload, no training step: a sample's loading time is 1 over samples/s",
)


def _needs(rows: pd.DataFrame) -> bool:
    r = batch_rows(rows)
    return not r.empty and r["batch_size"].nunique() >= 2


QUESTION = Question(
    "batch-size",
    ("batch_size", "num_workers"),
    _needs,
    figure="loaderbench.analysis.figures.questions.batch_size:loading_time_by_batch_size",
    tables={"batch-size": (Metric("samples_per_s", "samples/s"),)},
)
QUESTION.add(
    "batch size 16 -> 128: loading time per batch grows",
    f"{WORKLOAD} workload, no training step, per num_workers: the loading time of a batch (batch size over "
    f"samples/s) at the largest batch size over that at the smallest, at least {GROWS_SHARE:g} x their size "
    "ratio (the tutorial: 5.2x for 8x the samples)",
    batch_time_grows,
    number=43,
)
QUESTION.add("the loading time per sample stays about the same from batch size 16 to 128", sample_time_flat)

"""Does the accelerator starve? Two rules of thumb put to a real GPU step: a few workers per GPU are enough, and
pin_memory always helps. Both read only cells whose step ran on a GPU (a simulated step proves neither)."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.claims.claim import GPU_REFERENCE, Claim, Question, finite, g, missing
from loaderbench.analysis.derive import on_gpu
from loaderbench.analysis.table import col, is_true, ok_rows
from loaderbench.stats.verdicts import NOT_MEASURABLE, Outcome, all_of, at_least, decide_shift

#: the upper end of the rule of thumb "2-4 workers per GPU"
FEW_WORKERS = 4
#: "enough": at least this share of the samples/s of the best num_workers measured
ENOUGH = 0.9
#: "pin_memory speeds the loop up": pinned over not pinned, samples/s, at least this
PIN_GAIN = 1.0
AU = "accelerator_busy_fraction"
_NEEDS_PIN = "needs pinned and unpinned cells (3 ok repetitions each) of the same model, cores and num_workers"


def _gpu(rows: pd.DataFrame) -> tuple[pd.DataFrame | None, Outcome | None]:
    """The ok rows whose step ran on a GPU, or the outcome that says why there are none."""
    ok = ok_rows(rows)
    if ok.empty:
        return None, missing("no ok records")
    gpu = ok[col(ok, "consumer").astype(str) == "gpu"]
    if gpu.empty:
        kinds = ", ".join(sorted(set(col(ok, "consumer").dropna().astype(str)))) or "?"
        return None, Outcome(
            NOT_MEASURABLE,
            f"the step ran on: {kinds}; the rules of thumb are about a GPU: run {QUESTION.study_file} on a GPU node",
        )
    return gpu, None


def few_workers_suffice(rows: pd.DataFrame) -> Outcome:
    gpu, why = _gpu(rows)
    if why:
        return why
    checks = []
    for model, m in gpu.groupby(col(gpu, "model", "none").astype(str)):
        if "pin_memory" in m and m["pin_memory"].map(is_true).any():
            m = m[m["pin_memory"].map(is_true)]  # the rule of thumb comes with pinned memory
        few = m[m["num_workers"] <= FEW_WORKERS]
        if few.empty:
            continue
        at = m[m["cores"] == few["cores"].max()]  # the most cores: the rule's best chance
        nw = at.loc[at["num_workers"] <= FEW_WORKERS, "num_workers"].max()
        medians = at.groupby("num_workers")["samples_per_s"].median()
        best = medians.idxmax()
        a, b = at[at["num_workers"] == best], at[at["num_workers"] == nw]
        au = f"AU {g(b[AU].median())} against {g(a[AU].median())}"
        o = decide_shift(
            finite(a["samples_per_s"]),
            finite(b["samples_per_s"]),
            at_least(ENOUGH),
            label=f"{model} on {int(at['cores'].iloc[0])} cores: samples/s {int(nw)} / {int(best)} workers",
        )
        checks.append(Outcome(o.verdict, f"{o.evidence} ({au})"))
    return all_of(checks, f"needs GPU cells with at most {FEW_WORKERS} workers and the best num_workers")


def pin_memory_speeds_up(rows: pd.DataFrame) -> Outcome:
    gpu, why = _gpu(rows)
    if why:
        return why
    if "pin_memory" not in gpu:
        return missing(_NEEDS_PIN)
    checks = []
    keys = ["model", "cores", "num_workers"] if "model" in gpu else ["cores", "num_workers"]
    for key, grp in gpu.groupby(keys):
        pinned = finite(grp.loc[grp["pin_memory"].map(is_true), "samples_per_s"])
        plain = finite(grp.loc[~grp["pin_memory"].map(is_true), "samples_per_s"])
        if len(pinned) < 3 or len(plain) < 3:
            continue
        where = ", ".join(f"{k}={g(v) if isinstance(v, float) else v}" for k, v in zip(keys, key))
        checks.append(decide_shift(plain, pinned, at_least(PIN_GAIN), label=f"{where}: samples/s pinned / not"))
    return all_of(checks, _NEEDS_PIN)


def _needs(rows: pd.DataFrame) -> bool:
    """A model's step ran (on a GPU, or simulated where there is none): the study asks about feeding one."""
    stepped = on_gpu(rows) or bool(col(rows, "consumer").astype(str).str.startswith("simulated").any())
    return AU in rows and "model" in rows and bool((rows["model"].astype(str) != "none").any()) and stepped


QUESTION = Question(
    "gpu-feed",
    ("model", "cores", "num_workers", "pin_memory", "non_blocking", "device", "step_ms", "step_kind", "batch_size"),
    _needs,
    reference=GPU_REFERENCE,
)
QUESTION.claims.extend(
    [
        Claim(
            "gpu-feed",
            f'{FEW_WORKERS} workers per GPU are enough (the rule of thumb "2-4 workers per GPU")',
            f"per model with a GPU step, on the most cores measured (pinned cells where there are): holds if samples/s "
            f"with the most workers up to {FEW_WORKERS} is at least {ENOUGH:g}x that of the best num_workers, does not "
            "hold if the interval lies below; every model must hold; not measurable without a GPU (a simulated step "
            "proves nothing about one)",
            few_workers_suffice,
        ),
        Claim(
            "gpu-feed",
            'pin_memory=True speeds the training loop up at every num_workers ("always pin")',
            f"at every model, cores and num_workers with pinned and unpinned cells: holds if samples/s pinned over "
            f"not pinned is at least {PIN_GAIN:g}x, does not hold if its interval lies entirely below; one cell shown "
            "slower refutes it; not measurable without a GPU (pinning does nothing there)",
            pin_memory_speeds_up,
        ),
    ]
)

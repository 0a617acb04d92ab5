"""Does the accelerator starve? Two rules of thumb put to a real GPU step: a few workers per GPU are enough, and
pin_memory always helps; and what pinned and non_blocking copies do. Every rule reads only cells whose step ran on
a GPU (a simulated step proves none of them). The cells with blocking copies (non_blocking = false) are the
control of the non_blocking rule alone; the other rules read the cells with non_blocking copies."""

from __future__ import annotations

from functools import partial

import pandas as pd

from loaderbench.analysis.rules.claim import GPU_REFERENCE, Question, finite, g, missing
from loaderbench.analysis.rules.kinds import Shift, medians
from loaderbench.analysis.rules.rows import listed
from loaderbench.analysis.rules.step_overlap import CLAIMS as STEP_OVERLAP
from loaderbench.analysis.table.derive import copies_non_blocking, on_gpu
from loaderbench.analysis.table.records import col, is_true, ok_rows
from loaderbench.stats.verdicts import (
    MIN_EFFECT,
    NOT_MEASURABLE,
    Outcome,
    all_of,
    at_least,
    at_most,
    both,
    decide_median,
    decide_shift,
)

#: the upper end of the rule of thumb "2-4 workers per GPU"
FEW_WORKERS = 4
#: "enough": at least this share of the samples/s of the best num_workers measured
ENOUGH = 0.9
#: "pin_memory speeds the loop up": pinned over not pinned, samples/s, at least this
PIN_GAIN = 1.0
#: "pinned copies are faster": host-to-device GB/s pinned over pageable, at least this
PINNED_H2D_MIN = 2.0
#: "the pin-memory thread becomes a bottleneck": at the most workers it is busy at least this share of one core
#: (its CPU seconds over the run's), having grown from the fewest workers by at least 1 + MIN_EFFECT
PIN_BUSY = 0.8
#: "non_blocking lets the host go on while the copy is in flight": the host's time inside the copy calls, over the
#: copies' time on the device, non_blocking at most this share of that with blocking copies
HOST_FREE = 0.5
AU = "accelerator_busy_fraction"
HOST_BLOCKED = "h2d_host_blocked_fraction"


def _gpu(rows: pd.DataFrame, blocking_too: bool = False) -> tuple[pd.DataFrame | None, Outcome | None]:
    """The ok rows whose step ran on a GPU (those with non_blocking copies unless `blocking_too`), or the outcome
    that says why there are none."""
    ok = ok_rows(rows)
    ok = ok if blocking_too else ok[copies_non_blocking(ok)]
    if ok.empty:
        return None, missing("no ok records")
    gpu = ok[col(ok, "consumer").astype(str) == "gpu"]
    if gpu.empty:
        return None, Outcome(
            NOT_MEASURABLE,
            f"the step ran on: {listed(ok, 'consumer')}; the rules of thumb are about a GPU: run "
            f"{QUESTION.study_file} on a GPU node",
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
        if few.empty or m["num_workers"].nunique() < 2:  # one num_workers measured says nothing about more
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


def _copies(blocking_too: bool = False):
    """The GPU rows (those with blocking copies too where asked), with each row's model ("none" where it has none),
    whether it pinned memory and whether its copies were non_blocking."""

    def frame(rows: pd.DataFrame) -> pd.DataFrame:
        gpu, _ = _gpu(rows, blocking_too)
        if gpu is None:
            return rows.iloc[0:0]
        return gpu.assign(
            model=col(gpu, "model", "none").astype(str),
            pinned=col(gpu, "pin_memory").map(is_true).astype(bool),
            non_blocking=copies_non_blocking(gpu),
        )

    return frame


def _why(blocking_too: bool = False):
    return lambda rows: _gpu(rows, blocking_too)[1]


_CELL = ("model", "cores", "num_workers")
_PIN = ({"pinned": False}, {"pinned": True})

#: a metric of the pinned cells over the unpinned ones, at every model, cores and num_workers
_pinned = partial(Shift, per=_CELL, names=("unpinned cells", "pinned cells"), frame=_copies(), guard=_why())
pin_memory_speeds_up = _pinned(
    "samples_per_s",
    "samples/s",
    *_PIN,
    at_least(PIN_GAIN),
    note="one cell shown slower refutes it; not measurable without a GPU (pinning does nothing there)",
)

pinned_copies_faster = _pinned(
    "h2d_gbps",
    "host-to-device GB/s",
    *_PIN,
    at_least(PINNED_H2D_MIN),
    aside=medians("h2d_gbps", " GB/s"),
    note="CUDA events around each batch's copies; not measurable without a GPU",
)

non_blocking_frees_host = Shift(
    HOST_BLOCKED,
    "host time inside the copy calls over the copies' time on the device",
    {"non_blocking": False},
    {"non_blocking": True},
    at_most(HOST_FREE),
    _CELL,
    where={"pinned": True},
    names=("blocking copies", "non_blocking copies"),
    label="host in copy calls / copy time, non_blocking / blocking",
    frame=_copies(blocking_too=True),
    guard=_why(blocking_too=True),
    note="CUDA events; not measurable without a GPU",
)


def pin_thread_share(rows: pd.DataFrame) -> pd.Series:
    """The pin-memory thread's CPU seconds over the run's wall seconds: the share of one core it kept busy."""
    return pd.to_numeric(col(rows, "cpu_pin_thread_s"), errors="coerce") / pd.to_numeric(
        col(rows, "total_s"), errors="coerce"
    )


def pin_thread_bottleneck(rows: pd.DataFrame) -> Outcome:
    gpu, why = _gpu(rows)
    if why:
        return why
    pinned = gpu[gpu["pin_memory"].map(is_true) & (gpu["num_workers"] > 0)]
    pinned = pinned.assign(share=pin_thread_share(pinned))
    checks = []
    for model, m in pinned.groupby(col(pinned, "model", "none").astype(str)):
        at = m[m["cores"] == m["cores"].max()]
        counts = at.groupby("num_workers")["share"].count()
        ns = sorted(int(n) for n in counts[counts >= 3].index)
        if len(ns) < 2:
            continue
        lo, hi = (finite(at.loc[at["num_workers"] == n, "share"]) for n in (ns[0], ns[-1]))
        where = f"{model} on {int(at['cores'].iloc[0])} cores"
        o = both(
            decide_shift(lo, hi, at_least(1 + MIN_EFFECT), label=f"pin thread's share w={ns[-1]} / w={ns[0]}"),
            decide_median(hi, at_least(PIN_BUSY), label=f"its share at w={ns[-1]}"),
        )
        checks.append(Outcome(o.verdict, f"{where}: {o.evidence}"))
    return all_of(checks, "needs pinned GPU cells at two or more num_workers, 3 ok repetitions each")


def _needs(rows: pd.DataFrame) -> bool:
    """A model's step ran (on a GPU, or simulated where there is none): the study asks about feeding one."""
    stepped = on_gpu(rows) or bool(col(rows, "consumer").astype(str).str.startswith("simulated").any())
    return AU in rows and "model" in rows and bool((rows["model"].astype(str) != "none").any()) and stepped


QUESTION = Question(
    "gpu-feed",
    ("model", "cores", "num_workers", "pin_memory", "non_blocking", "device", "step_ms", "step_kind", "batch_size"),
    _needs,
    reference=GPU_REFERENCE,
    figure="loaderbench.analysis.figures.questions.gpu_feed:pin_memory_by_workers",
)
QUESTION.add(
    f'{FEW_WORKERS} workers per GPU are enough (the rule of thumb "2-4 workers per GPU")',
    f"per model with a GPU step, on the most cores measured (pinned cells where there are): holds if samples/s "
    f"with the most workers up to {FEW_WORKERS} is at least {ENOUGH:g}x that of the best num_workers, does not "
    "hold if the interval lies below; every model must hold; not measurable without a GPU (a simulated step "
    "proves nothing about one)",
    few_workers_suffice,
    number=38,
)
QUESTION.add(
    'pin_memory=True speeds the training loop up at every num_workers ("always pin")', pin_memory_speeds_up, number=36
)
QUESTION.add(
    "pinned memory gives faster host-to-device copies than pageable memory",
    pinned_copies_faster,
    needs=lambda rows: _needs(rows) and "h2d_gbps" in rows,
    number=33,
)
QUESTION.add(
    "the single pin-memory thread becomes a bottleneck as workers grow",
    f"per model on the most cores, pinned cells: holds if the share of one core the pin-memory thread keeps "
    f"busy (its CPU seconds over the run's) grows from the fewest to the most workers by at least "
    f"{1 + MIN_EFFECT:g}x and reaches at least {PIN_BUSY:g} there (a median needs 5 repetitions); not "
    "measurable without a GPU",
    pin_thread_bottleneck,
    needs=lambda rows: _needs(rows) and "cpu_pin_thread_s" in rows,
    number=35,
)
QUESTION.add(
    "non_blocking host-to-device copies from pinned memory let the host go on while the copy is in flight",
    non_blocking_frees_host,
    needs=lambda rows: _needs(rows) and HOST_BLOCKED in rows,
    number=34,
)
QUESTION.claims.extend(STEP_OVERLAP)

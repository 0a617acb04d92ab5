"""Threads or processes: whether thread workers scale pure-Python and GIL-releasing loading, and what they save
in memory and start-up against process workers of the same pipeline.

Rows are grouped by workload, cores and loader; in each group the thread and process cells share everything
but what a worker is, and the num_workers = 0 cell (the main process) is the baseline of both.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.claim import Question, finite, g, quiet, varies
from loaderbench.analysis.rules.kinds import MOST, Shift, medians
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.intervals import MIN_N
from loaderbench.stats.verdicts import HOLDS, INCONCLUSIVE, Outcome, all_of, at_least, at_most, decide_shift

#: workloads whose per-sample work holds the GIL (pure Python)
PURE_PYTHON = ("cpu",)
#: workloads whose per-sample work releases the GIL for most of its time (zlib, Pillow and torch, waiting)
GIL_RELEASING = ("zlib", "jpeg", "sleep")
#: #6, "threads do not scale pure-Python work past one core": the best thread cell at most this x the main process
THREADS_CAP = 1.2
#: ... while the best process cell reaches at least this x the main process (the second core was there to use)
PROCESS_GAIN = 1.4
#: "threads scale GIL-releasing work as processes do": the best thread cell at least this share of the best process
SCALE_KEEP = 0.85
#: "reach their best": the fewest workers whose median throughput is at least this share of the method's best
REACH = 0.95
#: "less memory": PSS of the cell (main and workers) where threads reach their best, at most this x processes'
MEMORY_CUT = 0.8
#: "start faster": time to first batch with thread workers at most this x with process workers
FIRST_BATCH_CUT = 0.8
_NEEDS = "needs thread and process cells (worker_method) of the same workload, cores and loader, 3 repetitions each"


def _rows(rows: pd.DataFrame) -> pd.DataFrame:
    ok = ok_rows(rows)
    return ok.assign(
        num_workers=pd.to_numeric(col(ok, "num_workers", 0), errors="coerce").fillna(0).astype(int),
        loader=col(ok, "loader", "dataloader").fillna("dataloader"),
        worker_method=col(ok, "worker_method", None),
    )


def _groups(rows: pd.DataFrame, workloads: tuple[str, ...]) -> Iterator[tuple[str, int, str, pd.DataFrame]]:
    """(workload, cores, loader, rows) of each group that has both thread and process cells."""
    ok = _rows(rows)
    ok = ok[ok["workload"].isin(workloads)]
    for (workload, cores, loader), grp in ok.groupby(["workload", "cores", "loader"], sort=True):
        methods = set(grp["worker_method"].dropna())
        if {"thread", "process"} <= methods:
            yield str(workload), int(cores), str(loader), grp


def _cells(grp: pd.DataFrame, method: str, metric: str) -> dict[int, np.ndarray]:
    """num_workers -> `metric` of each repetition, for the method's worker cells and the main process (0)."""
    mine = grp[(grp["num_workers"] == 0) | (grp["worker_method"] == method)]
    out = {int(nw): finite(c[metric]) for nw, c in mine.groupby("num_workers")}
    return {nw: v for nw, v in out.items() if len(v) >= MIN_N}


def _best(grp: pd.DataFrame, method: str, share: float = 1.0) -> tuple[int, np.ndarray] | None:
    """(num_workers, throughputs) of the fewest workers whose median is at least `share` of the method's best
    median (1.0: the best itself), the main process included; None without such cells."""
    cells = _cells(grp, method, "samples_per_s")
    if not cells:
        return None
    top = max(float(np.median(v)) for v in cells.values())
    nw = min(n for n, v in cells.items() if float(np.median(v)) >= share * top)
    return nw, cells[nw]


def _of(grp: pd.DataFrame, method: str, nw: int, metric: str) -> np.ndarray:
    cell = grp[(grp["num_workers"] == nw) & ((grp["worker_method"] == method) if nw else True)]
    return finite(cell[metric]) if metric in cell else np.array([])


def _where(workload: str, cores: int, loader: str) -> str:
    return f"{workload}, {cores} core{'s' if cores > 1 else ''}" + (f", {loader}" if loader != "nodes" else "")


def threads_serialize_python(rows: pd.DataFrame) -> Outcome:
    checks = []
    for workload, cores, loader, grp in _groups(rows, PURE_PYTHON):
        if cores < 2:
            continue
        main = _of(grp, "thread", 0, "samples_per_s")
        t, p = _best(grp, "thread"), _best(grp, "process")
        if t is None or p is None or len(main) < MIN_N:
            continue
        o_t = decide_shift(main, t[1], at_most(THREADS_CAP), label=f"best thread (w={t[0]}) / main process")
        o_p = decide_shift(main, p[1], at_least(PROCESS_GAIN), label=f"best process (w={p[0]}) / main process")
        where = _where(workload, cores, loader)
        if o_t.verdict == HOLDS and o_p.verdict != HOLDS:
            text = f"{where}: {o_t.evidence}, but processes did not use the cores either ({o_p.evidence})"
            checks.append(Outcome(INCONCLUSIVE, text))
        else:
            checks.append(Outcome(o_t.verdict, f"{where}: {o_t.evidence}; {o_p.evidence}"))
    return all_of(checks, f"{_NEEDS}, for the cpu workload on 2 or more cores")


def threads_scale_released_work(rows: pd.DataFrame) -> Outcome:
    checks = []
    for workload, cores, loader, grp in _groups(rows, GIL_RELEASING):
        t, p = _best(grp, "thread"), _best(grp, "process")
        if t is None or p is None:
            continue
        o = decide_shift(p[1], t[1], at_least(SCALE_KEEP), label=f"best thread (w={t[0]}) / best process (w={p[0]})")
        checks.append(Outcome(o.verdict, f"{_where(workload, cores, loader)}: {o.evidence}"))
    return all_of(checks, f"{_NEEDS}, for a GIL-releasing workload ({', '.join(GIL_RELEASING)})")


def threads_use_less_memory(rows: pd.DataFrame) -> Outcome:
    checks = []
    for workload, cores, loader, grp in _groups(rows, GIL_RELEASING):
        t, p = _best(grp, "thread", REACH), _best(grp, "process", REACH)
        if t is None or p is None or t[0] == p[0] == 0:
            continue  # both reach their best in the main process: no worker of either kind to compare
        pt, pp = _of(grp, "thread", t[0], "pss_peak_bytes"), _of(grp, "process", p[0], "pss_peak_bytes")
        o = decide_shift(pp, pt, at_most(MEMORY_CUT), label=f"PSS threads (w={t[0]}) / processes (w={p[0]})")
        mib = f"{g(np.median(pt) / 2**20)} v {g(np.median(pp) / 2**20)} MiB" if len(pt) and len(pp) else ""
        checks.append(Outcome(o.verdict, f"{_where(workload, cores, loader)}: {mib}, {o.evidence}"))
    return all_of(checks, f"{_NEEDS}, with pss_peak_bytes, for a GIL-releasing workload")


def _started(rows: pd.DataFrame) -> pd.DataFrame:
    """The worker cells with a time to first batch, at the num_workers both kinds ran with MIN_N of them each."""
    ok = _rows(rows)
    ok = ok[ok["workload"].isin(PURE_PYTHON + GIL_RELEASING) & ok["worker_method"].isin(("thread", "process"))]
    ok = ok[(ok["num_workers"] > 0) & np.isfinite(pd.to_numeric(col(ok, "time_to_first_batch_s"), errors="coerce"))]
    cell = ["workload", "cores", "loader", "num_workers"]
    ok = ok[ok.groupby([*cell, "worker_method"])["num_workers"].transform("size") >= MIN_N]
    return ok[ok.groupby(cell)["worker_method"].transform("nunique") == 2]


threads_start_faster = Shift(
    "time_to_first_batch_s",
    "time to first batch",
    {"worker_method": "process", "num_workers": MOST},
    {"worker_method": "thread", "num_workers": MOST},
    at_most(FIRST_BATCH_CUT),
    ("workload", "cores", "loader"),
    names=("process workers", "thread workers"),
    frame=_started,
    aside=medians("time_to_first_batch_s", " ms", 1e3),
    note=f"the most workers: the most both kinds ran, {MIN_N} ok repetitions each",
)


def _pure(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["workload"].isin(PURE_PYTHON)] if "workload" in rows else rows


QUESTION = Question(
    "threads",
    tuple("workload loader worker_method num_workers cores cpu_work zlib_kb sleep_ms decoder jpeg_stage".split()),
    lambda rows: varies(rows, "worker_method"),
    figure="loaderbench.analysis.figures.questions.threads:thread_process_curves",
)
QUESTION.add(
    "because of the GIL, thread workers do not scale pure-Python work past one core",
    f"cpu workload, 2 or more cores: holds if the best thread cell's throughput is at most {THREADS_CAP:g}x "
    f"the main process's (num_workers = 0) while the best process cell's is at least {PROCESS_GAIN:g}x (the "
    "cores were there to use); does not hold if threads exceed it",
    quiet(threads_serialize_python, select=_pure),
    number=6,
)
QUESTION.add(
    "thread workers scale GIL-releasing work (zlib, JPEG decode and augment, waiting) as processes do",
    f"{', '.join(GIL_RELEASING)} workloads, each core count: holds if the best thread cell's throughput is "
    f"at least {SCALE_KEEP:g}x the best process cell's",
    threads_scale_released_work,
)
QUESTION.add(
    "thread workers reach their best throughput with less memory than process workers",
    f"{', '.join(GIL_RELEASING)} workloads, each core count: at the fewest workers within {REACH:g}x of "
    f"each method's best throughput, holds if the cell's PSS (main and workers) with threads is at most "
    f"{MEMORY_CUT:g}x that with processes",
    threads_use_less_memory,
)
QUESTION.add("thread workers deliver the first batch sooner than process workers", threads_start_faster)

"""Checkpointable loading (torchdata's StatefulDataLoader): what snapshots every n steps cost in throughput, and
what a loader resumed after a kill replays and delivers.

torchdata 0.11 restores the last snapshot and loads the steps since it again, discarding them: a resume at step
k replays (k mod n) batches (none with num_workers = 0, whose state is taken at the step itself). The rules
below check that on the records rather than assume it.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.claim import Question, finite, g, pick, values_of, varies, with_workers
from loaderbench.analysis.table.records import col, is_true, ok_rows
from loaderbench.stats.verdicts import NOT_MEASURED, Outcome, all_of, at_least, decide_shift, fact

#: "costs throughput": the plain DataLoader is at least this many times faster than snapshots every step.
COST_MIN = 1.05
#: "the cost falls as n grows": snapshots every 64 steps at least this many times faster than every step.
FALLS_MIN = 1.05
_NEEDS = "needs snapshot_every_n_steps 0 (plain) and >= 1 cells with workers, without resume_at"
_NEEDS_RESUME = "needs cells with resume_at > 0"


def throughput_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Ok rows measured without interruption (resume_at 0 or not applicable)."""
    ok = ok_rows(rows)
    at = pd.to_numeric(col(ok, "resume_at", 0), errors="coerce").fillna(0)
    return ok[at == 0]


def resume_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Every row of a cell with resume_at > 0, failed ones included (a failed resume is evidence too)."""
    at = pd.to_numeric(col(rows, "resume_at", 0), errors="coerce").fillna(0)
    return rows[at > 0]


def _groups(ok: pd.DataFrame):
    """(label, rows) per workload, cores and num_workers > 0."""
    keys = [k for k in ("workload", "cores", "num_workers") if k in ok]
    for key, grp in with_workers(ok).groupby(keys, sort=True):
        label = ", ".join(f"{k}={v if isinstance(v, str) else int(v)}" for k, v in zip(keys, key))
        yield label, grp


def _rates(grp: pd.DataFrame, n: int) -> np.ndarray:
    return finite(pick(grp, snapshot_every_n_steps=n)["samples_per_s"])


def _decided_on(ok: pd.DataFrame) -> str | None:
    """The group a throughput rule decides on: the cheapest samples (cpu when measured) on the most cores with
    the most workers, where a per-step cost is the largest share of a step; the others are evidence."""
    labels = [label for label, _ in _groups(ok)]
    if not labels:
        return None
    workloads = values_of(ok, "workload")
    workload = "cpu" if "cpu" in workloads else workloads[0]
    top = ok[ok["workload"] == workload]
    cores, nw = int(top["cores"].max()), int(top["num_workers"].max())
    return f"workload={workload}, cores={cores}, num_workers={nw}"


def _compare(rows: pd.DataFrame, slow: int, fast: int, least: float, what: str) -> Outcome:
    """samples/s at `fast` over `slow` snapshots, decided on one group (`_decided_on`), the others listed."""
    ok = throughput_rows(rows)
    decided_on = _decided_on(ok)
    decided, others = None, []
    for label, grp in _groups(ok):
        a, b = _rates(grp, slow), _rates(grp, fast)
        if not (len(a) and len(b)):
            continue
        o = decide_shift(a, b, at_least(least), label=what)
        if label == decided_on:
            decided = o
        else:
            others.append(f"{label}: {g(np.median(b) / np.median(a))}x ({o.verdict})")
    if decided is None:
        return Outcome(NOT_MEASURED, _NEEDS)
    rest = f"; elsewhere {'; '.join(others)}" if others else ""
    return Outcome(decided.verdict, f"{decided_on}: {decided.evidence}{rest}")


def snapshots_cost(rows: pd.DataFrame) -> Outcome:
    return _compare(rows, 1, 0, COST_MIN, "samples/s plain / every step")


def cost_falls_with_n(rows: pd.DataFrame) -> Outcome:
    return _compare(rows, 1, 64, FALLS_MIN, "samples/s every 64 steps / every step")


def _replay_by_n(rows: pd.DataFrame):
    """(num_workers, resume_at, {n: median replayed samples}) of the ok resume rows with workers."""
    ok = with_workers(ok_rows(resume_rows(rows)))
    for (nw, at), grp in ok.groupby(["num_workers", "resume_at"], sort=True):
        med = grp.groupby("snapshot_every_n_steps")["resume_replayed_samples"].median()
        if len(med) >= 2:
            yield int(nw), int(at), {int(n): float(v) for n, v in med.items()}


def replay_grows_with_n(rows: pd.DataFrame) -> Outcome:
    checks = []
    for nw, at, med in _replay_by_n(rows):
        ns = sorted(med)
        values = [med[n] for n in ns]
        grows = all(b >= a for a, b in itertools.pairwise(values)) and values[-1] > values[0]
        shown = ", ".join(f"n={n}: {g(med[n])}" for n in ns)
        checks.append(fact(grows, f"w={nw}, resume at step {at}: replayed samples {shown}"))
    return all_of(checks, "needs resume_at > 0 cells with workers at two or more snapshot_every_n_steps")


def expected_replay(row) -> float:
    """What torchdata 0.11's resume loads again: the steps since the last snapshot, none without workers."""
    if not (row["num_workers"] > 0):
        return 0.0
    return float((int(row["resume_at"]) % int(row["snapshot_every_n_steps"])) * int(row["batch_size"]))


def replay_bound(rows: pd.DataFrame) -> Outcome:
    ok = ok_rows(resume_rows(rows))
    if ok.empty:
        return Outcome(NOT_MEASURED, _NEEDS_RESUME)
    expected = ok.apply(expected_replay, axis=1)
    got = pd.to_numeric(ok["resume_replayed_samples"], errors="coerce")
    off = int((got != expected).sum())
    guess = ok["snapshot_every_n_steps"] * ok["batch_size"] * ok["num_workers"]
    with_workers = ok["num_workers"] > 0
    share = (got[with_workers] / guess[with_workers]).max() if with_workers.any() else float("nan")
    worst = (got / (ok["snapshot_every_n_steps"] * ok["batch_size"])).max()
    return fact(
        off == 0,
        f"{len(ok) - off} of {len(ok)} resumes replayed exactly (resume_at mod n) x batch_size samples "
        f"(0 without workers); the most any replayed is {g(worst)} x n x batch_size, and at most {g(share)} of "
        f"n x batch_size x num_workers (the bound the number of workers would suggest)",
    )


def resumes_exactly_once(rows: pd.DataFrame) -> Outcome:
    res = resume_rows(rows)
    if res.empty:
        return Outcome(NOT_MEASURED, _NEEDS_RESUME)
    ok = ok_rows(res)
    once = [is_true(a) and is_true(b) for a, b in zip(col(ok, "resume_exactly_once"), col(ok, "resume_same_order"))]
    good = ok[once] if len(ok) else ok
    failed = len(res) - len(ok)
    lost = int(pd.to_numeric(col(ok, "resume_lost"), errors="coerce").sum())
    dup = int(pd.to_numeric(col(ok, "resume_duplicated"), errors="coerce").sum())
    workers = ", ".join(str(int(w)) for w in values_of(ok, "num_workers"))
    methods = ", ".join(values_of(ok, "start_method")) or "none"
    return fact(
        failed == 0 and len(good) == len(res),
        f"{len(good)} of {len(res)} resumed epochs (num_workers {workers}; start methods {methods}) delivered "
        f"the uninterrupted epoch's samples in its order: {lost} lost, {dup} duplicated, {failed} resumes failed",
    )


_needs_resume = lambda rows: bool((pd.to_numeric(col(rows, "resume_at", 0), errors="coerce").fillna(0) > 0).any())


QUESTION = Question(
    "checkpointing",
    ("snapshot_every_n_steps", "resume_at", "num_workers", "cores", "workload"),
    lambda rows: varies(rows, "snapshot_every_n_steps"),
    figure="loaderbench.analysis.figures.questions.checkpointing:snapshot_cost_against_replay",
)
QUESTION.add(
    "frequent snapshots cost throughput (snapshot_every_n_steps = 1 against the plain DataLoader)",
    f"with workers, uninterrupted, on the cheapest samples (cpu) with the most cores and workers: holds if "
    f"the plain DataLoader's samples/s is at least {COST_MIN:g}x that of snapshots every step",
    snapshots_cost,
    number=49,
)
QUESTION.add(
    "the snapshots' cost falls as snapshot_every_n_steps grows",
    f"with workers, uninterrupted, on the cheapest samples (cpu) with the most cores and workers: holds if "
    f"snapshots every 64 steps give at least {FALLS_MIN:g}x the samples/s of snapshots every step",
    cost_falls_with_n,
    number=49,
)
QUESTION.add(
    "rarer snapshots replay more samples on recovery",
    "resume_at > 0 with workers: holds if, at every num_workers and resume step, the median replayed "
    "samples never fall and rise from the smallest snapshot_every_n_steps to the largest",
    replay_grows_with_n,
    needs=_needs_resume,
    number=49,
)
QUESTION.add(
    "a resume replays the steps since the last snapshot: (resume_at mod n) x batch_size samples, at most "
    "(n - 1) x batch_size whatever num_workers, none without workers",
    "resume_at > 0: holds if every ok resume replayed exactly that many samples (counted as the loads "
    "the resumed process made beyond what it delivered)",
    replay_bound,
    needs=_needs_resume,
)
QUESTION.add(
    "a loader resumed after a SIGKILL delivers every sample of the epoch exactly once, in order",
    "resume_at > 0: holds if every resume succeeded and the samples before the checkpoint and after the "
    "resume are the uninterrupted epoch's, none lost, none twice, in its order",
    resumes_exactly_once,
    needs=_needs_resume,
)

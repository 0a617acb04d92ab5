"""Cheap work on data already in memory: below which per-sample cost does loading in the main process
(num_workers = 0) beat every number of workers?

The `inmem` workload hands out samples held in memory (`sample_bytes` each) after `work_us` microseconds of CPU
work. A worker's batch costs what the main process does not pay at num_workers = 0: the batch is collated into
shared memory, pickled and sent through a queue, and the main process maps and unpickles it. Where the work
is cheap, that hand-over costs more than the parallel work saves; the crossover is the per-sample cost where
workers start to win, found per sample size and cores, with the grid's interval around it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from loaderbench.analysis.rules.claim import NOISY, Question, finite, narrow, quiet
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.analysis.text import size_text
from loaderbench.stats.verdicts import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIN_EFFECT,
    NOT_MEASURED,
    Outcome,
    at_least,
    decide_shift,
    g,
)

WORKLOAD = "inmem"
#: "wins": one loader's throughput at least this many times the other's
WIN = 1 + MIN_EFFECT
_READ = ["status", "cell_id", "workload", "num_workers", "cores", "work_us", "sample_bytes", "samples_per_s"]
ZERO, WORKERS, OPEN = "0 workers win", "workers win", "neither shown"


@dataclass(frozen=True)
class Crossover:
    """One sample size on one core count: the state at each per-sample cost measured, and the crossover's
    interval (below: the most work up to which 0 workers won at every cost; above: the least work past it at
    which some num_workers won). None where the grid does not bound it on that side. `reps`: the fewest ok
    repetitions of any cell each state was decided on, per cost."""

    cores: int
    sample_bytes: int
    states: dict[float, str]
    below: float | None
    above: float | None
    reps: dict[float, int]

    @property
    def label(self) -> str:
        return f"{self.cores} core{'s' if self.cores != 1 else ''}, {size_text(self.sample_bytes)}"

    def text(self) -> str:
        """The crossover in words: its interval, or which side of the grid it lies beyond."""
        if self.below is None and self.above is not None:
            return f"workers win already at {us(min(self.states))} µs: below the grid"
        if self.below is None:
            return "0 workers do not win at the cheapest work: no crossover shown"
        if self.above is None:
            return (
                f"0 workers win up to {us(self.below)} µs and no num_workers wins up to {us(max(self.states))} µs: "
                "above the grid"
            )
        return f"between {us(self.below)} and {us(self.above)} µs per sample"


def us(x: float) -> str:
    """Microseconds as printed: 1,000 rather than 1e+03."""
    return f"{x:,.0f}" if x >= 10 else g(x)


def inmem_rows(rows: pd.DataFrame) -> pd.DataFrame:
    ok = ok_rows(narrow(rows, _READ))
    return ok[col(ok, "workload") == WORKLOAD] if not ok.empty else ok


def _state(zero, others: dict[int, list]) -> str:
    """ZERO when num_workers = 0 beats every num_workers by WIN, WORKERS when some num_workers beats it by WIN,
    else OPEN."""
    outs = [decide_shift(v, zero, at_least(WIN)) for v in others.values()]
    if outs and all(o.verdict == HOLDS for o in outs):
        return ZERO
    if any(decide_shift(zero, v, at_least(WIN)).verdict == HOLDS for v in others.values()):
        return WORKERS
    return OPEN


def crossovers(rows: pd.DataFrame) -> list[Crossover]:
    """Every (cores, sample size) with a num_workers = 0 cell and cells with workers at two or more costs."""
    ok = inmem_rows(rows)
    out = []
    if ok.empty:
        return out
    for (cores, size), grp in ok.groupby(["cores", "sample_bytes"], sort=True):
        states, reps = {}, {}
        for work, cell in grp.groupby("work_us", sort=True):
            by = {int(n): finite(r["samples_per_s"]) for n, r in cell.groupby("num_workers")}
            zero, others = by.pop(0, []), {n: v for n, v in by.items() if len(v) >= 3}
            if len(zero) < 3 or not others:
                continue
            reps[float(work)] = min(len(zero), *(len(v) for v in others.values()))
            states[float(work)] = _state(zero, others)
        if len(states) < 2:
            continue
        works = sorted(states)
        below = None
        for w in works:
            if states[w] != ZERO:
                break
            below = w
        above = next((w for w in works if (below is None or w > below) and states[w] == WORKERS), None)
        out.append(Crossover(int(cores), int(size), states, below, above, reps))
    return out


def zero_wins_when_cheap(rows: pd.DataFrame) -> Outcome:
    found = crossovers(rows)
    if not found:
        return Outcome(
            NOT_MEASURED,
            f"needs {WORKLOAD} cells at num_workers = 0 and with workers at two or more work_us, 3 ok repetitions",
        )
    parts = [f"{c.label}: {c.text()}" for c in found]
    cheapest = {c.label: c.states[min(c.states)] for c in found}
    if any(s == WORKERS for s in cheapest.values()):
        verdict = FAILS
    elif all(s == ZERO for s in cheapest.values()):
        verdict = HOLDS
    else:
        verdict = INCONCLUSIVE
    return Outcome(verdict, "; ".join(parts))


def _needs(rows: pd.DataFrame) -> bool:
    ok = inmem_rows(rows)
    return not ok.empty and bool((ok["num_workers"] == 0).any()) and bool((ok["num_workers"] > 0).any())


QUESTION = Question(
    "cheap-work",
    ("work_us", "sample_bytes", "num_workers", "cores"),
    _needs,
    figure="loaderbench.analysis.figures.questions.cheap_work:crossover_by_sample_size",
)
QUESTION.add(
    "num_workers = 0 wins when the per-sample work is cheap and the data is in memory",
    f"per cores and sample size: at each work_us, 0 workers win if their throughput is at least {WIN:g}x every "
    f"num_workers', workers win if some num_workers reaches {WIN:g}x theirs; holds if 0 workers win at the "
    "cheapest work at every sample size, does not hold if workers win there anywhere; the crossover lies "
    "between the most work up to which 0 workers won throughout and the least work past it at which workers "
    f"won; inconclusive when repetitions scatter by more than {NOISY:.0%} of their median",
    quiet(zero_wins_when_cheap, select=inmem_rows),
    number=2,
)

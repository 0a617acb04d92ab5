"""Loading beside a training step: whether workers overlap the two (a step then takes about max(load, train),
not their sum) and where throughput saturates (the knee at ceil(T_prep / T_train) workers, capped by the cores).

Read from cells whose consumer is a simulated step that sleeps (gpu-feed-small on a machine without a GPU): the
step's time per batch, T_train, is then exactly step_ms and frees the core while it runs. Without workers the
main process loads, then steps, so the 0-worker cell gives T_load = its seconds per batch - T_train. That is
also T_prep, the time one process takes to prepare a batch. (A one-worker cell's seconds per batch is not: with
the step beside it, it reads max(T_prep, T_train), so a step longer than the loading would hide T_prep.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.claim import Claim, finite, narrow
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import (
    INCONCLUSIVE,
    MIN_EFFECT,
    Outcome,
    all_of,
    at_least,
    at_most,
    both,
    decide_shift,
    g,
)

#: max(load, train) and their sum must differ by at least this share of the sum for the rule to tell them apart.
APART = 0.10
#: "saturates past the knee": no num_workers above the knee reaches this many times the throughput at the knee,
#: and the knee reaches it over one worker fewer.
KNEE_GAIN = 1 + MIN_EFFECT
_READ = ["status", "cell_id", "num_workers", "cores", "batch_size", "step_ms", "step_kind", "consumer", "samples_per_s"]


def stepped_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Ok rows whose consumer is a simulated step that sleeps for step_ms > 0 per batch."""
    ok = ok_rows(narrow(rows, _READ))
    if ok.empty:
        return ok
    keep = col(ok, "consumer").astype(str).str.startswith("simulated")
    keep &= pd.to_numeric(col(ok, "step_ms", 0.0), errors="coerce").fillna(0.0) > 0
    keep &= col(ok, "step_kind").fillna("sleep").astype(str) == "sleep"
    return ok[keep]


def _groups(rows: pd.DataFrame, checks: list[Outcome]) -> Iterator[tuple[str, int, float, float, dict]]:
    """(label, cores, T_train and the loading time beside it at 0 workers in s, {num_workers: seconds per batch of
    each repetition}) per cores, batch size and step measured at 0 and 1 workers with 3 ok repetitions each; a group
    whose loading took no measurable time adds an inconclusive check to `checks` instead."""
    ok = stepped_rows(rows)
    if ok.empty:
        return
    for (cores, bs, step), grp in ok.groupby(["cores", "batch_size", "step_ms"], sort=True):
        t = {
            int(n): finite(float(bs) / pd.to_numeric(r["samples_per_s"], errors="coerce"))
            for n, r in grp.groupby("num_workers")
        }
        if len(t.get(0, [])) < 3 or len(t.get(1, [])) < 3:
            continue
        label = f"{int(cores)} core{'s' if cores != 1 else ''}, batch {int(bs)}, step {g(step)} ms"
        train = float(step) / 1000
        load = float(np.median(t[0])) - train
        if load <= 0:
            checks.append(Outcome(INCONCLUSIVE, f"{label}: loading took no measurable time beside the step"))
            continue
        yield label, int(cores), train, load, t


def step_is_max_not_sum(rows: pd.DataFrame) -> Outcome:
    checks: list[Outcome] = []
    untold = []
    for label, _, train, load, t in _groups(rows, checks):
        p = max(load, train) / (load + train)
        head = f"{label}: T_load {g(1000 * load)} ms, T_train {g(1000 * train)} ms, max / sum {g(p)}"
        if 1 - p < APART:  # such a step cannot tell max from sum: shown, not judged
            untold.append(f"{head}: max and sum within {APART:.0%} of each other, not judged")
            continue
        mid = (1 + p) / 2
        o = decide_shift(t[0], t[1], at_most(mid), label="seconds per batch 1 worker / 0 workers")
        checks.append(Outcome(o.verdict, f"{head}: {o.evidence}"))
    o = all_of(
        checks,
        "needs simulated-step cells at num_workers = 0 and 1, 3 ok repetitions each, with a step "
        f"that makes max(load, train) and their sum differ by {APART:.0%} or more",
    )
    return Outcome(o.verdict, "; ".join([o.evidence, *untold]))


def knee_at_prep_over_train(rows: pd.DataFrame) -> Outcome:
    checks: list[Outcome] = []
    capped = []
    for label, cores, train, prep, t in _groups(rows, checks):
        knee = max(1, math.ceil(prep / train - 1e-9))
        head = f"{label}: T_prep {g(1000 * prep)} ms (at 0 workers), knee ceil(T_prep / T_train) = {knee}"
        if knee >= cores:  # the cores would stop the curve there anyway: that tests the cores, not the formula
            capped.append(f"{head}: at or above the {cores} cores, not judged")
            continue
        if knee not in t or not any(n > knee for n in t):
            checks.append(Outcome(INCONCLUSIVE, f"{head}: num_workers = {knee} and above it were not all measured"))
            continue
        rate = {n: 1 / v for n, v in t.items()}
        parts = [
            decide_shift(rate[knee], rate[n], at_most(KNEE_GAIN), label=f"samples/s w={n} / w={knee}")
            for n in sorted(t)
            if n > knee
        ]
        if knee > 1 and knee - 1 in t:
            parts.insert(
                0, decide_shift(rate[knee - 1], rate[knee], at_least(KNEE_GAIN), label=f"w={knee} / w={knee - 1}")
            )
        o = both(*parts)
        checks.append(Outcome(o.verdict, f"{head}: {o.evidence}"))
    o = all_of(
        checks,
        "needs simulated-step cells at 0 and 1 workers and past the predicted knee, 3 ok repetitions each, with a "
        "step long enough that the knee falls below the cores",
    )
    return Outcome(o.verdict, "; ".join([o.evidence, *capped]))


def _has_step(rows: pd.DataFrame) -> bool:
    ok = stepped_rows(rows)
    return not ok.empty and ok["num_workers"].nunique() >= 2


CLAIMS = [
    Claim(
        "gpu-feed",
        "with workers, a step takes about max(load, train), not their sum",
        f"simulated step that sleeps step_ms per batch, per cores: T_load = seconds per batch at 0 workers - "
        f"T_train; holds if seconds per batch at 1 worker over 0 workers lies at or below the midpoint between "
        f"max(T_load, T_train) / (T_load + T_train) and 1 (nearer max than sum), does not hold if above it; "
        f"steps where max and sum differ by less than {APART:.0%} are shown, not judged",
        step_is_max_not_sum,
        needs=_has_step,
        number=3,
        study="gpu-feed-small",
    ),
    Claim(
        "gpu-feed",
        "throughput saturates at ceil(T_prep / T_train) workers; more only fill queues",
        f"simulated step, per cores and step: T_prep = seconds per batch at 0 workers - T_train; where the knee "
        f"ceil(T_prep / T_train) falls below the cores (else the cores, not the formula, would stop the curve), holds "
        f"if no num_workers above the knee reaches {KNEE_GAIN:g}x its throughput at the knee, and the knee reaches it "
        "over one worker fewer",
        knee_at_prep_over_train,
        needs=_has_step,
        number=4,
        study="gpu-feed-small",
    ),
]

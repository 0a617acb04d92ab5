"""in_order=False with stragglers: the tail of the batch wait, throughput and order.

Three settings: no straggler (the control), occasional stragglers (one sample in `slow_every` waits
slow_worker_ms more, whichever worker loads it: the occasional slow batch the in_order=False advice is about),
and a permanent one (worker 0 waits slow_worker_ms more on every sample: the harshest case, the suite's own)."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.rules.claim import EXTENSION, Metric, Question, finite, g, missing, pick, varies
from loaderbench.analysis.rules.kinds import Equivalent, Shift, medians
from loaderbench.analysis.table.derive import straggler_ms
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, Outcome, all_of, at_most, fact

#: "cuts the tail": the p99 batch wait out of order at least this share below in order.
TAIL_CUT = 0.20
#: "about the same throughput": out of order within this share of in order, either way (an equivalence).
THROUGHPUT_KEEP = 0.10
#: the straggler settings: none, occasional (slow_every > 0), worker 0 on every sample
NONE, OCCASIONAL, PERMANENT = "none", "occasional", "permanent"
#: repetitions per cell the order rule compares
ORDER_REPS = 3


def _in_order(rows):
    ok = ok_rows(rows)
    slow = straggler_ms(ok)
    every = pd.to_numeric(col(ok, "slow_every", 0), errors="coerce").fillna(0)
    kind = [NONE if s <= 0 else OCCASIONAL if e > 0 else PERMANENT for s, e in zip(slow, every)]
    setting = [_setting(s, e) for s, e in zip(slow, every)]
    return ok.assign(slow=slow, every=every, straggler=kind, **{"straggler setting": setting})


def _setting(slow: float, every: float) -> str:
    if slow <= 0:
        return "no straggler"
    if every > 0:
        return f"occasional stragglers (+{slow:g} ms on 1 sample in {int(every)})"
    return f"straggler +{slow:g} ms/sample"


_PER = ("num_workers", "straggler setting")
_SIDES = ({"in_order": True}, {"in_order": False})

out_of_order_cuts_tail = Shift(
    "batch_wait_p99_s",
    "the p99 batch wait",
    *_SIDES,
    at_most(1 - TAIL_CUT),
    _PER,
    where={"straggler": PERMANENT},
    frame=_in_order,
    aside=medians("batch_wait_p99_s", " ms", 1e3),
    note="a permanent straggler: worker 0, slow_worker_ms > 0 on every sample",
)


def out_of_order_keeps_throughput(*kinds: str) -> Shift:
    """The equivalence "about the same throughput" at every num_workers of the straggler settings `kinds`."""
    return Equivalent(
        "samples_per_s", "throughput", *_SIDES, THROUGHPUT_KEEP, per=_PER, where={"straggler": kinds}, frame=_in_order
    )


def _orders(ok: pd.DataFrame, in_order: bool):
    """(num_workers, straggler ms, out-of-order counts, fingerprints) per configuration with a permanent
    straggler."""
    for (nw, slow), grp in ok[ok["straggler"] == PERMANENT].groupby(["num_workers", "slow"]):
        cell = pick(grp, in_order=in_order)
        cell = cell[cell["order_fingerprint"].notna()]
        if len(cell) >= ORDER_REPS:
            yield nw, slow, finite(cell["order_out_of_order"]), list(cell["order_fingerprint"])


def out_of_order_not_deterministic(rows: pd.DataFrame) -> Outcome:
    """#48: with a straggler, in order always delivers in the sampler's order; out of order delivers away from it,
    and in a different pattern from one repetition to the next (counted facts)."""
    ok = _in_order(rows)
    if "order_fingerprint" not in ok:
        return missing("the records carry no delivery order (measured since the order metrics exist)")
    checks = []
    for nw, slow, moved, _ in _orders(ok, True):
        checks.append(
            fact(
                not (moved > 0).any(),
                f"w={int(nw)}, straggler +{slow:g} ms/sample, in order: {int((moved > 0).sum())} of {len(moved)} "
                "repetitions delivered away from the sampler's order",
            )
        )
    for nw, slow, moved, prints in _orders(ok, False):
        head = f"w={int(nw)}, straggler +{slow:g} ms/sample, out of order: {int((moved > 0).sum())} of {len(moved)}"
        text = f"{head} repetitions reordered (median {g(float(pd.Series(moved).median()))} batches), " + (
            f"{len(set(prints))} distinct orders in {len(prints)} repetitions"
        )
        if not (moved > 0).any():
            checks.append(Outcome(FAILS, text))
        elif len(set(prints)) > 1:
            checks.append(Outcome(HOLDS, text))
        else:
            checks.append(Outcome(INCONCLUSIVE, text + ": reordered, but the same way every time here"))
    return all_of(checks, f"needs in_order true and false cells with a straggler, {ORDER_REPS} repetitions each")


QUESTION = Question(
    "in-order",
    ("in_order", "slow_worker_ms", "slow_every", "num_workers"),
    lambda rows: varies(rows, "in_order") and "slow_worker_ms" in rows,
    figure="loaderbench.analysis.figures.questions.in_order:tail_latency_in_order",
    tables={
        "in-order": (Metric("batch_wait_p99_s", "batch wait p99 (ms)", 1e-3), Metric("samples_per_s", "samples/s"))
    },
)
QUESTION.add("in_order=False cuts the tail batch wait when a worker straggles", out_of_order_cuts_tail, number=46)
QUESTION.add(
    "in_order=False leaves mean throughput about the same, with occasional stragglers or none",
    out_of_order_keeps_throughput(NONE, OCCASIONAL),
    number=47,
)
QUESTION.add(
    "in_order=False leaves mean throughput about the same when one worker is slow on every sample",
    out_of_order_keeps_throughput(PERMANENT),
    number=47,
    role=EXTENSION,
    setting="with one worker slow on every sample",
)
QUESTION.add(
    "in_order=False gives up deterministic order",
    "the sleep workload's batches matched to their place in the sampler's order; with a permanent straggler, "
    f"{ORDER_REPS} or more repetitions per cell: holds if in order no repetition left the sampler's order "
    "and out of order some did, with two or more distinct delivery orders across repetitions; does not hold "
    "if in order reordered or out of order never did; inconclusive if out of order reordered the same way "
    "every time",
    out_of_order_not_deterministic,
    number=48,
)

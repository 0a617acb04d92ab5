"""in_order=False with a straggling worker: the tail of the batch wait, and throughput."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.claims.claim import Claim, Question, finite, g, missing, pick, varies
from loaderbench.analysis.derive import straggler_ms
from loaderbench.analysis.table import ok_rows
from loaderbench.stats.verdicts import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Outcome,
    all_of,
    at_most,
    decide_shift,
    fact,
    within,
)

#: "cuts the tail": the p99 batch wait out of order at least this share below in order.
TAIL_CUT = 0.20
#: "about the same throughput": out of order within this share of in order, either way (an equivalence).
THROUGHPUT_KEEP = 0.10
_NEEDS = "needs in_order true and false cells with a straggler (slow_worker_ms > 0)"
#: repetitions per cell the order rule compares
ORDER_REPS = 3


def _in_order(rows):
    ok = ok_rows(rows)
    return ok.assign(slow=straggler_ms(ok))


def _with_straggler(ok: pd.DataFrame, metric: str):
    """(num_workers, straggler ms, in-order values, out-of-order values) of `metric` per configuration with a
    straggler, where both sides have at least 3 ok repetitions."""
    for (nw, slow), grp in ok[ok["slow"] > 0].groupby(["num_workers", "slow"]):
        t, f = (finite(pick(grp, in_order=v)[metric]) for v in (True, False))
        if len(t) >= 3 and len(f) >= 3:
            yield nw, slow, t, f


def out_of_order_cuts_tail(rows: pd.DataFrame) -> Outcome:
    ok = _in_order(rows)
    checks = []
    for nw, slow, t, f in _with_straggler(ok, "batch_wait_p99_s"):
        ctl = [
            finite(pick(ok[(ok["slow"] == 0) & (ok["num_workers"] == nw)], in_order=v)["batch_wait_p99_s"])
            for v in (True, False)
        ]
        o = decide_shift(t, f, at_most(1 - TAIL_CUT), label="p99 wait out of order / in order")
        base = (
            f" (no straggler: {g(1e3 * pd.Series(ctl[0]).median())} -> {g(1e3 * pd.Series(ctl[1]).median())} ms)"
            if len(ctl[0]) and len(ctl[1])
            else ""
        )
        checks.append(
            Outcome(
                o.verdict,
                f"w={int(nw)}, straggler +{slow:g} ms/sample, {g(1e3 * pd.Series(t).median())}"
                f" -> {g(1e3 * pd.Series(f).median())} ms: {o.evidence}{base}",
            )
        )
    return all_of(checks, _NEEDS)


def out_of_order_keeps_throughput(rows: pd.DataFrame) -> Outcome:
    checks = []
    for nw, slow, t, f in _with_straggler(_in_order(rows), "samples_per_s"):
        o = decide_shift(
            t, f, within(1 - THROUGHPUT_KEEP, 1 + THROUGHPUT_KEEP), label="samples/s out of order / in order"
        )
        checks.append(Outcome(o.verdict, f"w={int(nw)}, straggler +{slow:g} ms/sample: {o.evidence}"))
    return all_of(checks, _NEEDS)


def _orders(ok: pd.DataFrame, in_order: bool):
    """(num_workers, straggler ms, out-of-order counts, fingerprints) per configuration with a straggler."""
    for (nw, slow), grp in ok[ok["slow"] > 0].groupby(["num_workers", "slow"]):
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


def _needs(rows: pd.DataFrame) -> bool:
    return varies(rows, "in_order") and "slow_worker_ms" in rows


QUESTION = Question("in-order", ("in_order", "slow_worker_ms", "num_workers"), _needs)
QUESTION.claims.extend(
    [
        Claim(
            "in-order",
            "in_order=False cuts the tail batch wait when a worker straggles",
            f"with slow_worker_ms > 0, at every num_workers: holds if the p99 batch wait out of order is at most "
            f"{1 - TAIL_CUT:g}x that in order",
            out_of_order_cuts_tail,
            number=46,
        ),
        Claim(
            "in-order",
            "in_order=False leaves mean throughput about the same when a worker straggles",
            f"with slow_worker_ms > 0, at every num_workers: an equivalence, holds if the interval of throughput out "
            f"of "
            f"order over in order lies within {1 - THROUGHPUT_KEEP:g}..{1 + THROUGHPUT_KEEP:g}x, does not hold if it "
            "lies entirely outside",
            out_of_order_keeps_throughput,
            number=47,
        ),
        Claim(
            "in-order",
            "in_order=False gives up deterministic order",
            "the sleep workload's batches matched to their place in the sampler's order; with slow_worker_ms > 0, "
            f"{ORDER_REPS} or more repetitions per cell: holds if in order no repetition left the sampler's order "
            "and out of order some did, with two or more distinct delivery orders across repetitions; does not hold "
            "if in order reordered or out of order never did; inconclusive if out of order reordered the same way "
            "every time",
            out_of_order_not_deterministic,
            number=48,
        ),
    ]
)

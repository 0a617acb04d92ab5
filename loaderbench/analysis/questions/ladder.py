"""The tutorial's optimization ladder: each rung adds one change to the one above."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pandas as pd

from loaderbench.analysis.rules.claim import GPU_REFERENCE, NOISY, Question, finite, missing, pick, quiet
from loaderbench.analysis.rules.kinds import Aside, Shift
from loaderbench.analysis.rules.rows import listed
from loaderbench.analysis.table.derive import RUNGS, ladder_rung, on_gpu
from loaderbench.analysis.table.records import ok_rows
from loaderbench.stats.verdicts import NOT_MEASURABLE, NOT_MEASURED, Outcome, Region, at_least, decide_shift, within

#: The PyTorch tutorial's published cumulative speed-ups over its baseline (on a GPU).
PUBLISHED = {"+workers": 3.30, "+pin_memory": 3.33, "+persistent": 3.76, "+prefetcher": 3.77, "+batched": 11.55}
GPU_ONLY = ("+pin_memory", "+prefetcher")
#: "matches the published speed-up": the ratio's interval lies within this factor of it, either way.
LADDER_MATCH_FACTOR = 1.25
#: "speeds the loop up": each rung at least this many times the one before.
LADDER_STEP_MIN = 1.05
METRIC = "end_to_end_samples_per_s"
#: "a step gains about 1.0x": its ratio to the rung before lies within 1 -+ this (the equivalence margin of
#: in_order's "about the same throughput").
ABOUT_ONE = 0.10
#: the steps the tutorial reports as about 1.0x: (rung, the rung before)
FLAT_STEPS = (("+pin_memory", "+workers"), ("+prefetcher", "+persistent"))


def _ladder(rows):
    ok = ok_rows(rows).copy()
    if not ok.empty:
        ok["rung"] = ladder_rung(ok)
    return ok


def _off_gpu(o: Outcome, this: pd.DataFrame, why: str) -> Outcome | None:
    """Not measurable, `o`'s estimate kept and `why` added, where the rung (`this`) ran without a GPU; None where
    it ran on one or `o` is not measured yet."""
    if o.verdict == NOT_MEASURED or on_gpu(this):
        return None
    return Outcome(NOT_MEASURABLE, f"{o.evidence.split(': ')[0]}; {why}")


def ladder_matches(rung: str) -> Callable[[pd.DataFrame], Outcome]:
    published = PUBLISHED[rung]

    def rule(rows: pd.DataFrame) -> Outcome:
        ok = _ladder(rows)
        if ok.empty:
            return missing("no ok records")
        base, this = ok[ok["rung"] == "baseline"], ok[ok["rung"] == rung]
        o = decide_shift(
            finite(base[METRIC]),
            finite(this[METRIC]),
            within(published / LADDER_MATCH_FACTOR, published * LADDER_MATCH_FACTOR),
            label=f"{rung} / baseline (published {published:g}x)",
        )
        why = (
            "pin_memory was not in effect (no GPU)"
            if rung == "+pin_memory"
            else "the CUDA-stream prefetcher needs a GPU"
            if rung == "+prefetcher"
            else "the published numbers are for the model on a GPU"
        )
        where = f"consumer ran on {listed(this, 'consumer')}: {why}; run {QUESTION.study_file} on a machine with a GPU"
        return _off_gpu(o, this, where) or o

    rule.__name__ = f"ladder_matches_{rung}"
    return rule


def _step(rung: str, previous: str, region: Region, **fields) -> Shift:
    """End-to-end samples/s at `rung` over those at `previous`, against `region`."""
    return Shift(METRIC, "end-to-end samples/s", {"rung": previous}, {"rung": rung}, region, frame=_ladder, **fields)


def _gpu_only(kind: Shift, rung: str, why: str) -> Shift:
    """`kind`, not measurable (its ratio kept, `why` added) where `rung`'s step ran without a GPU."""
    return dataclasses.replace(kind, guard=lambda rows: _off_gpu(kind(rows), pick(_ladder(rows), rung=rung), why))


def ladder_step_helps(rung: str, previous: str) -> Shift:
    pub = PUBLISHED[rung] / PUBLISHED.get(previous, 1.0)
    return _step(
        rung,
        previous,
        at_least(LADDER_STEP_MIN),
        aside=Aside(lambda a, b: f"tutorial: {pub:.3g}x; model step on {listed(b, 'consumer')}", ("consumer",)),
        note=f"inconclusive when repetitions scatter by more than {NOISY:.0%} of their median: the cores were not "
        "the cells' own",
    )


def ladder_step_matches(rung: str, previous: str) -> Shift:
    """`rung` over `previous` within LADDER_MATCH_FACTOR of the tutorial's own step either way ("about 3x"), not
    measurable (its ratio kept) where `rung`'s step ran without a GPU: the tutorial's step is for its model on one."""
    pub = PUBLISHED[rung] / PUBLISHED[previous]
    band = within(pub / LADDER_MATCH_FACTOR, pub * LADDER_MATCH_FACTOR)
    note = f"the tutorial's step: {pub:.3g}x; not measurable unless the model step ran on a GPU"
    return _gpu_only(_step(rung, previous, band, note=note), rung, "the tutorial's step is for its model on a GPU")


def ladder_step_about_one(rung: str, previous: str) -> Shift:
    """The equivalence "about 1.0x" of `rung` over `previous`, not measurable (its ratio kept) where `rung`'s step
    ran without a GPU."""
    note = "not measurable unless the model step ran on a GPU (without one the step does nothing)"
    flat = _step(rung, previous, within(1 - ABOUT_ONE, 1 + ABOUT_ONE), note=note)
    return _gpu_only(flat, rung, "the step did nothing here: it needs a GPU")


QUESTION = Question(
    "ladder",
    ("num_workers", "pin_memory", "persistent_workers", "prefetcher", "batched", "prefetch_factor"),
    lambda rows: all(c in rows and bool((rows[c] == "tutorial").all()) for c in ("model", "workload")),
    reference=GPU_REFERENCE,
    figure="loaderbench.analysis.figures.questions.ladder:ladder_speedups",
)
for rung in RUNGS[1:]:
    QUESTION.add(
        f"tutorial ladder {rung}: {PUBLISHED[rung]}x over the baseline (published, GPU)",
        f"end-to-end samples/s over all batches, ratio to the baseline: holds if its interval lies within a "
        f"factor {LADDER_MATCH_FACTOR:g} of the published ratio, does not hold if it lies entirely outside; "
        "not measurable here unless the model step ran on a GPU (like-for-like with the tutorial; pin_memory "
        "and the prefetcher do nothing without one)",
        ladder_matches(rung),
        number=39,
    )
for rung, prev, number in (
    ("+workers", "baseline", 1),
    ("+persistent", "+pin_memory", 26),
    ("+persistent", "+pin_memory", 27),
    ("+batched", "+prefetcher", 42),
):
    QUESTION.add(
        f"{rung} speeds the tutorial's training loop up over {prev}"
        + (": restarting workers every epoch cost it time" if number == 26 else ""),
        ladder_step_helps(rung, prev),
        quiet(ladder_step_helps(rung, prev), METRIC),
        number=number,
    )
QUESTION.add(
    "+batched (__getitems__) gains about what the tutorial's step did over +prefetcher (3.06x)",
    ladder_step_matches("+batched", "+prefetcher"),
    number=42,
)
for rung, prev in FLAT_STEPS:
    QUESTION.add(
        f"{rung} alone gains about 1.0x over {prev} (the tutorial's step)", ladder_step_about_one(rung, prev), number=40
    )

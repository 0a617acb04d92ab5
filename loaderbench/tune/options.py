"""What a tune run may be asked: the objective, the margin that makes two settings "the same", how many
candidates reach the final rung and how many repetitions they get there, an optional memory cap.

`TuneOptions` is validated here once (bad values raise `TuneError`, which the CLI prints as one line with
exit status 2); the search and the result writer read it and never check it again.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from loaderbench.errors import LoaderbenchError

#: objective name -> the record metric it maximises
OBJECTIVES = {"steady": "samples_per_s", "end_to_end": "end_to_end_samples_per_s"}
#: two settings within this fraction of each other are "the same" (the cheaper one wins)
DEFAULT_MARGIN = 0.05
#: a screened candidate further than this below the best screened value does not reach the final rung:
#: one repetition on a shared machine varies by about this much
DEFAULT_REACH = 0.10
#: candidates brought to the full repetitions from the start: the best screened (2: and the cheapest within
#: reach, or the runner-up); others follow only when the spread of one repetition says they could beat it
DEFAULT_FINALISTS = 1
#: two-sided confidence of the intervals that drop or keep a finalist (3 v 3 repetitions reach exactly 90%)
DEFAULT_CONFIDENCE = 0.90


class TuneError(LoaderbenchError):
    """A tune run that cannot start: a bad option, or a study with nothing to tune."""


@dataclass(frozen=True)
class TuneOptions:
    """`repetitions`: per finalist (None: the study's [study] repetitions); `max_repetitions`: finalists not
    yet separated get more, up to this (None: `repetitions`, no extra rung)."""

    objective: str = "steady"
    margin: float = DEFAULT_MARGIN
    reach: float = DEFAULT_REACH
    finalists: int = DEFAULT_FINALISTS
    repetitions: int | None = None
    max_repetitions: int | None = None
    max_memory_mb: float | None = None
    confidence: float = DEFAULT_CONFIDENCE

    def __post_init__(self) -> None:
        problems = []
        if self.objective not in OBJECTIVES:
            problems.append(f"objective {self.objective!r}: allowed: {', '.join(OBJECTIVES)}")
        if not 0 < self.margin < 0.5:
            problems.append(f"margin {self.margin!r}: allowed: a fraction above 0 and below 0.5 (0.05 is 5%)")
        if not self.margin <= self.reach < 1:
            problems.append(f"reach {self.reach!r}: allowed: a fraction from the margin ({self.margin}) to below 1")
        if self.finalists < 1:
            problems.append(
                f"finalists {self.finalists!r}: allowed: 1 or more (the best screened, then the "
                "cheapest within reach, then the runners-up)"
            )
        if self.repetitions is not None and self.repetitions < 3:
            problems.append(f"repetitions {self.repetitions!r}: allowed: 3 or more (an interval needs 3)")
        if self.max_repetitions is not None and self.max_repetitions < (self.repetitions or 3):
            problems.append(
                f"max_repetitions {self.max_repetitions!r}: allowed: at least repetitions ({self.repetitions or 3})"
            )
        if self.max_memory_mb is not None and not self.max_memory_mb > 0:
            problems.append(f"max_memory_mb {self.max_memory_mb!r}: allowed: a positive number of MiB")
        if not 0.5 <= self.confidence < 1:
            problems.append(f"confidence {self.confidence!r}: allowed: from 0.5 to below 1")
        if problems:
            raise TuneError("tune: " + "; ".join(problems))

    @property
    def metric(self) -> str:
        return OBJECTIVES[self.objective]

    @property
    def max_memory_bytes(self) -> float | None:
        return None if self.max_memory_mb is None else self.max_memory_mb * 2**20

    def rungs(self, study_repetitions: int) -> tuple[int, ...]:
        """Repetitions per finalist at each rung after the screen: the final count, then the extra rung."""
        reps = self.repetitions or max(3, study_repetitions)
        top = max(reps, self.max_repetitions or reps)
        return (reps,) if top == reps else (reps, top)

    def describe(self) -> dict:
        return {
            "objective": self.objective,
            "metric": self.metric,
            "margin": self.margin,
            "reach": self.reach,
            "finalists": self.finalists,
            "repetitions": self.repetitions,
            "max_repetitions": self.max_repetitions,
            "max_memory_mb": self.max_memory_mb,
            "confidence": self.confidence,
        }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The tune options, for `loaderbench tune` and `loaderbench submit --tune`."""
    p.add_argument(
        "--objective",
        choices=list(OBJECTIVES),
        default="steady",
        help="what to maximise: steady (steady-state samples/s, default) or end_to_end (samples/s of "
        "whole epochs, start-up included)",
    )
    p.add_argument(
        "--max-memory-mb",
        type=float,
        default=None,
        metavar="MIB",
        help="only settings whose cell's USS peak (main + workers, median over repetitions) stays at or "
        "under this many MiB (default: no cap)",
    )
    p.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_MARGIN,
        help="settings this close count as the same: a finalist shown slower than the best by more is "
        "dropped, and when every finalist left is shown within it the cheapest (fewest workers, "
        "least memory) is the answer (default: %(default)s)",
    )
    p.add_argument(
        "--reach",
        type=float,
        default=DEFAULT_REACH,
        help="screened settings further than this fraction below the best screened one do not reach "
        "the final rung, unless the spread measured on one repetition says they could still beat "
        "it (default: %(default)s)",
    )
    p.add_argument(
        "--finalists",
        type=int,
        default=DEFAULT_FINALISTS,
        help="settings per scenario brought to the full repetitions from the start: the best screened, "
        "then the cheapest within reach, then the runners-up (default: %(default)s; others follow "
        "when the spread of one repetition says they could still beat the best)",
    )
    p.add_argument(
        "--repetitions",
        type=int,
        default=None,
        help="repetitions of each finalist (default: the study's [study] repetitions, at least 3)",
    )
    p.add_argument(
        "--max-repetitions",
        type=int,
        default=None,
        help="finalists that are neither separated nor shown within the margin get more repetitions, "
        "up to this (default: --repetitions, no extra rung)",
    )


def options_from_args(args: argparse.Namespace) -> TuneOptions:
    return TuneOptions(
        objective=args.objective,
        margin=args.margin,
        reach=args.reach,
        finalists=args.finalists,
        repetitions=args.repetitions,
        max_repetitions=args.max_repetitions,
        max_memory_mb=args.max_memory_mb,
    )

"""What the search knows about each candidate: its measured repetitions, and what they say.

`Observation` is one cell repetition as the search sees it (the objective, the memory peak, what it cost);
`Evidence` holds a candidate's observations and reads them: the median, its order-statistic interval with
the coverage it really has for its n (loaderbench.stats.intervals), and whether the candidate is usable (every
repetition ok, under the memory cap). Pure: no torch, no records.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from loaderbench.stats.intervals import MedianInterval, median_ci
from loaderbench.tune.space import Candidate, cheapness


@dataclass(frozen=True)
class Observation:
    """One repetition of a candidate. `value` is the objective (None unless ok); `memory_bytes` the cell's USS
    peak; `cell_s` what the repetition took, start to end; `reused`: read from a record of an earlier run;
    `cpu_busy`: CPU seconds of the loading processes (main, workers, pin-memory thread) per second of the loop,
    the cores they kept busy (None when the record has none); `normalized`: the objective divided by the rate of the
    reference timed beside the repetition, shown beside the raw one (the search decides on the raw objective)."""

    status: str
    value: float | None = None
    memory_bytes: float | None = None
    cell_s: float = 0.0
    error: str | None = None
    reused: bool = False
    cpu_busy: float | None = None
    normalized: float | None = None  # the objective at the machine's own speed (samples per reference unit)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.value is not None and math.isfinite(self.value)


#: measure(candidate, repetition) -> that repetition; the repetition index is the candidate's next one
Measure = Callable[[Candidate, int], Observation]


@dataclass(eq=False)  # identity: two candidates' evidence is never "equal"
class Evidence:
    candidate: Candidate
    observations: list[Observation] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.observations)

    @property
    def values(self) -> list[float]:
        return [o.value for o in self.observations if o.ok]

    @property
    def failed(self) -> bool:
        """A setting that failed once is not an answer: it would fail in training too."""
        return any(not o.ok for o in self.observations)

    @property
    def median(self) -> float:
        vals = self.values
        return float(np.median(vals)) if vals else math.nan

    @property
    def memory(self) -> float | None:
        mems = [o.memory_bytes for o in self.observations if o.ok and o.memory_bytes is not None]
        return float(np.median(mems)) if mems else None

    @property
    def normalized_median(self) -> float | None:
        """The median at the machine's own speed, None unless every ok repetition has it."""
        ok = [o for o in self.observations if o.ok]
        norm = [o.normalized for o in ok if o.normalized is not None]
        return float(np.median(norm)) if norm and len(norm) == len(ok) else None

    @property
    def cpu_busy(self) -> float | None:
        busy = [o.cpu_busy for o in self.observations if o.ok and o.cpu_busy is not None]
        return float(np.median(busy)) if busy else None

    def interval(self, confidence: float = 0.95) -> MedianInterval:
        return median_ci(self.values, confidence)

    def over_cap(self, cap_bytes: float | None) -> bool:
        return cap_bytes is not None and self.memory is not None and self.memory > cap_bytes

    def usable(self, cap_bytes: float | None) -> bool:
        return self.n > 0 and not self.failed and not self.over_cap(cap_bytes)

    @property
    def cell_s(self) -> float:
        return sum(o.cell_s for o in self.observations)

    def cheapness(self) -> tuple:
        return cheapness(self.candidate, self.memory)

"""What the search of one scenario leaves behind: every step it took, the decisions on the other settings,
the evidence per candidate, the finalists with their comparisons, the answer and why the search stopped.
loaderbench.tune.search fills it; loaderbench.tune.tune_json writes it as tune.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loaderbench.stats.comparison import Comparison
from loaderbench.tune.evidence import Evidence
from loaderbench.tune.space import Scenario

SEPARATED, WITHIN_MARGIN, NOT_SEPARATED, OUT_OF_REACH, ONE_CANDIDATE, NO_USABLE = (
    "separated",
    "within margin",
    "not separated",
    "out of reach",
    "one candidate",
    "no usable candidate",
)


@dataclass(frozen=True)
class Step:
    """One thing the search did: measured a repetition (`repetition` set) or decided something."""

    phase: str  # screen | refine | axes | confirm
    candidate: str
    repetition: int | None
    value: float | None
    note: str


@dataclass
class AxisDecision:
    axis: str
    at_workers: int
    values: dict[str, float | None]  # value (as text) -> its screened objective
    kept: Any
    note: str


@dataclass
class ScenarioOutcome:
    scenario: Scenario
    evidence: dict[str, Evidence]
    steps: list[Step]
    axes: list[AxisDecision] = field(default_factory=list)
    finalists: list[Evidence] = field(default_factory=list)
    comparisons: dict[str, Comparison] = field(default_factory=dict)  # finalist key -> against `highest`
    highest: Evidence | None = None
    answer: Evidence | None = None
    stop: str = NO_USABLE
    busy_core: float | None = None  # the share of its one core 0 workers kept busy, where that ruled workers out

    @property
    def measured(self) -> int:
        return sum(e.n for e in self.evidence.values())

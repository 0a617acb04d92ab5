"""What a study's records leave open: the claims decided on them that are inconclusive (or lack repetitions), the
cells each one reads, and about how many repetitions per cell its rule says would settle it.

The cells a rule reads are found by leaving each cell out in turn: a cell the rule reads changes its outcome (the
verdict or the numbers of its evidence) when its rows are gone; a cell it does not read leaves the outcome as it
was. No rule has to declare what it reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from loaderbench.analysis.claims import BY_NAME, Claim, decide_claims
from loaderbench.analysis.findings.verdict_history import decided, name_of
from loaderbench.stats.verdicts import INCONCLUSIVE, MAX_SETTLE_N, NOT_MEASURED, Outcome

#: evidence that says how many repetitions per cell would settle a decision, or are needed for it
_ESTIMATES = (
    re.compile(r"about (\d+) repetitions per cell would settle it"),
    re.compile(r"(\d+) per cell reach"),
    re.compile(r"(\d+) give \d"),
    re.compile(r"needs (\d+) ok repetitions"),
)
#: evidence that says repetitions cannot settle it (the noise guard: the cores were not the cells' own)
_UNSETTLEABLE = ("more repetitions will not settle it",)


@dataclass
class Open:
    """One undecided claim of the study: its rule, outcome, the cells it reads and the repetitions per cell that
    its evidence says would settle it (None: it names no number)."""

    claim: Claim
    outcome: Outcome
    cells: list[str] = field(default_factory=list)
    estimate: int | None = None
    why_not: str | None = None  # why more repetitions cannot settle it

    @property
    def name(self) -> str:
        return name_of(self.claim)


def estimate(evidence: str) -> int | None:
    """The most repetitions per cell any part of the evidence asks for (MAX_SETTLE_N for "more than" it)."""
    found = [int(m) for pattern in _ESTIMATES for m in pattern.findall(evidence)]
    if f"more than {MAX_SETTLE_N}" in evidence:
        found.append(MAX_SETTLE_N)
    return max(found) if found else None


def cells_read(key: tuple[str, int], rows: pd.DataFrame, outcome: Outcome) -> list[str]:
    """The cells whose rows change the claim's outcome when left out."""
    out = []
    for cell in sorted(rows["cell_id"].dropna().unique()):
        without = decide_claims(rows[rows["cell_id"] != cell], [key])[key]
        if without != outcome:
            out.append(str(cell))
    return out


def open_claims(rows: pd.DataFrame) -> list[Open]:
    """The claims decided on `rows` (one study's records) that are still open, each with what would settle it."""
    if rows.empty:
        return []
    out = []
    for key, outcome in decided(rows).items():
        if outcome.verdict not in (INCONCLUSIVE, NOT_MEASURED):
            continue
        item = Open(BY_NAME[key[0]].claims[key[1]], outcome, estimate=estimate(outcome.evidence))
        if any(s in outcome.evidence for s in _UNSETTLEABLE):
            item.why_not = "its repetitions scatter too much: the cores were not the cells' own"
        else:
            item.cells = cells_read(key, rows, outcome)
            if not item.cells:
                item.why_not = "it reads no measured cell: the study lacks the cells it needs"
            elif outcome.verdict == NOT_MEASURED and item.estimate is None:
                item.why_not = "the records lack what it reads"
        out.append(item)
    return out

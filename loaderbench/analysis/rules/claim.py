"""What every question's rules share: the Claim and Question records, picking rows, and the noise guard of
scaling rules. (Which rows carry metrics and how a value reads back from the table:
loaderbench.analysis.table.records; columns
the figures derive too: loaderbench.analysis.table.derive.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.rows import (  # noqa: F401 - re-exported: the question modules pick rows by these
    finite,
    missing,
    narrow,
    pick,
    values_of,
    varies,
    with_workers,
)
from loaderbench.analysis.table.records import ok_rows
from loaderbench.stats.intervals import MIN_N
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, Outcome, g

if TYPE_CHECKING:
    from loaderbench.analysis.rules.kinds import Kind

#: a rule's role in its numbered claim: it tests the source's statement in the source's own setting, and decides
#: the claim with the other such rules ...
SEED = "seed"
#: ... or it tests a setting the suite added (another start method, a harsher straggler, another machine), reported
#: beside the claim's verdict, never deciding it
EXTENSION = "extension"
ROLES = (SEED, EXTENSION)


def _undecided(rows: pd.DataFrame) -> Outcome:
    raise TypeError("a Claim takes a rule kind or a rule text and its decide function")


@dataclass(frozen=True)
class Claim:
    """One claim the studies test and the rule that decides it: a kind (loaderbench.analysis.rules.kinds: Shift,
    Equivalent, AllOf, Custom), which writes the rule's text from its fields and decides the rows, or, for a
    rule no kind fits, the rule's text (printing its constants) and the function that applies it to one study's
    rows. `rule` reads back as the text, `kind` as the kind (None for a text). `needs`, when given, says whether
    rows carry what this claim reads (else the question's `needs` does). `number`: the claim of the numbered catalogue
    (loaderbench.analysis.rules.catalogue) the rule decides, or None for one of the suite's own. `study`: the
    shipped study that measures it, where that is not the question's own. `role`: SEED when the rule tests the
    numbered claim in the setting its source describes (the claim's verdict combines these rules), EXTENSION when
    it tests a setting the suite added (reported beside the verdict as `setting`, a few words)."""

    question: str
    claim: str
    rule: str | Kind
    decide: Callable[[pd.DataFrame], Outcome] = _undecided
    needs: Callable[[pd.DataFrame], bool] | None = None
    number: int | None = None
    study: str | None = None
    role: str = SEED
    setting: str = ""
    kind: Kind | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.rule, str):
            object.__setattr__(self, "kind", self.rule)
            object.__setattr__(self, "rule", self.rule.text())
            if self.decide is _undecided:
                object.__setattr__(self, "decide", self.kind)
        if self.decide is _undecided:
            raise ValueError(f"{self.claim!r}: a rule text needs its decide function (or give a rule kind)")
        if self.role not in ROLES:
            raise ValueError(f"{self.claim!r}: role {self.role!r}; allowed: {', '.join(ROLES)}")
        if self.role == EXTENSION and not (self.number and self.setting):
            raise ValueError(f"{self.claim!r}: an extension names its numbered claim and its setting")


#: shipped records from a GPU node (an H100), for the questions this machine may not be able to answer
GPU_REFERENCE = "results/reference/h100"
#: shipped records from another GPU node (an H200): GPU decoding, CUDA in forked workers, batch size on the GPU
H200_REFERENCE = "results/reference/h200"


@dataclass(frozen=True)
class Metric:
    """A column a findings table shows per cell: its header, the scale it is divided by, and how repetitions
    combine ("median", starred when unstable, or "max" for exact counts, any repetition's)."""

    column: str
    header: str
    scale: float = 1.0
    agg: str = "median"


@dataclass(frozen=True)
class Question:
    """A question the studies answer, declared by its module in loaderbench.analysis.questions: the axes its rules
    tell apart (a study varying any other axis is not used, so no rule mixes cells that differ in what it does not
    look at), what the rows must carry (`needs`), its claims, and where records decide them where this machine
    cannot (`reference`: a folder of shipped records, results/reference/...). `figure`: the function drawing its
    figure, "module:function", imported only to draw. `tables`: per study that feeds it, the metrics of that
    study's table of cells on the findings page. `counted`: the rows whose ok repetitions count when several
    studies carry a claim (default: the cells with workers). Its module declares each claim with `add`."""

    name: str
    axes: tuple[str, ...]
    needs: Callable[[pd.DataFrame], bool]
    claims: list[Claim] = field(default_factory=list)
    reference: str | None = None
    figure: str = ""
    tables: dict[str, tuple[Metric, ...]] = field(default_factory=dict)
    counted: Callable[[pd.DataFrame], pd.DataFrame] | None = None

    def add(
        self, claim: str, rule: str | Kind, decide: Callable[[pd.DataFrame], Outcome] = _undecided, **fields: Any
    ) -> None:
        """Declare one of this question's claims: Claim(this question's name, claim, rule, decide, **fields)."""
        self.claims.append(Claim(self.name, claim, rule, decide, **fields))

    @property
    def study_file(self) -> str:
        return f"loaderbench/studies/{self.name}.toml"

    @property
    def command(self) -> str:
        return f"make local STUDY={self.study_file}"


#: Repetitions may scatter by at most this share of their median (median over cells of the interquartile range over
#: the median) for a scaling rule to be judged: beyond it the cores were not the cells' own. The interquartile range
#: of normal repetitions is 1.35 standard deviations, so 15% is the 25% range of five repetitions (2.33 standard
#: deviations) this guard allowed when it read ranges; a range grows with the repetitions and follows one outlier,
#: which the order-statistic intervals already absorb.
NOISY = 0.15
#: the noise guard in a rule's words
NOISE_RULE = (
    f"inconclusive when repetitions scatter by more than {NOISY:.0%} of their median (median over cells of "
    "the interquartile range over the median): the cores were not the cells' own"
)


def too_noisy(rows: pd.DataFrame, metric: str = "samples_per_s") -> str | None:
    """Scaling can only be judged on cores the cells have to themselves: when other work competes for them,
    more workers win a bigger share of the machine and repetitions scatter, a bias no interval corrects.
    None when the spread is fine, else why not."""
    if metric not in rows or "cell_id" not in rows:
        return None
    ok = ok_rows(rows[[c for c in ("status", "cell_id", metric) if c in rows]])
    v = pd.to_numeric(ok[metric], errors="coerce")
    by = v.groupby(ok["cell_id"])
    s = pd.DataFrame({"n": by.count(), "q1": by.quantile(0.25), "q3": by.quantile(0.75), "med": by.median()})
    s = s[(s["n"] >= MIN_N) & (s["med"] > 0)]
    spreads = ((s["q3"] - s["q1"]) / s["med"]).tolist()
    if spreads and float(np.median(spreads)) > NOISY:
        return (
            f"repetitions scatter by {g(100 * float(np.median(spreads)))}% of the median (interquartile range, "
            f"median over {len(spreads)} cells; at most {g(100 * NOISY)}% to judge): other work competes for the "
            "cores, so more repetitions will not settle it; measure on cores of its own (a quiet machine or a Slurm "
            "allocation)"
        )
    return None


def quiet(
    rule: Callable[[pd.DataFrame], Outcome],
    metric: str = "samples_per_s",
    select: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
) -> Callable[[pd.DataFrame], Outcome]:
    """`rule`, made inconclusive (with the reason) when the repetitions of the cells it reads (`select`, default
    all) scatter too much to judge."""

    def checked(rows: pd.DataFrame) -> Outcome:
        out = rule(rows)
        noise = too_noisy(select(rows) if select else rows, metric)
        if noise and out.verdict in (HOLDS, FAILS, INCONCLUSIVE):
            return Outcome(INCONCLUSIVE, f"{noise}; {out.evidence}")
        return out

    checked.__name__ = getattr(rule, "__name__", type(rule).__name__)
    return checked

"""Rule kinds: the shapes most rules share, declared as data. A kind's fields say which cells it compares and
where the claim puts the effect; from them it writes the rule's English (a Claim's `rule` text), decides the rows
(one interval per group of cells, loaderbench.stats.verdicts.decide_shift, whose evidence carries the estimate, its
interval and how many repetitions would settle it) and says what is missing when nothing is measured.

    Shift       per group of cells, b's metric over a's (or b minus a) against a region: at_least(2.0), at_most(0.8)
    Equivalent  a Shift whose region is a band around 1: "about the same", an equivalence (TOST-style)
    AllOf       every check of several kinds (the claim holds where each of its parts does)
    Custom      a decide function and its English, for a rule no kind fits

A side or a `where` may name an axis value FEWEST or MOST: the smallest or largest value of that axis among the
cells of the group (for `where`: among all the cells, after its fixed values); a side may take the value of another
axis of the group, Of("cores"); a `where` value that is a tuple picks any of its values. An extreme or Of that both
sides take says where the rule reads (its value heads each group's evidence)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.rows import finite, narrow, pick, values_of, with_workers
from loaderbench.analysis.table.records import ok_rows
from loaderbench.stats.intervals import MIN_N
from loaderbench.stats.verdicts import Outcome, Region, all_of, both, decide_shift, g, within


@dataclass(frozen=True)
class Extreme:
    """The smallest (FEWEST) or largest (MOST) value of an axis among a group's cells (a `where`'s: all cells)."""

    most: bool

    def __repr__(self) -> str:
        return "MOST" if self.most else "FEWEST"


FEWEST, MOST = Extreme(False), Extreme(True)


@dataclass(frozen=True)
class Of:
    """A side's value taken from another axis, one value in each group: {"num_workers": Of("cores")}."""

    axis: str


#: how an axis reads in a rule's English (its name, its fewest and most) and in a group's evidence (a value)
AXES: dict[str, tuple[str, str, str, Callable[[Any], str]]] = {
    "num_workers": ("worker count", "the fewest workers", "the most workers", lambda v: f"w={int(v)}"),
    "payload_mb": ("payload", "the smallest payload", "the largest payload", lambda v: f"{float(v):g} MiB"),
    "cores": ("core count", "the fewest cores", "the most cores", lambda v: f"{int(v)} core{'s' * (int(v) != 1)}"),
    "epochs": ("epoch count", "the fewest epochs", "the most epochs", lambda v: f"{int(v)} epochs"),
    "latency_ms": ("latency", "the lowest latency", "the highest latency", lambda v: f"{float(v):g} ms"),
    "ranks": ("rank count", "the fewest ranks", "the most ranks", lambda v: f"{int(v)} ranks"),
    "jpeg_stage": ("jpeg stage", "the first stage", "the last stage", lambda v: f"{v} stage"),
    "curve": ("curve", "the first curve", "the last curve", lambda v: str(v)),
    "batch_size": ("batch size", "the smallest batch size", "the largest batch size", lambda v: f"batch {int(v)}"),
    "tensors_per_sample": (
        "tensors per sample",
        "the fewest tensors per sample",
        "the most tensors per sample",
        lambda v: f"{float(v):g} tensors/sample",
    ),
}


def _axis(name: str) -> tuple[str, str, str, Callable[[Any], str]]:
    """An axis of AXES, else its name, and its values as they are (words) or name=value."""
    return AXES.get(
        name,
        (
            name,
            f"the smallest {name}",
            f"the largest {name}",
            lambda v: v if isinstance(v, str) else f"{name}={_value(v)}",
        ),
    )


def _value(v) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):g}"
    return str(v)


def _said(axis: str, v) -> str:
    """One axis value in a rule's English: a word as it is, an extreme as words, anything else axis=value."""
    if isinstance(v, Extreme):
        return _axis(axis)[2 if v.most else 1]
    if isinstance(v, Of):
        return f"{axis} = {v.axis}"
    if isinstance(v, str):
        return v
    return f"{axis} = {_value(v)}"


def _owner(words: str) -> str:
    return f"{words}'" if words.endswith("s") else f"{words}'s"


def ok_with_workers(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows of cells with workers: the frame a kind reads unless it is given another."""
    return with_workers(ok_rows(rows))


def _resolve(frame: pd.DataFrame, eq: Mapping[str, Any]) -> dict[str, Any] | None:
    """`eq` with FEWEST and MOST replaced by the axis's smallest or largest value in `frame`, and Of(axis) by that
    axis's value there (None: no value)."""
    out = {}
    for k, v in eq.items():
        if isinstance(v, Of):
            values = values_of(frame, v.axis)
            if len(values) != 1:
                return None
            v = values[0]
        elif isinstance(v, Extreme):
            values = values_of(frame, k)
            if not values:
                return None
            v = values[-1] if v.most else values[0]
        out[k] = v
    return out


def _cells(frame: pd.DataFrame, where: Mapping[str, Any]) -> tuple[pd.DataFrame, str]:
    """The cells `where` picks (a tuple: any of its values), and the values its extremes resolved to, as an
    evidence head ("0 MiB")."""
    fixed = {k: v for k, v in where.items() if not isinstance(v, (Extreme, tuple))}
    cells = pick(frame, **fixed) if fixed else frame
    for k, v in where.items():
        if isinstance(v, tuple):
            cells = cells[cells[k].isin(v)] if k in cells else cells.iloc[0:0]
    extremes = _resolve(cells, {k: v for k, v in where.items() if isinstance(v, Extreme)})
    if extremes is None:
        return cells.iloc[0:0], ""
    return (pick(cells, **extremes) if extremes else cells), ", ".join(_axis(k)[3](v) for k, v in extremes.items())


def _fixed(where: Mapping[str, Any]) -> str:
    """`where`'s single values, as an evidence head ("fork")."""
    return ", ".join(_axis(k)[3](v) for k, v in where.items() if not isinstance(v, (Extreme, tuple)))


def _groups(cells: pd.DataFrame, per: tuple[str, ...]):
    """(the group's evidence head, its rows) per combination of the `per` axes, in their order (an axis the cells
    lack takes one value)."""
    per = tuple(p for p in per if p in cells)
    if not per:
        yield "", cells
        return
    if cells.empty:
        return
    for key, grp in cells.groupby(list(per), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        yield ", ".join(_axis(p)[3](v) for p, v in zip(per, key)), grp


def _scope(per: tuple[str, ...], where: Mapping[str, Any]) -> str:
    """Where a rule reads, in words: "at the smallest payload, at every worker count x payload"."""
    parts = [
        _said(k, v)
        if isinstance(v, (Extreme, Of))
        else f"{k} = {' or '.join(_value(x) for x in v)}"
        if isinstance(v, tuple)
        else f"{k} = {_value(v)}"
        for k, v in where.items()
    ]
    words = [f"at {p}" if p.startswith("the ") else f"with {p}" for p in parts]
    if per:
        words.append(f"at every {' x '.join(_axis(p)[0] for p in per)}")
    return ", ".join(words)


@dataclass(frozen=True)
class Aside:
    """A few words of context a Shift's evidence ends with: `words` of (a's rows, b's rows) of a group, which hold
    the columns the Shift reads and `reads`."""

    words: Callable[[pd.DataFrame, pd.DataFrame], str]
    reads: tuple[str, ...] = ()

    def __call__(self, a: pd.DataFrame, b: pd.DataFrame) -> str:
        return self.words(a, b)


class Kind:
    """What every kind does: its checks on the rows (one Outcome per group), its clause of English, where it reads
    (`scope`) and what it needs; a kind called on rows decides them (all of its checks)."""

    def grouped(self, rows: pd.DataFrame) -> list[tuple[str, Outcome]]:
        """One (the group in words, its Outcome) per group of cells the kind checks."""
        raise NotImplementedError

    def checks(self, rows: pd.DataFrame) -> list[Outcome]:
        return [Outcome(o.verdict, f"{head}: {o.evidence}") if head else o for head, o in self.grouped(rows)]

    def clause(self) -> str:
        raise NotImplementedError

    def scope(self) -> str:
        return ""

    def needs(self) -> str:
        raise NotImplementedError

    #: a sentence or aside the rule's English ends with (why it reads what it reads)
    note: str = ""

    def text(self) -> str:
        scope = self.scope()
        head = f"{scope}: holds if" if scope else "holds if"
        return f"{head} {self.clause()}" + (f"; {self.note}" if self.note else "")

    #: rows -> the outcome when the rows cannot be read at all (e.g. not measurable without a GPU), else None
    guard: Callable[[pd.DataFrame], Outcome | None] | None = None

    def __call__(self, rows: pd.DataFrame) -> Outcome:
        why = self.guard(rows) if self.guard else None
        return why or all_of(self.checks(rows), f"needs {self.needs()}")


@dataclass(frozen=True, eq=False)
class Shift(Kind):
    """Per group of cells (`per`), decide_shift of b's `metric` over a's (`log`, else b minus a) against `region`.
    `a` and `b` pick each side's cells ({axis: value}); `where` picks the cells both sides come from; `frame` makes
    the table read (default: the ok rows with workers; add derived columns here). `what` is the metric in words,
    `names` the sides in words (default: the values they pick), `label` them in the evidence. A group where a side
    has fewer than MIN_N ok repetitions is left out. `guard`: rows -> the outcome when they cannot be read at all
    (no GPU), else None."""

    metric: str
    what: str
    a: Mapping[str, Any]
    b: Mapping[str, Any]
    region: Region
    per: tuple[str, ...] = ()
    where: Mapping[str, Any] = field(default_factory=dict)
    names: tuple[str, str] | None = None
    label: str = ""
    log: bool = True
    unit: str | None = None
    frame: Callable[[pd.DataFrame], pd.DataFrame] = ok_with_workers
    note: str = ""
    guard: Callable[[pd.DataFrame], Outcome | None] | None = None
    #: a few words of context each group's evidence ends with, in parentheses, from its sides' rows
    aside: Aside | None = None

    def sides(self) -> tuple[str, str]:
        """The sides in words: `names`, else what tells them apart."""
        if self.names:
            return self.names
        a, b = (self._apart(side) for side in (self.a, self.b))
        return ", ".join(_said(k, v) for k, v in a.items()), ", ".join(_said(k, v) for k, v in b.items())

    def _shared(self) -> dict[str, Any]:
        """The extremes and Of values both sides take: where the rule reads, not what tells the sides apart."""
        return {k: v for k, v in self.a.items() if isinstance(v, (Extreme, Of)) and self.b.get(k) == v}

    def _apart(self, side: Mapping[str, Any]) -> dict[str, Any]:
        other = self.b if side is self.a else self.a
        return {k: v for k, v in side.items() if not (k in other and other[k] == v)}

    def _subject_object(self) -> tuple[str, str]:
        """The clause's subject (b's metric) and object (a's): "spawn's time to first batch" ... "fork's" when the
        sides are words, else "spawn's CPU per worker at the most workers" ... "that at the fewest workers"."""
        a, b = self.sides()
        apart = list(self._apart(self.a).values()) + list(self._apart(self.b).values())
        if self.names or all(isinstance(v, str) for v in apart):
            return f"{_owner(b)} {self.what}", _owner(a)
        owner = "".join(f"{_owner(v)} " for k, v in self.a.items() if isinstance(v, str) and self.b.get(k) == v)

        def at(words: str) -> str:
            return f"at {words}" if words.startswith("the ") else f"with {words}"

        return f"{owner}{self.what} {at(b)}", f"that {at(a)}"

    def clause(self) -> str:
        subject, obj = self._subject_object()
        r, unit = self.region, ("x" if self.log else (self.unit or ""))
        if r.inside and np.isinf(r.high):
            return (
                f"{subject} is at least {g(r.low)}x {obj}"
                if self.log
                else f"{subject} exceeds {obj} by at least {g(r.low)}{unit}"
            )
        if r.inside and np.isinf(r.low):
            return (
                f"{subject} is at most {g(r.high)}x {obj}"
                if self.log
                else f"{subject} exceeds {obj} by at most {g(r.high)}{unit}"
            )
        if not self.log:
            return f"{subject} minus {obj} lies {r.text(unit, log=False)}"
        if not r.inside:
            return f"{subject} differs from {obj} by at least {g(r.high)}x either way"
        return (
            f"{subject} over {obj} lies within {g(r.low)}..{g(r.high)}x (an equivalence: it does not hold if the "
            "interval lies entirely outside)"
        )

    def scope(self) -> str:
        return _scope(self.per, {**self.where, **self._shared()})

    def needs(self) -> str:
        a, b = self.sides()
        per = f" at each {' x '.join(_axis(p)[0] for p in self.per)}" if self.per else ""
        return f"{a} and {b} cells{per} with {MIN_N} ok repetitions each ({self.what})"

    def _label(self, a_eq: dict, b_eq: dict) -> str:
        if self.label:
            return self.label
        if self.names:
            a_name, b_name = self.names
        else:  # the values the sides resolved to ("64 tensors/sample", "w=4")
            a_name, b_name = (
                ", ".join(v if isinstance(v, str) else _axis(k)[3](eq[k]) for k, v in self._apart(side).items())
                for side, eq in ((self.a, a_eq), (self.b, b_eq))
            )
        return f"{self.what} {b_name} / {a_name}" if self.log else f"{self.what} {b_name} - {a_name}"

    def reads(self) -> list[str]:
        """The columns the kind reads of its frame: the metric, the axes it picks and groups by, the aside's."""
        sides = [*self.a.items(), *self.b.items(), *self.where.items()]
        ofs = [v.axis for _, v in sides if isinstance(v, Of)]
        return [self.metric, *self.per, *(k for k, _ in sides), *ofs, *(self.aside.reads if self.aside else ())]

    def grouped(self, rows: pd.DataFrame) -> list[tuple[str, Outcome]]:
        # only the columns read: each group and side picked is a copy of every column it keeps
        cells, fixed = _cells(narrow(self.frame(rows), self.reads()), self.where)
        if self.metric not in cells:
            return []
        out = []
        for head, grp in _groups(cells, self.per):
            a_eq, b_eq = _resolve(grp, self.a), _resolve(grp, self.b)
            if a_eq is None or b_eq is None or a_eq == b_eq:
                continue  # nothing to compare (an extreme the cells do not reach, or both sides the same cells)
            ra, rb = pick(grp, **a_eq), pick(grp, **b_eq)
            xa, xb = finite(ra[self.metric]), finite(rb[self.metric])
            if len(xa) < MIN_N or len(xb) < MIN_N:
                continue
            o = decide_shift(xa, xb, self.region, log=self.log, unit=self.unit, label=self._label(a_eq, b_eq))
            if self.aside:
                o = Outcome(o.verdict, f"{o.evidence} ({self.aside(ra, rb)})")
            shared = ", ".join(_axis(k)[3](a_eq[k]) for k in self._shared())
            out.append((", ".join(h for h in (_fixed(self.where), head, fixed, shared) if h), o))
        return out


def _median(x: np.ndarray) -> float:
    return float(np.median(x)) if len(x) else float("nan")


def medians(metric: str, unit: str = "", scale: float = 1.0) -> Aside:
    """An aside that shows both sides' medians of `metric` (times `scale`): "9.36 -> 297 MiB"."""

    def words(a: pd.DataFrame, b: pd.DataFrame) -> str:
        ma, mb = (_median(finite(r[metric])) * scale for r in (a, b))
        return f"{g(ma)} -> {g(mb)}{unit}"

    return Aside(words, (metric,))


def Equivalent(metric: str, what: str, a: Mapping[str, Any], b: Mapping[str, Any], band: float, **fields) -> Shift:
    """ "About the same": b's metric over a's within 1 - band .. 1 + band (an equivalence, TOST-style: it does not
    hold when the interval lies entirely outside the band)."""
    return Shift(metric, what, a, b, within(1 - band, 1 + band), **fields)


@dataclass(frozen=True, eq=False)
class AllOf(Kind):
    """Every check of every part holds (three-valued, loaderbench.stats.verdicts.all_of); a part with no group to
    check adds none, so not measured yet only when no part has one."""

    parts: tuple[Kind, ...]
    note: str = ""
    guard: Callable[[pd.DataFrame], Outcome | None] | None = None

    def _shared(self) -> bool:
        return len({p.scope() for p in self.parts}) == 1

    def clause(self) -> str:
        if self._shared():
            return ", and ".join(p.clause() for p in self.parts)
        return "; and".join(f", {p.scope()}, {p.clause()}" if p.scope() else f" {p.clause()}" for p in self.parts)

    def text(self) -> str:
        if self._shared():
            return super().text()
        return f"holds if{self.clause()}" + (f"; {self.note}" if self.note else "")

    def scope(self) -> str:
        return self.parts[0].scope() if self._shared() else ""

    def needs(self) -> str:
        return "; ".join(dict.fromkeys(p.needs() for p in self.parts))

    def grouped(self, rows: pd.DataFrame) -> list[tuple[str, Outcome]]:
        """The parts' checks, those of one group together (in the order the groups first come)."""
        by: dict[str, list[Outcome]] = {}
        for p in self.parts:
            for head, o in p.grouped(rows):
                by.setdefault(head, []).append(o)
        return [(head, both(*outs) if len(outs) > 1 else outs[0]) for head, outs in by.items()]


@dataclass(frozen=True, eq=False)
class Custom(Kind):
    """A rule no kind fits: its decide function and its English, written beside it."""

    decide: Callable[[pd.DataFrame], Outcome]
    words: str

    def text(self) -> str:
        return self.words

    def grouped(self, rows: pd.DataFrame) -> list[tuple[str, Outcome]]:
        return [("", self.decide(rows))]

    def __call__(self, rows: pd.DataFrame) -> Outcome:
        return self.decide(rows)

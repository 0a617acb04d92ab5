"""One vocabulary for every verdict, and how an interval decides a claim.

The vocabulary, defined here once and used by loaderbench.analysis.table.summary (comparisons),
loaderbench.analysis.claims
and the report:

    holds                 the interval lies entirely where the claim says (at or beyond its minimum effect)
    does not hold         the interval lies entirely outside: separated the other way, or shown smaller than
                          the claimed effect (within a stated margin: an equivalence shown TOST-style)
    inconclusive          the interval reaches both sides, or n is too small for the confidence asked; the
                          evidence says why and about how many repetitions would settle it
    not measured yet      the records the rule reads are missing (no study carries them, or fewer than 3 ok
                          repetitions of a cell); the evidence names the study that measures them
    not measurable here   what the records show cannot be like for like on this machine (no GPU for
                          pin_memory or the CUDA prefetcher, the published GPU numbers)

A comparison of b against a (loaderbench.stats.comparison.compare) decides the claim "b differs from a by at least the
minimum effect" the same way and names the direction: "faster" or "slower" when it holds, "equivalent"
when it does not (the interval within the margin), else "inconclusive" or "not measured yet".

Confidence. A claim is decided on a two-sided :data:`CLAIM_CONFIDENCE` (90%) interval: each end errs with
probability at most 5%, so "holds" (one end beyond the threshold) is a one-sided 5% statement and "does not
hold" by equivalence is TOST at 5%. The interval is distribution-free with its real coverage for its n
(loaderbench.stats.intervals): 3 v 3 repetitions reach exactly 90%; one cell's median needs 5 (93.75%). A decision
that needs more than n can give is "inconclusive", never made at a lower confidence. Where a claim holds
if any one of several comparisons does, each is made at 1 - (1 - confidence) / m (Bonferroni, which for
"at least one" is the same as Holm).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from loaderbench.stats.intervals import (
    MIN_N,
    median_ci,
    n_for_median,
    n_for_shift,
    order_coverage,
    pct,
    shift_ci,
    widest_shift_coverage,
)

HOLDS = "holds"
FAILS = "does not hold"
INCONCLUSIVE = "inconclusive"
NOT_MEASURED = "not measured yet"
NOT_MEASURABLE = "not measurable here"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE, NOT_MEASURED, NOT_MEASURABLE)

FASTER, SLOWER, EQUIVALENT = "faster", "slower", "equivalent"
#: The verdicts of a comparison (b against a): the outcome of "b differs from a", with its direction.
COMPARISON_VERDICTS = (FASTER, SLOWER, EQUIVALENT, INCONCLUSIVE, NOT_MEASURED)

#: Two-sided confidence of the interval a claim is decided on (each end errs at most 5%).
CLAIM_CONFIDENCE = 0.90
#: A claim of a direction only ("faster", "below") needs at least this relative effect.
MIN_EFFECT = 0.05
#: Past this many repetitions per cell a settling estimate is only "more than".
MAX_SETTLE_N = 200
_TOL = 1e-9

MEANING = {
    HOLDS: "the interval lies entirely where the claim says (at or beyond its minimum effect)",
    FAILS: "the interval lies entirely outside it: separated the other way, or shown smaller than the claimed "
    "effect (within a stated margin, TOST-style)",
    INCONCLUSIVE: "the interval reaches both sides, or there are too few repetitions for the confidence asked; "
    "the evidence says why and about how many repetitions would settle it",
    NOT_MEASURED: "the records the rule reads are missing (no study carries them, or fewer than "
    f"{MIN_N} ok repetitions of a cell); the evidence names the study that measures them",
    NOT_MEASURABLE: "this machine cannot measure it like for like (no GPU for pin_memory or the CUDA prefetcher, "
    "the published GPU numbers)",
}


def g(x, digits: int = 3) -> str:
    """A number with `digits` significant digits (scientific below 1e-3)."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not np.isfinite(x):
        return "nan" if np.isnan(x) else ("inf" if x > 0 else "-inf")
    return f"{x:.{digits}g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def decision_rule_text(confidence: float = CLAIM_CONFIDENCE) -> str:
    """The decision rule in words, for rule texts and reports (its numbers come from the constants)."""
    per_side = (1 - confidence) / 2
    return (
        f"decided on the distribution-free {pct(confidence)} interval (each end errs at most {pct(per_side)}): "
        f"3 v 3 repetitions reach {pct(widest_shift_coverage(3, 3))}, one cell's median needs "
        f"{n_for_median(confidence)} repetitions ({pct(order_coverage(n_for_median(confidence)))})"
    )


@dataclass(frozen=True)
class Outcome:
    """A verdict from :data:`VERDICTS` and the numbers it was decided on."""

    verdict: str
    evidence: str


# --------------------------------------------------------------------------------------------------------
# the region a claim puts an effect in


@dataclass(frozen=True)
class Region:
    """Where a claim puts the effect: at least ``low``, at most ``high``, between them (``inside``), or
    outside them (``inside=False``: differs by at least the margin, either way)."""

    low: float = -math.inf
    high: float = math.inf
    inside: bool = True

    def decide(self, lo: float, hi: float) -> str:
        if np.isnan(lo) or np.isnan(hi):
            return INCONCLUSIVE
        if self.inside:
            if lo >= self.low - _TOL and hi <= self.high + _TOL:
                return HOLDS
            if hi < self.low or lo > self.high:
                return FAILS
            return INCONCLUSIVE
        if lo >= self.high - _TOL or hi <= self.low + _TOL:
            return HOLDS
        if lo > self.low and hi < self.high:
            return FAILS
        return INCONCLUSIVE

    def text(self, unit: str = "x", log: bool = True) -> str:
        f = (lambda v: f"{g(v)}{unit}") if log else (lambda v: f"{v:+.3g}{unit}")
        if not self.inside:
            return f"outside {f(self.low)}..{f(self.high)}"
        if np.isinf(self.low):
            return f"<= {f(self.high)}"
        if np.isinf(self.high):
            return f">= {f(self.low)}"
        return f"within {f(self.low)}..{f(self.high)}"


def at_least(t: float) -> Region:
    return Region(low=t)


def at_most(t: float) -> Region:
    return Region(high=t)


def within(low: float, high: float) -> Region:
    return Region(low=low, high=high)


def outside(low: float, high: float) -> Region:
    return Region(low=low, high=high, inside=False)


# --------------------------------------------------------------------------------------------------------
# how many repetitions would settle an inconclusive decision


def _settle(point: float, low: float, high: float, region: Region, n_now: int, floor: int, log: bool) -> str:
    """Repetitions per cell for the measured interval to clear the region's boundaries, scaling its half-width
    towards each boundary that must be cleared by sqrt(n_now / n): the interval's own procedure (order statistics,
    a bootstrap), not a normal formula, which at a few repetitions promises less than the interval delivers. At
    least one more than measured: the interval at n_now did not settle it."""
    f = math.log if log else (lambda v: v)
    if log and not (point > 0 and low > 0 and high > 0):
        return "the estimate sits on the threshold: more repetitions narrow the interval but may not settle it"
    p, lo, hi = f(point), f(low), f(high)
    bounds = [f(b) for b in (region.low, region.high) if np.isfinite(b) and (b > 0 or not log)]
    between = len(bounds) == 2 and bounds[0] < p < bounds[1]
    # between two boundaries the interval must clear both; else the nearest one decides
    clear = bounds if between else sorted(bounds, key=lambda b: abs(b - p))[:1]
    if not clear or any(abs(b - p) <= _TOL for b in clear):
        return "the estimate sits on the threshold: more repetitions narrow the interval but may not settle it"
    need = max(n_now * (max(0.0, (hi - p) if b > p else (p - lo)) / abs(b - p)) ** 2 for b in clear)
    n = max(floor, n_now + 1, math.ceil(need))
    if n > MAX_SETTLE_N:
        return (
            f"the estimate is close to the threshold for this spread: more than {MAX_SETTLE_N} repetitions "
            "per cell would be needed"
        )
    return f"about {n} repetitions per cell would settle it if the medians and spread stay as measured"


def _finite(values) -> np.ndarray:
    x = np.asarray(values, dtype=float).ravel()
    return x[np.isfinite(x)]


# --------------------------------------------------------------------------------------------------------
# decisions


def _judged(
    text: str, iv, region: Region, confidence: float, too_few: Callable[[], str], settle: Callable[[], str]
) -> Outcome:
    """The verdict of an interval `iv` against `region`, with `text` (the estimate and its interval) as evidence:
    inconclusive when its coverage falls short of `confidence` (`too_few()` says how, and what would reach it),
    the region's verdict when the interval lies on one side of it, else inconclusive (`settle()` says what
    would settle it)."""
    if iv.coverage < confidence - _TOL:
        return Outcome(INCONCLUSIVE, f"{text}: inconclusive, {too_few()}")
    verdict = region.decide(iv.low, iv.high)
    if verdict != INCONCLUSIVE:
        return Outcome(verdict, f"{text}: {verdict}")
    return Outcome(INCONCLUSIVE, f"{text}: inconclusive, the interval reaches both sides; {settle()}")


def decide_shift(
    a,
    b,
    region: Region,
    *,
    log: bool = True,
    confidence: float = CLAIM_CONFIDENCE,
    label: str = "",
    unit: str | None = None,
) -> Outcome:
    """Decide where the ratio b / a (``log=True``) or the difference b - a lies, against ``region``.

    The evidence reads e.g. "first batch spawn / fork 16.7x [15.9-17.5x] (90%, 3 v 3) >= 2x: holds"."""
    xa, xb = _finite(a), _finite(b)
    unit = ("x" if log else "") if unit is None else unit
    head = f"{label} " if label else ""
    if xa.size < MIN_N or xb.size < MIN_N:
        return Outcome(NOT_MEASURED, f"{head}needs {MIN_N} ok repetitions per cell (has {xa.size} v {xb.size})")
    iv = shift_ci(xa, xb, confidence, log=log)
    if not np.isfinite(iv.coverage):
        return Outcome(INCONCLUSIVE, f"{head}no interval: {iv.method}")
    ma, mb = float(np.median(xa)), float(np.median(xb))
    point = mb / ma if log else mb - ma
    shown = (
        f"{g(point)}{unit} [{g(iv.low)}-{g(iv.high)}{unit}]"
        if log
        else f"{point:+.3g}{unit} [{iv.low:+.3g} to {iv.high:+.3g}{unit}]"
    )
    text = f"{head}{shown} ({pct(iv.coverage)}, {xa.size} v {xb.size}) {region.text(unit, log)}"

    def too_few() -> str:
        need = n_for_shift(confidence)
        return (
            f"{xa.size} v {xb.size} repetitions reach at most {pct(iv.coverage)} (this decision needs a nominal "
            f"{pct(confidence)}: {need} per cell reach {pct(widest_shift_coverage(need, need))})"
        )

    def settle() -> str:
        return _settle(point, iv.low, iv.high, region, min(xa.size, xb.size), n_for_shift(confidence), log)

    return _judged(text, iv, region, confidence, too_few, settle)


def decide_median(
    values, region: Region, *, confidence: float = CLAIM_CONFIDENCE, label: str = "", unit: str = ""
) -> Outcome:
    """Decide where one cell's median lies against ``region``, on its order-statistic interval."""
    x = _finite(values)
    head = f"{label} " if label else ""
    if x.size < MIN_N:
        return Outcome(NOT_MEASURED, f"{head}needs {MIN_N} ok repetitions (has {x.size})")
    iv = median_ci(x, confidence)
    med = float(np.median(x))
    text = (
        f"{head}{med:+.3g}{unit} [{iv.low:+.3g} to {iv.high:+.3g}{unit}] ({pct(iv.coverage)}, n={x.size}) "
        f"{region.text(unit, log=False)}"
    )

    def too_few() -> str:
        need = n_for_median(confidence)
        return (
            f"{x.size} repetitions give a {pct(iv.coverage)} interval (this decision needs a nominal "
            f"{pct(confidence)}: {need} give {pct(order_coverage(need))})"
        )

    return _judged(
        text,
        iv,
        region,
        confidence,
        too_few,
        lambda: _settle(med, iv.low, iv.high, region, x.size, n_for_median(confidence), log=False),
    )


def fact(ok: bool, text: str) -> Outcome:
    """A check that is a counted fact, not an estimate (a failure seen, a fraction over a threshold)."""
    return Outcome(HOLDS if ok else FAILS, text)


# --------------------------------------------------------------------------------------------------------
# combining the checks of one claim (three-valued logic)


def _rest(verdicts: list[str]) -> str:
    for v in (INCONCLUSIVE, NOT_MEASURED, NOT_MEASURABLE):
        if v in verdicts:
            return v
    return INCONCLUSIVE


def all_of(checks: Iterable[Outcome], empty: str) -> Outcome:
    """Holds when every check holds; does not hold when one does not (one configuration where the claim is
    shown false refutes a claim made for every configuration); else the open checks' verdict. With no
    check: not measured yet, with `empty` as the evidence."""
    checks = list(checks)
    if not checks:
        return Outcome(NOT_MEASURED, empty)
    vs = [c.verdict for c in checks]
    verdict = FAILS if FAILS in vs else HOLDS if all(v == HOLDS for v in vs) else _rest(vs)
    return Outcome(verdict, "; ".join(c.evidence for c in checks))


def any_of(checks: list[Callable[[float], Outcome]], empty: str, confidence: float = CLAIM_CONFIDENCE) -> Outcome:
    """Holds when at least one of m checks holds at the Bonferroni confidence 1 - (1 - confidence) / m; does not
    hold when every check does not hold at `confidence`; else inconclusive. Each check is a function of the
    confidence it is decided at."""
    if not checks:
        return Outcome(NOT_MEASURED, empty)
    m = len(checks)
    each = 1 - (1 - confidence) / m
    strict = [c(each) for c in checks]
    plain = [c(confidence) for c in checks] if m > 1 else strict
    if any(o.verdict == HOLDS for o in strict):
        verdict = HOLDS
    elif all(o.verdict == FAILS for o in plain):
        verdict = FAILS
    else:
        verdict = _rest([o.verdict for o in strict])
    shown = strict if verdict != FAILS else plain
    note = (
        f" (any one of {m} comparisons: each asked for a nominal {pct(each)}, Bonferroni, for {pct(confidence)} "
        "overall)"
        if m > 1
        else ""
    )
    return Outcome(verdict, "; ".join(o.evidence for o in shown) + note)


def both(*checks: Outcome) -> Outcome:
    """Three-valued AND of parts of one check (no `empty`: the parts exist)."""
    return all_of(checks, "")


def either(*checks: Outcome) -> Outcome:
    """Three-valued OR of alternative ways one check can hold (every part decided at the same confidence)."""
    vs = [c.verdict for c in checks]
    verdict = HOLDS if HOLDS in vs else FAILS if all(v == FAILS for v in vs) else _rest(vs)
    return Outcome(verdict, " | or | ".join(c.evidence for c in checks))

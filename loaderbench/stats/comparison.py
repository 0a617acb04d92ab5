"""Is b faster, slower or the same as a? A comparison of two sets of repetitions, decided on the
distribution-free interval of their ratio.

:func:`compare` decides "b differs from a by at least ``min_effect``" on the interval of the ratio b / a
(:func:`loaderbench.stats.intervals.shift_ci`), with the verdicts of
:data:`loaderbench.stats.verdicts.COMPARISON_VERDICTS`. Arrays in, a :class:`Comparison` out; no tables, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from loaderbench.stats.intervals import MIN_N, n_for_shift, pct, shift_ci, widest_shift_coverage
from loaderbench.stats.verdicts import (
    CLAIM_CONFIDENCE,
    COMPARISON_VERDICTS,
    EQUIVALENT,
    FASTER,
    HOLDS,
    INCONCLUSIVE,
    NOT_MEASURED,
    SLOWER,
    outside,
    within,
)

__all__ = ["VERDICTS", "Comparison", "compare"]

#: The verdicts :func:`compare` gives (defined once, in loaderbench.stats.verdicts).
VERDICTS = COMPARISON_VERDICTS


def _finite(values) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    return arr[np.isfinite(arr)]


@dataclass(frozen=True)
class Comparison:
    """Outcome of :func:`compare` (b relative to a).

    ``ratio`` is median(b) / median(a); ``ci_low``/``ci_high`` the distribution-free interval of the ratio
    (:func:`loaderbench.stats.intervals.shift_ci`), ``ci_coverage`` its real coverage for ``n_a`` and ``n_b`` (90% at
    3 v 3 whatever ``confidence`` asked for); ``p_value`` the two-sided exact Mann-Whitney U p-value.
    ``verdict`` is one of :data:`VERDICTS` and describes b relative to a; ``reason`` says why a verdict is
    "inconclusive" or "not measured yet" (empty otherwise).
    """

    n_a: int
    n_b: int
    median_a: float
    median_b: float
    ratio: float
    ci_low: float
    ci_high: float
    significant: bool
    verdict: str
    higher_is_better: bool = True
    min_effect: float = 0.05
    alpha: float = 0.05
    confidence: float = CLAIM_CONFIDENCE
    ci_coverage: float = float("nan")
    ci_method: str = ""
    reason: str = ""
    samples: tuple = field(default=(), repr=False, compare=False)  # (a, b) as compared: for the p-value

    @cached_property
    def p_value(self) -> float:
        """The two-sided exact Mann-Whitney U p-value, computed when first read (NaN below 3 v 3): scipy.stats takes
        1-3 s to import, which a search that reads only the interval (tune, the doctor) need not pay."""
        if not self.samples:
            return float("nan")
        from scipy import stats

        a, b = self.samples
        return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)

    def interval_text(self) -> str:
        """e.g. "1.18x [1.1-1.25] (90%, 3 v 3)"; "–" without an interval."""
        if not (np.isfinite(self.ci_low) and np.isfinite(self.ci_high)):
            return "–"
        return (
            f"{self.ratio:.3g}x [{self.ci_low:.3g}-{self.ci_high:.3g}] "
            f"({pct(self.ci_coverage)}, {self.n_a} v {self.n_b})"
        )


def compare(
    a,
    b,
    min_effect: float = 0.05,
    alpha: float = 0.05,
    higher_is_better: bool = True,
    *,
    confidence: float = CLAIM_CONFIDENCE,
) -> Comparison:
    """Compare the repetitions ``b`` against the baseline ``a``: does b differ by at least ``min_effect``?

    NaN/inf values are dropped. With fewer than 3 values on either side the verdict is "not measured yet"
    (``ratio`` is still reported for information, interval and p-value are NaN): a bare ratio of two single
    runs is never a result.

    The interval of the ratio decides, at ``confidence`` (default :data:`CLAIM_CONFIDENCE`, 90% two-sided:
    each direction errs at most 5%, the rule every decision of the suite uses): "faster" or "slower"
    (by ``higher_is_better``) when it lies entirely beyond ``1 + min_effect`` or below ``1 / (1 +
    min_effect)``; "equivalent" when it lies entirely between them; "inconclusive" when it reaches both, or
    when ``n_a`` v ``n_b`` repetitions cannot reach ``confidence`` (3 v 3 reach at most 90%: 4 per side
    reach 97.1%). ``alpha`` is kept for the p-value's reading: ``significant`` is True exactly when the
    verdict is "faster" or "slower".
    """
    xa, xb = _finite(a), _finite(b)
    na, nb = int(xa.size), int(xb.size)
    med_a = float(np.median(xa)) if na else float("nan")
    med_b = float(np.median(xb)) if nb else float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.divide(med_b, med_a)) if na and nb else float("nan")
    common: dict[str, Any] = dict(
        n_a=na,
        n_b=nb,
        median_a=med_a,
        median_b=med_b,
        ratio=ratio,
        higher_is_better=bool(higher_is_better),
        min_effect=float(min_effect),
        alpha=float(alpha),
        confidence=float(confidence),
    )
    nan = float("nan")
    if na < MIN_N or nb < MIN_N:
        return Comparison(
            ci_low=nan,
            ci_high=nan,
            significant=False,
            verdict=NOT_MEASURED,
            reason=f"needs {MIN_N} ok repetitions per side (has {na} v {nb})",
            **common,
        )

    iv = shift_ci(xa, xb, confidence, log=True)
    top = 1.0 + float(min_effect)
    verdict, reason = INCONCLUSIVE, ""
    if not np.isfinite(iv.coverage):
        reason = f"no ratio interval: {iv.method}"
    elif iv.coverage < confidence - 1e-9:
        need = n_for_shift(confidence)
        reason = (
            f"{na} v {nb} repetitions reach at most {pct(iv.coverage)} (nominal {pct(confidence)}: {need} per "
            f"side reach {pct(widest_shift_coverage(need, need))})"
        )
    else:
        differs = outside(1 / top, top).decide(iv.low, iv.high)
        if differs == HOLDS:
            verdict = FASTER if (iv.low >= 1.0) == bool(higher_is_better) else SLOWER
        elif within(1 / top, top).decide(iv.low, iv.high) == HOLDS:
            verdict = EQUIVALENT
        else:
            reason = f"the interval reaches both sides of a {min_effect:.0%} effect"
    return Comparison(
        ci_low=iv.low,
        ci_high=iv.high,
        significant=verdict in (FASTER, SLOWER),
        verdict=verdict,
        ci_coverage=iv.coverage,
        ci_method=iv.method,
        reason=reason,
        samples=(xa, xb),
        **common,
    )

"""Intervals that state their real confidence: distribution-free, with coverage computed exactly for their n.

Pure functions on arrays; no tables, no verdicts (loaderbench.stats.verdicts decides with these), no torch.

The median of one cell
----------------------
:func:`median_ci` is the order-statistic interval of a median (the binomial interval, Conover 1999
ch. 3.2): for ``n`` sorted values ``x_(1) <= ... <= x_(n)`` the interval ``[x_(k), x_(n-k+1)]`` covers
the population median with probability ``1 - 2 P(Binom(n, 1/2) <= k - 1)``, whatever the distribution
(exactly for continuous data; at least that with ties). The interval chosen is the narrowest whose
coverage reaches the nominal confidence; where ``n`` is too small for that, the widest there is,
``[min, max]``, with the coverage it really has:

    n          3      4      5       6       7       8       10
    [min,max]  75%    87.5%  93.75%  96.9%   98.4%   99.2%   99.8%
    at 95%     -      -      -       k=1     k=1     k=1     k=2: 97.9%

The ratio (or difference) of two cells
--------------------------------------
:func:`shift_ci` is the distribution-free interval of the shift between two independent samples that
inverts the Mann-Whitney test (Moses 1953; Hollander & Wolfe 1999 ch. 4.3): of the ``m n`` pairwise
differences ``b_j - a_i`` sorted, ``[D_(k), D_(mn-k+1)]`` covers the shift with probability
``1 - 2 P(U <= k - 1)``, ``U`` the Mann-Whitney count under no difference, computed exactly here. On the
logarithms of positive values the shift is a ratio (``median(b) / median(a)`` when the two differ by a
scale factor), the form used for throughput and times; on the values themselves a difference (for
quantities that may be negative, e.g. memory growth beyond a control). The widest interval, every
value of one sample below every value of the other, has coverage ``1 - 2 / C(m + n, m)``:

    per side   2 v 2   3 v 3   4 v 4   5 v 5    6 v 6
    widest     66.7%   90%     97.1%   99.2%    99.8%

It is the interval for small samples: the exact percentile bootstrap of a ratio of medians, used here
before, gave about 90% at 3 v 3 (it lands on the same [min, max] ratios) and about 96.7% at 5 v 5 when
asked for 95% (simulated, normal data), a confidence it could not state.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

__all__ = [
    "MIN_N",
    "MedianInterval",
    "ShiftInterval",
    "coverage_text",
    "median_ci",
    "n_for_median",
    "n_for_shift",
    "order_coverage",
    "order_k",
    "pct",
    "shift_ci",
    "shift_coverage",
    "widest_shift_coverage",
]

#: Fewest values for which an interval or a comparison is computed.
MIN_N = 3
#: Largest m x n for which the Mann-Whitney null distribution is computed exactly (a normal approximation
#: with continuity correction beyond: at that size the two agree to a few parts in a thousand).
EXACT_MN = 2500


def pct(p: float) -> str:
    """A coverage as a percentage with three significant digits: 75%, 87.5%, 93.8%, 96.9%."""
    if p is None or not np.isfinite(p):
        return "unknown"
    return f"{100 * p:.3g}%"


def _finite(values) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    return arr[np.isfinite(arr)]


# --------------------------------------------------------------------------------------------------------
# one median


def order_coverage(n: int, k: int = 1) -> float:
    """Coverage of ``[x_(k), x_(n-k+1)]`` for the median of ``n`` values: ``1 - 2 P(Binom(n, 1/2) <= k - 1)``."""
    if n < 1 or k < 1 or 2 * k > n + 1:
        return float("nan")
    tail = sum(math.comb(n, j) for j in range(k)) / 2**n
    return max(0.0, 1.0 - 2.0 * tail)


@lru_cache(maxsize=512)
def order_k(n: int, confidence: float = 0.95) -> int:
    """The ``k`` of the narrowest order-statistic interval with coverage >= ``confidence``; 1 ([min, max])
    when even that falls short."""
    best = 1
    for k in range(1, (n + 1) // 2 + 1):
        if order_coverage(n, k) >= confidence:
            best = k
        else:
            break
    return best


class MedianInterval(NamedTuple):
    """An interval of a median: ``method`` is "order statistic", "degenerate" (every value equal: the
    interval is that value) or "n<3" (no interval: NaN); ``coverage`` its real coverage for ``n``."""

    low: float
    high: float
    method: str
    coverage: float
    n: int


def median_ci(values, confidence: float = 0.95) -> MedianInterval:
    """Order-statistic interval of the median of the finite ``values`` (see the module doc)."""
    x = np.sort(_finite(values))
    n = int(x.size)
    if n < MIN_N:
        return MedianInterval(float("nan"), float("nan"), "n<3", float("nan"), n)
    k = order_k(n, confidence)
    cov = order_coverage(n, k)
    lo, hi = float(x[k - 1]), float(x[n - k])
    return MedianInterval(lo, hi, "degenerate" if x[0] == x[-1] else "order statistic", cov, n)


def n_for_median(confidence: float) -> int:
    """Fewest values whose widest median interval reaches ``confidence``."""
    n = MIN_N
    while order_coverage(n, 1) < confidence and n < 1000:
        n += 1
    return n


# --------------------------------------------------------------------------------------------------------
# two samples: the shift (difference or ratio)


@lru_cache(maxsize=256)
def _mw_cdf(m: int, n: int) -> np.ndarray:
    """``P(U <= u)`` for ``u = 0 .. m n`` under no difference, ``U`` the Mann-Whitney count of (a, b) pairs
    with b below a. Recursion on the last value of the pooled order: it belongs to a (exceeding all n
    of b) with probability m / (m + n), else to b."""
    if m * n > EXACT_MN:
        u = np.arange(m * n + 1)
        mu, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
        from scipy.special import ndtr  # the normal CDF (scipy.stats.norm.cdf), without scipy.stats' import

        return ndtr((u + 0.5 - mu) / sd)
    # p[j] is the distribution of U for sizes (i, j), i growing row by row
    p = [np.ones(1) for _ in range(n + 1)]  # i = 0: U = 0 for every j
    for i in range(1, m + 1):
        row = [np.ones(1)]  # j = 0: U = 0
        for j in range(1, n + 1):
            size = i * j + 1
            out = np.zeros(size)
            up = p[j]  # sizes (i - 1, j): the last value is a's, above all j of b's
            out[j : j + up.size] += (i / (i + j)) * up
            left = row[j - 1]  # sizes (i, j - 1): the last value is b's
            out[: left.size] += (j / (i + j)) * left
            row.append(out)
        p = row
    return np.cumsum(p[n])


def shift_coverage(m: int, n: int, k: int) -> float:
    """Coverage of ``[D_(k), D_(mn-k+1)]``: ``1 - 2 P(U <= k - 1)``."""
    if m < 1 or n < 1 or k < 1 or 2 * k > m * n + 1:
        return float("nan")
    return max(0.0, 1.0 - 2.0 * float(_mw_cdf(m, n)[k - 1]))


def widest_shift_coverage(m: int, n: int) -> float:
    """Coverage of the widest shift interval (every value of one sample below every value of the other)."""
    return shift_coverage(m, n, 1)


def _shift_k(m: int, n: int, confidence: float) -> int:
    cdf = _mw_cdf(m, n)
    # coverage(k) = 1 - 2 cdf[k - 1] falls as k grows: the largest k that still reaches `confidence`
    ok = np.flatnonzero(1.0 - 2.0 * cdf[: (m * n + 1) // 2] >= confidence - 1e-12)
    return int(ok[-1]) + 1 if ok.size else 1


def n_for_shift(confidence: float) -> int:
    """Fewest values per side (the same on both) whose widest shift interval reaches ``confidence``."""
    n = MIN_N
    while widest_shift_coverage(n, n) < confidence and n < 1000:
        n += 1
    return n


class ShiftInterval(NamedTuple):
    """An interval of the shift of b against a: a ratio (``log=True``) or a difference. ``method`` is
    "Mann-Whitney (ratio)" / "Mann-Whitney (difference)", or why there is none ("n<3", "non-positive
    values"); ``coverage`` its real coverage for ``n_a`` and ``n_b``; ``k`` the order of its ends."""

    low: float
    high: float
    method: str
    coverage: float
    n_a: int
    n_b: int
    k: int


def shift_ci(a, b, confidence: float = 0.95, *, log: bool = True) -> ShiftInterval:
    """Distribution-free interval of the ratio b / a (``log=True``) or the difference b - a (see module doc)."""
    xa, xb = _finite(a), _finite(b)
    m, n = int(xa.size), int(xb.size)
    nan = float("nan")
    if m < MIN_N or n < MIN_N:
        return ShiftInterval(nan, nan, "n<3", nan, m, n, 0)
    if log:
        if (xa <= 0).any() or (xb <= 0).any():
            return ShiftInterval(nan, nan, "non-positive values", nan, m, n, 0)
        xa, xb = np.log(xa), np.log(xb)
    d = np.sort((xb[None, :] - xa[:, None]).ravel())
    k = _shift_k(m, n, confidence)
    lo, hi = float(d[k - 1]), float(d[m * n - k])
    if log:
        lo, hi = math.exp(lo), math.exp(hi)
    return ShiftInterval(
        lo, hi, "Mann-Whitney (ratio)" if log else "Mann-Whitney (difference)", shift_coverage(m, n, k), m, n, k
    )


def coverage_text(ns, confidence: float = 0.95) -> str:
    """How the per-cell intervals of cells with ``ns`` repetitions read, in words, e.g. "interval [min, max] of
    3 repetitions, 75% coverage" or "intervals of 3 to 6 repetitions, 75% to 96.9% coverage"."""
    ns = sorted({int(n) for n in ns if n is not None and np.isfinite(n) and n >= MIN_N})
    if not ns:
        return f"no interval (fewer than {MIN_N} repetitions)"
    covs = [order_coverage(n, order_k(n, confidence)) for n in ns]
    if len(ns) == 1:
        n, k = ns[0], order_k(ns[0], confidence)
        which = "[min, max]" if k == 1 else f"[{k}th lowest, {k}th highest]"
        return f"interval {which} of {n} repetitions, {pct(covs[0])} coverage"
    lo, hi = min(covs), max(covs)
    return f"intervals of {ns[0]} to {ns[-1]} repetitions, {pct(lo)} to {pct(hi)} coverage"

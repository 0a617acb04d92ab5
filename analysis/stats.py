"""Robust summary statistics and A/B comparison of benchmark repetitions.

Pure functions on tidy tables (one row per measured cell repetition); no I/O,
no figures, no torch.

Conventions
-----------
* Only rows whose ``status`` column equals ``"ok"`` carry metrics. Rows with any
  other status (``"failed"``, ``"timeout"``) and NaN/inf metric values are
  ignored for the statistics but counted in ``n_not_ok`` / ``n_missing`` so a
  report can show them. If the table has no status column, every row counts
  as ok.
* The location estimate is the **median** of the repetitions (benchmark
  timings are skewed by outliers; the median is what pyperf/asv report).
* The interval of the median is a nonparametric bootstrap. For the default
  ``"percentile"`` method and up to 40 values, the bootstrap distribution of
  the median is computed exactly (it depends only on which order statistics
  the resample's median lands on), which is what
  :func:`scipy.stats.bootstrap` converges to as ``n_resamples`` grows, with
  no resampling noise and at a fraction of the cost; beyond 40 values, or
  for other methods, :func:`scipy.stats.bootstrap` resamples
  (``n_resamples=9999`` by default, seeded, so the same input always gives
  the same interval). The default method is ``"percentile"``: BCa's jackknife acceleration is unreliable for the median
  on the 3 to 10 repetitions typical here and yields NaN when the values tie.
  ``method="BCa"`` or ``"basic"`` can be asked for. With fewer than 3 values
  no interval is computed (NaN) and ``ci_method`` says ``"n<3"``; when all
  values are identical the interval is the point itself and ``ci_method``
  says ``"degenerate"``.
* Spread is the interquartile range (pandas/numpy linear interpolation of the
  quartiles); ``iqr_rel = iqr / |median|``; a group is ``unstable`` when
  ``iqr_rel > unstable_iqr`` (default 10 %, the threshold pyperf and asv use
  to warn about unstable benchmarks).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as _st
from scipy.special import gammaln, xlogy

__all__ = [
    "MIN_N",
    "EXACT_MAX_N",
    "DEFAULT_SEED",
    "Comparison",
    "ok_rows",
    "median_ci",
    "summarize",
    "compare",
]

#: Fewest repetitions for which an interval or a comparison is computed.
MIN_N = 3
#: Seed of every bootstrap in this module (results are reproducible).
DEFAULT_SEED = 20240917
DEFAULT_RESAMPLES = 9999

_BOOT_PARAMS = set(inspect.signature(_st.bootstrap).parameters)


def _rng_kwargs(seed: int) -> dict[str, Any]:
    # scipy >= 1.15 takes ``rng``; older releases only ``random_state``.
    gen = np.random.default_rng(seed)
    return {"rng": gen} if "rng" in _BOOT_PARAMS else {"random_state": gen}


def _median_stat(x, axis=-1):
    return np.median(x, axis=axis)


def _finite(values) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    return arr[np.isfinite(arr)]


def ok_rows(df: pd.DataFrame, status_col: str = "status", ok_value: str = "ok") -> pd.DataFrame:
    """Rows of ``df`` that carry metrics (all rows if there is no status column)."""
    if status_col in df.columns:
        return df[df[status_col] == ok_value]
    return df


#: Largest sample for which the bootstrap distribution of the median is computed exactly
#: (the work grows as n^4 for even n); larger samples are resampled (``n_resamples``).
EXACT_MAX_N = 40


@lru_cache(maxsize=128)
def _median_atoms(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact bootstrap distribution of the median of ``n`` values, as order-statistic pairs.

    A resample of size ``n`` drawn with replacement from the sorted sample ``x_1 <= ... <= x_n``
    has a median equal to ``(x_a + x_b) / 2`` for some ``a <= b`` (``a == b`` for odd ``n``).
    Returns ``(a, b, p)``: 0-based indices and the probability of each pair, summing to 1. This
    is the limit of the Monte Carlo bootstrap as ``n_resamples`` grows, with no resampling noise,
    and depends on ``n`` only (Efron & Tibshirani 1993, ch. 6 for odd ``n``).
    """
    j = np.arange(1, n + 1)
    if n % 2:
        m = (n + 1) // 2
        # P(median index <= j) = P(at least m of the n draws fall in x_1..x_j)
        cdf = _st.binom.sf(m - 1, n, j / n)
        p = np.diff(np.concatenate([[0.0], cdf]))
        return j - 1, j - 1, np.clip(p, 0.0, None)
    m = n // 2
    lf = gammaln(np.arange(n + 2) + 1.0)  # log k!
    i = np.arange(m)[:, None]  # draws below position a
    k = np.arange(1, n - m + 1)[None, :]  # draws at position b
    pa, pb, pp = [], [], []
    for a in range(1, n + 1):
        # a == b: fewer than m draws below a, at least m + 1 up to and at a
        kk = np.arange(n + 1)[None, :]
        ok = (kk >= m + 1 - i) & (i + kk <= n)
        rest = np.clip(n - i - kk, 0, None)
        logt = (lf[n] - lf[i] - lf[kk] - lf[rest] + xlogy(i, (a - 1) / n) + xlogy(kk, 1 / n)
                + xlogy(rest, (n - a) / n))
        pa.append(a - 1)
        pb.append(a - 1)
        pp.append(float(np.exp(logt[ok]).sum()))
        # a < b: exactly m draws up to a (at least one at a), none strictly between, at least one at b
        for b in range(a + 1, n + 1):
            rest = n - m - k
            logt = (lf[n] - lf[i] - lf[m - i] - lf[k] - lf[rest] + xlogy(i, (a - 1) / n)
                    + xlogy(m - i, 1 / n) + xlogy(k, 1 / n) + xlogy(rest, (n - b) / n))
            pa.append(a - 1)
            pb.append(b - 1)
            pp.append(float(np.exp(logt).sum()))
    p = np.asarray(pp)
    return np.asarray(pa), np.asarray(pb), p / p.sum()


def _exact_percentile_ci(sorted_x: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of the median for each row of ``sorted_x`` (rows sorted ascending, all of one n)."""
    g, n = sorted_x.shape
    a, b, p = _median_atoms(n)
    vals = (sorted_x[:, a] + sorted_x[:, b]) / 2.0
    order = np.argsort(vals, axis=1, kind="stable")
    v = np.take_along_axis(vals, order, axis=1)
    cum = np.cumsum(p[order], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo = np.argmax(cum >= alpha - 1e-12, axis=1)
    hi = np.argmax(cum >= 1.0 - alpha - 1e-12, axis=1)
    rows = np.arange(g)
    return v[rows, lo], v[rows, hi]


def _median_distribution(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values and probabilities of the exact bootstrap distribution of the median of ``x``."""
    xs = np.sort(np.asarray(x, dtype=float))
    a, b, p = _median_atoms(xs.size)
    return (xs[a] + xs[b]) / 2.0, p


def _exact_ratio_ci(xa: np.ndarray, xb: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile interval of median(b) / median(a), the two samples resampled independently (exact)."""
    va, pa = _median_distribution(xa)
    vb, pb = _median_distribution(xb)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (vb[None, :] / va[:, None]).ravel()
    p = (pa[:, None] * pb[None, :]).ravel()
    order = np.argsort(r, kind="stable")
    r, cum = r[order], np.cumsum(p[order])
    alpha = (1.0 - confidence) / 2.0
    lo = r[int(np.argmax(cum >= alpha - 1e-12))]
    hi = r[int(np.argmax(cum >= 1.0 - alpha - 1e-12))]
    return float(lo), float(hi)


def median_ci(
    values,
    confidence: float = 0.95,
    *,
    method: str = "percentile",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float, str]:
    """Bootstrap interval of the median of the finite ``values``.

    Returns ``(low, high, ci_method)``; ``ci_method`` is ``"n<3"`` (interval
    NaN), ``"degenerate"`` (all values equal: interval is that value) or the
    bootstrap method used (``"percentile"``, ``"BCa"``, ``"basic"``). For
    ``"percentile"`` and up to :data:`EXACT_MAX_N` values the bootstrap
    distribution is computed exactly (no resampling, ``n_resamples`` and
    ``seed`` unused); otherwise :func:`scipy.stats.bootstrap` resamples.
    """
    x = _finite(values)
    if x.size < MIN_N:
        return float("nan"), float("nan"), "n<3"
    if np.all(x == x[0]):
        return float(x[0]), float(x[0]), "degenerate"
    if method == "percentile" and x.size <= EXACT_MAX_N:
        lo, hi = _exact_percentile_ci(np.sort(x)[None, :], confidence)
        return float(lo[0]), float(hi[0]), method
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # DegenerateDataWarning on tiny samples
        res = _st.bootstrap(
            (x,),
            _median_stat,
            vectorized=True,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method=method,
            **_rng_kwargs(seed),
        )
    return float(res.confidence_interval.low), float(res.confidence_interval.high), method


def summarize(
    df: pd.DataFrame,
    by: Sequence[str],
    value: str,
    confidence: float = 0.95,
    unstable_iqr: float = 0.10,
    *,
    status_col: str = "status",
    ok_value: str = "ok",
    method: str = "percentile",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Per-group robust summary of the metric column ``value``.

    ``by`` names the grouping columns (usually ``["cell_id"]`` plus the config
    columns to carry along, which are constant within a cell). Groups are
    formed over *all* rows, NaN keys included, so a cell whose repetitions all
    failed still gets a row (``n == 0``, statistics NaN).

    Returned columns, one row per group, sorted by ``by``:

    ``*by, n, n_not_ok, n_missing, median, ci_low, ci_high, ci_method,
    confidence, mean, std, min, max, q1, q3, iqr, iqr_rel, unstable``

    * ``n``: ok rows with a finite ``value``; ``n_not_ok``: rows whose status
      is not ok; ``n_missing``: ok rows whose value is NaN/inf.
    * ``ci_low``/``ci_high``: bootstrap interval of the median (see module
      doc and :func:`median_ci`); NaN with ``ci_method == "n<3"`` when ``n < 3``.
    * ``std``: sample standard deviation (ddof=1; NaN when ``n < 2``).
    * ``iqr_rel``: ``iqr / |median|`` (NaN when the median is 0 or n == 0).
    * ``unstable``: ``iqr_rel > unstable_iqr`` (False where iqr_rel is NaN).

    Vectorised: groups with the same ``n`` are summarised together as one
    matrix, so 100,000 rows take well under a second.
    """
    by = list(by)
    if not by:
        raise ValueError("summarize: `by` must name at least one column")
    missing = [c for c in [*by, value] if c not in df.columns]
    if missing:
        raise KeyError(f"summarize: columns not in table: {missing}")

    if status_col in df.columns:
        is_ok = (df[status_col] == ok_value).to_numpy()
    else:
        is_ok = np.ones(len(df), dtype=bool)
    vals = pd.to_numeric(df[value], errors="coerce").to_numpy(dtype=float)

    grouped = df.groupby(by, dropna=False, sort=True, observed=True)
    gid = grouped.ngroup().to_numpy()
    keys = grouped.size().index.to_frame(index=False)
    keys.columns = by
    ng = len(keys)
    fin = is_ok & np.isfinite(vals)
    n = np.bincount(gid[fin], minlength=ng)
    n_ok = np.bincount(gid[is_ok], minlength=ng)
    n_not_ok = np.bincount(gid[~is_ok], minlength=ng)

    nan = np.full(ng, np.nan)
    out = {name: nan.copy() for name in
           ("median", "ci_low", "ci_high", "mean", "std", "min", "max", "q1", "q3")}
    ci_method = np.where(n < MIN_N, "n<3", method).astype(object)

    g_f, v_f = gid[fin], vals[fin]
    order = np.lexsort((v_f, g_f))
    g_s, v_s = g_f[order], v_f[order]
    starts = np.zeros(ng, dtype=np.int64)
    starts[1:] = np.cumsum(n)[:-1]
    for size in np.unique(n[n > 0]):
        groups = np.flatnonzero(n == size)
        m = v_s[starts[groups][:, None] + np.arange(size)[None, :]]  # rows sorted ascending
        out["median"][groups] = np.median(m, axis=1)
        out["q1"][groups], out["q3"][groups] = np.quantile(m, [0.25, 0.75], axis=1)
        out["mean"][groups] = m.mean(axis=1)
        out["min"][groups], out["max"][groups] = m[:, 0], m[:, -1]
        if size > 1:
            out["std"][groups] = m.std(axis=1, ddof=1)
        if size < MIN_N:
            continue
        flat = m[:, 0] == m[:, -1]
        ci_method[groups[flat]] = "degenerate"
        out["ci_low"][groups[flat]] = out["ci_high"][groups[flat]] = m[flat, 0]
        rest = groups[~flat]
        if rest.size == 0:
            continue
        if method == "percentile" and size <= EXACT_MAX_N:
            lo, hi = _exact_percentile_ci(m[~flat], confidence)
        else:
            lo, hi = np.array([median_ci(row, confidence, method=method, n_resamples=n_resamples, seed=seed)[:2]
                               for row in m[~flat]]).T
        out["ci_low"][rest], out["ci_high"][rest] = lo, hi

    iqr = out["q3"] - out["q1"]
    with np.errstate(divide="ignore", invalid="ignore"):
        iqr_rel = np.where((n > 0) & (out["median"] != 0), iqr / np.abs(out["median"]), np.nan)
    res = keys.assign(
        n=n, n_not_ok=n_not_ok, n_missing=n_ok - n,
        median=out["median"], ci_low=out["ci_low"], ci_high=out["ci_high"], ci_method=ci_method,
        confidence=float(confidence), mean=out["mean"], std=out["std"], min=out["min"], max=out["max"],
        q1=out["q1"], q3=out["q3"], iqr=iqr, iqr_rel=iqr_rel,
        unstable=np.isfinite(iqr_rel) & (iqr_rel > unstable_iqr),
    )
    res["ci_method"] = res["ci_method"].astype(str)
    for c in by:
        try:
            res[c] = res[c].astype(df[c].dtype)
        except (TypeError, ValueError):
            pass
    return res.reset_index(drop=True)


@dataclass(frozen=True)
class Comparison:
    """Outcome of :func:`compare` (b relative to a).

    ``ratio`` is median(b) / median(a); ``ci_low``/``ci_high`` its bootstrap
    interval (each sample resampled independently; exact for the percentile
    method up to 40 values per side, as for :func:`median_ci`); ``p_value`` the two-sided
    Mann-Whitney U p-value. ``verdict`` is one of ``"faster"``, ``"slower"``,
    ``"no difference"``, ``"not enough data"`` and describes b relative to a.
    """

    n_a: int
    n_b: int
    median_a: float
    median_b: float
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    significant: bool
    verdict: str
    higher_is_better: bool = True
    min_effect: float = 0.05
    alpha: float = 0.05
    confidence: float = 0.95


VERDICTS = ("faster", "slower", "no difference", "not enough data")


def compare(
    a,
    b,
    min_effect: float = 0.05,
    alpha: float = 0.05,
    higher_is_better: bool = True,
    *,
    confidence: float = 0.95,
    method: str = "percentile",
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Comparison:
    """Compare the repetitions ``b`` against the baseline ``a``.

    NaN/inf values are dropped. With fewer than 3 values on either side the
    verdict is ``"not enough data"`` (``ratio`` is still reported for
    information, interval and p-value are NaN): a bare ratio of two single runs
    is never a result.

    ``significant`` requires all three of: Mann-Whitney p < ``alpha``;
    ``|ratio - 1| >= min_effect`` (a practically relevant effect, default
    5 %); and the ``confidence`` bootstrap interval of the ratio excluding 1.
    A significant ratio > 1 means b is ``"faster"`` when ``higher_is_better``
    (throughput) and ``"slower"`` otherwise (latencies, memory); otherwise the
    verdict is ``"no difference"``.

    Note: with 3 values per side the smallest possible exact two-sided
    Mann-Whitney p-value is 0.1, so ``alpha = 0.05`` needs at least 4
    repetitions per side to ever call a difference.
    """
    xa, xb = _finite(a), _finite(b)
    na, nb = int(xa.size), int(xb.size)
    med_a = float(np.median(xa)) if na else float("nan")
    med_b = float(np.median(xb)) if nb else float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.divide(med_b, med_a)) if na and nb else float("nan")
    common = dict(
        n_a=na, n_b=nb, median_a=med_a, median_b=med_b, ratio=ratio,
        higher_is_better=bool(higher_is_better), min_effect=float(min_effect),
        alpha=float(alpha), confidence=float(confidence),
    )
    nan = float("nan")
    if na < MIN_N or nb < MIN_N:
        return Comparison(
            ci_low=nan, ci_high=nan, p_value=nan, significant=False,
            verdict="not enough data", **common,
        )

    p = float(_st.mannwhitneyu(xa, xb, alternative="two-sided").pvalue)

    def _ratio(sa, sb, axis=-1):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.median(sb, axis=axis) / np.median(sa, axis=axis)

    if np.all(xa == xa[0]) and np.all(xb == xb[0]):
        lo = hi = ratio
    elif method == "percentile" and na <= EXACT_MAX_N and nb <= EXACT_MAX_N:
        lo, hi = _exact_ratio_ci(xa, xb, confidence)
    else:
        with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
            warnings.simplefilter("ignore")
            res = _st.bootstrap(
                (xa, xb),
                _ratio,
                vectorized=True,
                paired=False,
                n_resamples=n_resamples,
                confidence_level=confidence,
                method=method,
                **_rng_kwargs(seed),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)

    excludes_one = bool(np.isfinite(lo) and np.isfinite(hi) and (lo > 1.0 or hi < 1.0))
    significant = bool(
        np.isfinite(p)
        and p < alpha
        and np.isfinite(ratio)
        and abs(ratio - 1.0) >= min_effect
        and excludes_one
    )
    if significant:
        better = (ratio > 1.0) == bool(higher_is_better)
        verdict = "faster" if better else "slower"
    else:
        verdict = "no difference"
    return Comparison(
        ci_low=lo, ci_high=hi, p_value=p, significant=significant, verdict=verdict, **common
    )

"""Robust summary statistics and A/B comparison of benchmark repetitions.

Pure functions on tidy tables (one row per measured cell repetition); no I/O, no figures, no torch.

Conventions
-----------
* Only rows whose ``status`` column equals ``"ok"`` carry metrics. Rows with any other status
  (``"failed"``, ``"timeout"``) and NaN/inf metric values are ignored for the statistics but counted in
  ``n_not_ok`` / ``n_missing`` so a report can show them. If the table has no status column, every row
  counts as ok.
* The location estimate is the **median** of the repetitions (benchmark timings are skewed by outliers;
  the median is what pyperf/asv report).
* The interval of the median is the distribution-free order-statistic interval
  (:func:`analysis.intervals.median_ci`): the narrowest ``[x_(k), x_(n-k+1)]`` whose coverage reaches the
  nominal ``confidence`` where ``n`` allows it, else ``[min, max]`` with the coverage it really has (75% at
  n = 3, 87.5% at 4, 93.75% at 5, 96.9% at 6). Every interval carries that coverage (``ci_coverage``) and
  its ``n``: nothing here calls an interval 95% unless it is. With fewer than 3 values no interval is
  computed (NaN, ``ci_method`` "n<3"); when all values are identical the interval is the point itself
  (``ci_method`` "degenerate").
* Spread is the interquartile range (pandas/numpy linear interpolation of the quartiles);
  ``iqr_rel = iqr / |median|``; a group is ``unstable`` when ``iqr_rel > unstable_iqr`` (default 10 %,
  the threshold pyperf and asv use to warn about unstable benchmarks).
* A comparison (:func:`compare`) decides "b differs from a by at least ``min_effect``" on the
  distribution-free interval of the ratio b / a (:func:`analysis.intervals.shift_ci`), with the verdicts
  of :data:`analysis.verdicts.COMPARISON_VERDICTS`.
* Paired measurements (rounds that ran arm A next to arm B, runs of one cell by two approaches) whose
  estimate is a ratio of sums (throughput: total units over total seconds, never a mean of per-window
  rates) get a seeded percentile bootstrap over the pairs (:func:`rate_ratio_ci`, :func:`sum_ratio_ci`,
  both on :func:`paired_bootstrap_ci`): resampling whole pairs keeps what the two arms of a pair shared
  (the machine's load at that moment), so it cancels. Its ``confidence`` is the nominal one asked for:
  a percentile bootstrap has no exact coverage (tests/test_stats.py simulates it near nominal at 30 pairs).
  Each returns an :class:`EstimateInterval` (estimate, low, high, method, confidence, n).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as _st

from analysis.intervals import (
    MIN_N,
    n_for_shift,
    order_coverage,
    order_k,
    pct,
    shift_ci,
    widest_shift_coverage,
)
from analysis.intervals import median_ci as median_ci  # noqa: PLC0414  (re-exported)
from analysis.records import keep_dtypes, ok_mask
from analysis.verdicts import (
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

__all__ = [
    "MIN_N",
    "VERDICTS",
    "Comparison",
    "median_ci",
    "summarize",
    "compare",
    "coverage_text",
    "EstimateInterval",
    "paired_bootstrap_ci",
    "rate_ratio_ci",
    "sum_ratio_ci",
]

#: The verdicts :func:`compare` gives (defined once, in analysis.verdicts).
VERDICTS = COMPARISON_VERDICTS


def _finite(values) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    return arr[np.isfinite(arr)]


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


def summarize(
    df: pd.DataFrame,
    by: Sequence[str],
    value: str,
    confidence: float = 0.95,
    unstable_iqr: float = 0.10,
) -> pd.DataFrame:
    """Per-group robust summary of the metric column ``value``.

    ``by`` names the grouping columns (usually ``["cell_id"]`` plus the config columns to carry along,
    which are constant within a cell). Groups are formed over *all* rows, NaN keys included, so a cell
    whose repetitions all failed still gets a row (``n == 0``, statistics NaN).

    Returned columns, one row per group, sorted by ``by``:

    ``*by, n, n_not_ok, n_missing, median, ci_low, ci_high, ci_method, ci_coverage, confidence, mean,
    std, min, max, q1, q3, iqr, iqr_rel, unstable``

    * ``n``: ok rows with a finite ``value``; ``n_not_ok``: rows whose status is not ok; ``n_missing``:
      ok rows whose value is NaN/inf.
    * ``ci_low``/``ci_high``: order-statistic interval of the median (see module doc); ``ci_coverage`` its
      real coverage for ``n`` (may be below ``confidence``, the nominal asked for); NaN with
      ``ci_method == "n<3"`` when ``n < 3``.
    * ``std``: sample standard deviation (ddof=1; NaN when ``n < 2``).
    * ``iqr_rel``: ``iqr / |median|`` (NaN when the median is 0 or n == 0).
    * ``unstable``: ``iqr_rel > unstable_iqr`` (False where iqr_rel is NaN).

    Vectorised: groups with the same ``n`` are summarised together as one matrix, so 100,000 rows take
    well under a second.
    """
    by = list(by)
    if not by:
        raise ValueError("summarize: `by` must name at least one column")
    missing = [c for c in [*by, value] if c not in df.columns]
    if missing:
        raise KeyError(f"summarize: columns not in table: {missing}")

    is_ok = ok_mask(df)
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

    out, ci_method = _group_statistics(gid[fin], vals[fin], n, confidence)
    iqr = out["q3"] - out["q1"]
    with np.errstate(divide="ignore", invalid="ignore"):
        iqr_rel = np.where((n > 0) & (out["median"] != 0), iqr / np.abs(out["median"]), np.nan)
    res = keys.assign(
        n=n, n_not_ok=n_not_ok, n_missing=n_ok - n,
        median=out["median"], ci_low=out["ci_low"], ci_high=out["ci_high"], ci_method=ci_method,
        ci_coverage=out["ci_coverage"], confidence=float(confidence), mean=out["mean"], std=out["std"],
        min=out["min"], max=out["max"], q1=out["q1"], q3=out["q3"], iqr=iqr, iqr_rel=iqr_rel,
        unstable=np.isfinite(iqr_rel) & (iqr_rel > unstable_iqr),
    )
    res["ci_method"] = res["ci_method"].astype(str)
    return keep_dtypes(res, df, by).reset_index(drop=True)


def _group_statistics(g_f: np.ndarray, v_f: np.ndarray, n: np.ndarray,
                      confidence: float) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per group (group ids `g_f` of the finite values `v_f`; `n[i]` values in group i): median, quartiles, mean,
    std, min, max and the order-statistic interval of the median with its coverage, and each group's
    `ci_method`. Groups of the same size are computed together, as one sorted matrix."""
    ng = len(n)
    nan = np.full(ng, np.nan)
    out = {name: nan.copy() for name in
           ("median", "ci_low", "ci_high", "ci_coverage", "mean", "std", "min", "max", "q1", "q3")}
    ci_method = np.where(n < MIN_N, "n<3", "order statistic").astype(object)
    order = np.lexsort((v_f, g_f))
    v_s = v_f[order]
    starts = np.zeros(ng, dtype=np.int64)
    starts[1:] = np.cumsum(n)[:-1]
    for size in np.unique(n[n > 0]):
        size = int(size)
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
        k = order_k(size, confidence)
        out["ci_low"][groups], out["ci_high"][groups] = m[:, k - 1], m[:, size - k]
        out["ci_coverage"][groups] = order_coverage(size, k)
        ci_method[groups[m[:, 0] == m[:, -1]]] = "degenerate"
    return out, ci_method


@dataclass(frozen=True)
class Comparison:
    """Outcome of :func:`compare` (b relative to a).

    ``ratio`` is median(b) / median(a); ``ci_low``/``ci_high`` the distribution-free interval of the ratio
    (:func:`analysis.intervals.shift_ci`), ``ci_coverage`` its real coverage for ``n_a`` and ``n_b`` (90% at
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
    p_value: float
    significant: bool
    verdict: str
    higher_is_better: bool = True
    min_effect: float = 0.05
    alpha: float = 0.05
    confidence: float = CLAIM_CONFIDENCE
    ci_coverage: float = float("nan")
    ci_method: str = ""
    reason: str = ""

    def interval_text(self) -> str:
        """e.g. "1.18x [1.1-1.25] (90%, 3 v 3)"; "–" without an interval."""
        if not (np.isfinite(self.ci_low) and np.isfinite(self.ci_high)):
            return "–"
        return (f"{self.ratio:.3g}x [{self.ci_low:.3g}-{self.ci_high:.3g}] "
                f"({pct(self.ci_coverage)}, {self.n_a} v {self.n_b})")


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
    common = dict(
        n_a=na, n_b=nb, median_a=med_a, median_b=med_b, ratio=ratio,
        higher_is_better=bool(higher_is_better), min_effect=float(min_effect),
        alpha=float(alpha), confidence=float(confidence),
    )
    nan = float("nan")
    if na < MIN_N or nb < MIN_N:
        return Comparison(ci_low=nan, ci_high=nan, p_value=nan, significant=False, verdict=NOT_MEASURED,
                          reason=f"needs {MIN_N} ok repetitions per side (has {na} v {nb})", **common)

    p = float(_st.mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
    iv = shift_ci(xa, xb, confidence, log=True)
    top = 1.0 + float(min_effect)
    verdict, reason = INCONCLUSIVE, ""
    if not np.isfinite(iv.coverage):
        reason = f"no ratio interval: {iv.method}"
    elif iv.coverage < confidence - 1e-9:
        need = n_for_shift(confidence)
        reason = (f"{na} v {nb} repetitions reach at most {pct(iv.coverage)} (nominal {pct(confidence)}: {need} per "
                  f"side reach {pct(widest_shift_coverage(need, need))})")
    else:
        differs = outside(1 / top, top).decide(iv.low, iv.high)
        if differs == HOLDS:
            verdict = FASTER if (iv.low >= 1.0) == bool(higher_is_better) else SLOWER
        elif within(1 / top, top).decide(iv.low, iv.high) == HOLDS:
            verdict = EQUIVALENT
        else:
            reason = f"the interval reaches both sides of a {min_effect:.0%} effect"
    return Comparison(ci_low=iv.low, ci_high=iv.high, p_value=p, significant=verdict in (FASTER, SLOWER),
                      verdict=verdict, ci_coverage=iv.coverage, ci_method=iv.method, reason=reason, **common)


class EstimateInterval(NamedTuple):
    """An estimate with its interval. ``method`` says how the interval was made, or why there is none (NaN);
    ``confidence`` is the confidence it was made for; ``n`` the pairs it rests on."""

    estimate: float
    low: float
    high: float
    method: str
    confidence: float
    n: int


BOOTSTRAP = "paired percentile bootstrap"
N_BOOT = 4000


def paired_bootstrap_ci(statistic: Callable[..., np.ndarray], *columns, confidence: float = 0.95,
                        n_boot: int = N_BOOT, seed: int = 0) -> EstimateInterval:
    """Percentile bootstrap over pairs: row i of every column belongs to pair i, and each resample draws
    whole pairs. ``statistic(*arrays)`` maps arrays of shape (k, n) to k values; the estimate is it on the
    data as measured. With one pair the interval is the estimate itself."""
    cols = [np.asarray(c, dtype=float).ravel() for c in columns]
    n = len(cols[0]) if cols else 0
    if any(len(c) != n for c in cols):
        raise ValueError("paired samples must have the same length")
    nan = float("nan")
    if n == 0:
        return EstimateInterval(nan, nan, nan, "no pairs", confidence, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = float(statistic(*(c[None, :] for c in cols))[0])
        if not np.isfinite(est):
            return EstimateInterval(nan, nan, nan, "estimate not finite", confidence, n)
        if n == 1:
            return EstimateInterval(est, est, est, "one pair", confidence, n)
        idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
        boot = np.asarray(statistic(*(c[idx] for c in cols)), dtype=float)
    boot = boot[np.isfinite(boot)]
    if not boot.size:
        return EstimateInterval(est, nan, nan, "no finite resample", confidence, n)
    alpha = 1.0 - confidence
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return EstimateInterval(est, float(lo), float(hi), BOOTSTRAP, confidence, n)


def rate_ratio_ci(num_units, num_seconds, den_units, den_seconds, confidence: float = 0.95,
                  n_boot: int = N_BOOT, seed: int = 0) -> EstimateInterval:
    """Ratio of two throughputs measured in paired rounds, each total units over total seconds:
    (sum num_units / sum num_seconds) / (sum den_units / sum den_seconds), bootstrapped over rounds."""
    def ratio(nu, ns, du, ds):
        return (nu.sum(1) / ns.sum(1)) / (du.sum(1) / ds.sum(1))

    return paired_bootstrap_ci(ratio, num_units, num_seconds, den_units, den_seconds, confidence=confidence,
                               n_boot=n_boot, seed=seed)


def sum_ratio_ci(num, den, den_offset: float = 0.0, confidence: float = 0.95, n_boot: int = N_BOOT,
                 seed: int = 0) -> EstimateInterval:
    """sum(num) / (den_offset + sum(den)) over paired units (e.g. the wall times of the same runs by two
    approaches), bootstrapped over units; ``den_offset`` is a cost the denominator pays once, not per unit."""
    return paired_bootstrap_ci(lambda a, b: a.sum(1) / (den_offset + b.sum(1)), num, den,
                               confidence=confidence, n_boot=n_boot, seed=seed)

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
* The interval of the median is a nonparametric bootstrap
  (:func:`scipy.stats.bootstrap`, ``n_resamples=9999`` by default, seeded,
  so the same input always gives the same interval). The default method is
  ``"percentile"``: BCa's jackknife acceleration is unreliable for the median
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
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as _st

__all__ = [
    "MIN_N",
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
    bootstrap method used (``"percentile"``, ``"BCa"``, ``"basic"``).
    """
    x = _finite(values)
    if x.size < MIN_N:
        return float("nan"), float("nan"), "n<3"
    if np.all(x == x[0]):
        return float(x[0]), float(x[0]), "degenerate"
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
      doc); NaN with ``ci_method == "n<3"`` when ``n < 3``.
    * ``std``: sample standard deviation (ddof=1; NaN when ``n < 2``).
    * ``iqr_rel``: ``iqr / |median|`` (NaN when the median is 0 or n == 0).
    * ``unstable``: ``iqr_rel > unstable_iqr`` (False where iqr_rel is NaN).
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
    work = df[by].copy()
    work["_v"] = vals
    work["_ok"] = is_ok

    rows = []
    for key, g in work.groupby(by, dropna=False, sort=True, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        ok = g["_ok"].to_numpy()
        v_ok = g["_v"].to_numpy()[ok]
        x = v_ok[np.isfinite(v_ok)]
        n = int(x.size)
        lo, hi, cim = median_ci(
            x, confidence, method=method, n_resamples=n_resamples, seed=seed
        )
        if n:
            s = pd.Series(x)
            med = float(s.median())
            q1, q3 = (float(q) for q in s.quantile([0.25, 0.75]))
            iqr = float(_st.iqr(x))
            mean, vmin, vmax = float(s.mean()), float(s.min()), float(s.max())
            std = float(s.std(ddof=1)) if n > 1 else float("nan")
        else:
            med = q1 = q3 = iqr = mean = vmin = vmax = std = float("nan")
        iqr_rel = iqr / abs(med) if n and med != 0 else float("nan")
        rows.append(
            {
                **dict(zip(by, key)),
                "n": n,
                "n_not_ok": int((~ok).sum()),
                "n_missing": int(v_ok.size - n),
                "median": med,
                "ci_low": lo,
                "ci_high": hi,
                "ci_method": cim,
                "confidence": float(confidence),
                "mean": mean,
                "std": std,
                "min": vmin,
                "max": vmax,
                "q1": q1,
                "q3": q3,
                "iqr": iqr,
                "iqr_rel": iqr_rel,
                "unstable": bool(np.isfinite(iqr_rel) and iqr_rel > unstable_iqr),
            }
        )
    cols = [
        *by, "n", "n_not_ok", "n_missing", "median", "ci_low", "ci_high", "ci_method",
        "confidence", "mean", "std", "min", "max", "q1", "q3", "iqr", "iqr_rel", "unstable",
    ]
    out = pd.DataFrame(rows, columns=cols)
    # keep the caller's dtypes for the key columns
    for c in by:
        try:
            out[c] = out[c].astype(df[c].dtype)
        except (TypeError, ValueError):
            pass
    return out.reset_index(drop=True)


@dataclass(frozen=True)
class Comparison:
    """Outcome of :func:`compare` (b relative to a).

    ``ratio`` is median(b) / median(a); ``ci_low``/``ci_high`` its bootstrap
    interval (each sample resampled independently); ``p_value`` the two-sided
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

"""Paired measurements whose estimate is a ratio of sums, with a seeded percentile bootstrap over the pairs.

Rounds that ran arm A next to arm B, or runs of one cell by two approaches, are paired; throughput is total
units over total seconds, never a mean of per-window rates. Resampling whole pairs keeps what the two arms of a
pair shared (the machine's load at that moment), so it cancels. The ``confidence`` is the nominal one asked for:
a percentile bootstrap has no exact coverage (tests/test_stats.py simulates it near nominal at 30 pairs). Each
function returns an :class:`EstimateInterval` (estimate, low, high, method, confidence, n).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

__all__ = ["EstimateInterval", "paired_bootstrap_ci", "rate_ratio_ci", "sum_ratio_ci"]


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


def paired_bootstrap_ci(
    statistic: Callable[..., np.ndarray], *columns, confidence: float = 0.95, n_boot: int = N_BOOT, seed: int = 0
) -> EstimateInterval:
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


def rate_ratio_ci(
    num_units, num_seconds, den_units, den_seconds, confidence: float = 0.95, n_boot: int = N_BOOT, seed: int = 0
) -> EstimateInterval:
    """Ratio of two throughputs measured in paired rounds, each total units over total seconds:
    (sum num_units / sum num_seconds) / (sum den_units / sum den_seconds), bootstrapped over rounds."""

    def ratio(nu, ns, du, ds):
        return (nu.sum(1) / ns.sum(1)) / (du.sum(1) / ds.sum(1))

    return paired_bootstrap_ci(
        ratio, num_units, num_seconds, den_units, den_seconds, confidence=confidence, n_boot=n_boot, seed=seed
    )


def sum_ratio_ci(
    num, den, den_offset: float = 0.0, confidence: float = 0.95, n_boot: int = N_BOOT, seed: int = 0
) -> EstimateInterval:
    """sum(num) / (den_offset + sum(den)) over paired units (e.g. the wall times of the same runs by two
    approaches), bootstrapped over units; ``den_offset`` is a cost the denominator pays once, not per unit."""
    return paired_bootstrap_ci(
        lambda a, b: a.sum(1) / (den_offset + b.sum(1)), num, den, confidence=confidence, n_boot=n_boot, seed=seed
    )

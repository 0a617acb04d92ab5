"""The stats modules compute their t quantile and normal CDF with scipy.special, which imports in a fraction of
scipy.stats' time: the values are scipy.stats' own."""

import math

import numpy as np
import pytest
from scipy import stats

from loaderbench.stats.intervals import EXACT_MN, _mw_cdf
from loaderbench.stats.stopping import CONFIDENCE, _t_quantile


@pytest.mark.parametrize("confidence", [CONFIDENCE, 0.9, 0.99])
def test_the_stopping_rules_t_quantile_is_scipy_stats_t_ppf(confidence):
    for df in [2, 3, 5, 9, 10, 30, 100, 1000, 100_000]:
        expected = stats.t.ppf(0.5 + confidence / 2, df)
        assert abs(_t_quantile(df, confidence) - expected) <= 1e-12, (df, confidence)


def test_the_large_sample_mann_whitney_cdf_is_scipy_stats_norm_cdf():
    m, n = 40, math.ceil((EXACT_MN + 1) / 40)
    assert m * n > EXACT_MN  # the normal approximation's branch
    u = np.arange(m * n + 1)
    mu, sd = m * n / 2, math.sqrt(m * n * (m + n + 1) / 12)
    expected = stats.norm.cdf((u + 0.5 - mu) / sd)
    assert np.max(np.abs(_mw_cdf(m, n) - expected)) <= 1e-12

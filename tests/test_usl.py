"""Tests of loaderbench.analysis.table.usl on synthetic curves (seeded, fast)."""

import math

import numpy as np
import pandas as pd
import pytest

from loaderbench.analysis.table.usl import fit_usl, fit_usl_groups, usl, usl_curve

N_SWEEP = np.array([1, 2, 4, 6, 8, 12, 16, 24, 32, 48])
LAM, SIGMA, KAPPA = 100.0, 0.05, 0.002


def _noisy(seed, lam=LAM, sigma=SIGMA, kappa=KAPPA, reps=5, noise=0.01):
    rng = np.random.default_rng(seed)
    n = np.repeat(N_SWEEP, reps)
    x = usl(n, lam, sigma, kappa) * (1 + noise * rng.standard_normal(n.size))
    return n, x


def test_recovers_known_parameters():
    # Tolerances: over 200 seeds of this design (10 N values x 5 reps, 1 %
    # multiplicative noise) the worst errors were lam 1.1 %, sigma 0.0022 abs,
    # kappa 3 %; the bounds below leave a margin of 2-3x.
    n, x = _noisy(seed=0)
    f = fit_usl(n, x)
    assert f.good and f.reason == "" and f.converged
    assert f.lam == pytest.approx(LAM, rel=0.03)
    assert f.sigma == pytest.approx(SIGMA, abs=0.01)
    assert f.kappa == pytest.approx(KAPPA, rel=0.10)
    assert f.peak_n == pytest.approx(math.sqrt((1 - SIGMA) / KAPPA), rel=0.10)
    assert f.r2 > 0.99 and f.rmse_rel < 0.03
    assert f.n_points == 50 and f.n_distinct == 10


def test_random_curve_is_flagged_poor():
    rng = np.random.default_rng(3)
    n = np.repeat(N_SWEEP, 3)
    f = fit_usl(n, rng.uniform(100, 1000, n.size))
    assert not f.good
    assert "r2" in f.reason


def test_linear_scaling_has_infinite_peak():
    n = np.repeat(N_SWEEP, 3)
    f = fit_usl(n, 100.0 * n)
    assert f.sigma == 0.0 and f.kappa == 0.0
    assert math.isinf(f.peak_n) and math.isinf(f.peak_x)
    assert f.lam == pytest.approx(100.0, rel=1e-6)
    assert f.good


def test_too_few_distinct_n_is_not_good():
    n = np.array([1, 2, 4, 1, 2, 4])
    f = fit_usl(n, usl(n, LAM, SIGMA, KAPPA))
    assert not f.good and "distinct" in f.reason
    f1 = fit_usl([2, 2, 2], [180.0, 181.0, 182.0])
    assert not f1.good and np.isnan(f1.sigma)


@pytest.mark.parametrize(
    "n, x",
    [
        ([0, 1, 2], [10.0, 20.0, 30.0]),  # num_workers=0 is not a USL point
        ([1, 2], [10.0]),
        ([], []),
        ([1, 2, 3], [10.0, np.nan, 30.0]),
        ([1, 2, 3], [10.0, 0.0, 30.0]),
    ],
)
def test_invalid_input_raises(n, x):
    with pytest.raises(ValueError):
        fit_usl(n, x)


def test_usl_curve_matches_model():
    n, x = _noisy(seed=1)
    f = fit_usl(n, x)
    grid = np.linspace(1, 64, 9)
    np.testing.assert_allclose(usl_curve(f, grid), usl(grid, f.lam, f.sigma, f.kappa))
    assert usl_curve(f, [1.0])[0] == pytest.approx(f.lam)


def test_fit_usl_groups_uses_ok_repetitions_with_n_ge_1():
    rows = []
    for wl, (lam, sigma, kappa) in {"a": (100, 0.05, 0.002), "b": (50, 0.1, 0.0)}.items():
        n, x = _noisy(seed=5, lam=lam, sigma=sigma, kappa=kappa)
        rows += [dict(workload=wl, cores=8, num_workers=int(ni), status="ok", samples_per_s=xi) for ni, xi in zip(n, x)]
        # main-process rows and failures must not enter the fit
        rows += [
            dict(workload=wl, cores=8, num_workers=0, status="ok", samples_per_s=1e6),
            dict(workload=wl, cores=8, num_workers=4, status="failed", samples_per_s=np.nan),
            dict(workload=wl, cores=8, num_workers=4, status="timeout", samples_per_s=1e6),
        ]
    rows.append(dict(workload="c", cores=8, num_workers=0, status="ok", samples_per_s=10.0))
    out = fit_usl_groups(pd.DataFrame(rows))
    assert list(out["workload"]) == ["a", "b", "c"]
    for col in ["lam", "sigma", "kappa", "r2", "rmse_rel", "n_points", "peak_n", "good", "reason"]:
        assert col in out.columns
    a, b, c = (out.iloc[i] for i in range(3))
    assert a["n_points"] == 50 and a["good"]
    assert a["sigma"] == pytest.approx(0.05, abs=0.01) and a["kappa"] == pytest.approx(0.002, rel=0.1)
    assert b["good"] and b["sigma"] == pytest.approx(0.1, abs=0.01) and b["kappa"] < 1e-4
    assert not c["good"] and c["n_points"] == 0 and "num_workers >= 1" in c["reason"]

"""Tests of analysis.stats on synthetic tables (seeded, fast)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from analysis.stats import Comparison, compare, median_ci, summarize


def _table():
    rng = np.random.default_rng(7)
    rows = []
    # cell "a": clean, median 100, sd 1 -> stable, CI must contain 100
    for r, v in enumerate(100 + rng.standard_normal(21)):
        rows.append(dict(study="s", cell_id="a", workload="img", num_workers=4,
                         repetition=r, status="ok", samples_per_s=v))
    # cell "b": wide spread, IQR = 20 = 20 % of the median 100 -> unstable
    for r, v in enumerate([80.0, 90.0, 100.0, 110.0, 120.0]):
        rows.append(dict(study="s", cell_id="b", workload="img", num_workers=8,
                         repetition=r, status="ok", samples_per_s=v))
    # cell "c": two ok values plus a failed and a timed-out repetition
    rows += [
        dict(study="s", cell_id="c", workload="txt", num_workers=0, repetition=0,
             status="ok", samples_per_s=50.0),
        dict(study="s", cell_id="c", workload="txt", num_workers=0, repetition=1,
             status="ok", samples_per_s=52.0),
        dict(study="s", cell_id="c", workload="txt", num_workers=0, repetition=2,
             status="failed", samples_per_s=np.nan),
        dict(study="s", cell_id="c", workload="txt", num_workers=0, repetition=3,
             status="timeout", samples_per_s=1e9),  # not ok: must be ignored
    ]
    # cell "d": every repetition failed
    rows.append(dict(study="s", cell_id="d", workload="txt", num_workers=2,
                     repetition=0, status="failed", samples_per_s=np.nan))
    return pd.DataFrame(rows)


def test_summarize_columns_and_counts():
    s = summarize(_table(), by=["cell_id", "workload", "num_workers"], value="samples_per_s")
    assert list(s["cell_id"]) == ["a", "b", "c", "d"]
    for col in ["n", "median", "ci_low", "ci_high", "ci_method", "mean", "iqr", "iqr_rel", "unstable"]:
        assert col in s.columns
    s = s.set_index("cell_id")
    assert s.loc["a", "n"] == 21 and s.loc["b", "n"] == 5
    assert s.loc["c", "n"] == 2 and s.loc["c", "n_not_ok"] == 2
    assert s.loc["c", "median"] == pytest.approx(51.0)  # the timeout's 1e9 is ignored
    assert s.loc["d", "n"] == 0 and np.isnan(s.loc["d", "median"])
    assert s.loc["a", "workload"] == "img" and s.loc["a", "num_workers"] == 4


def test_summarize_ci_contains_true_median_and_flags_unstable():
    s = summarize(_table(), by=["cell_id"], value="samples_per_s").set_index("cell_id")
    a = s.loc["a"]
    assert a["ci_method"] == "percentile"
    assert a["ci_low"] <= 100.0 <= a["ci_high"]
    assert a["ci_low"] <= a["median"] <= a["ci_high"]
    assert a["ci_high"] - a["ci_low"] < 2.0  # sd 1, n 21: a tight interval
    assert not a["unstable"]
    b = s.loc["b"]
    assert b["iqr"] == pytest.approx(20.0) and b["iqr_rel"] == pytest.approx(0.2)
    assert b["unstable"]


def test_summarize_small_n_has_no_interval():
    s = summarize(_table(), by=["cell_id"], value="samples_per_s").set_index("cell_id")
    for cell in ["c", "d"]:
        assert s.loc[cell, "ci_method"] == "n<3"
        assert np.isnan(s.loc[cell, "ci_low"]) and np.isnan(s.loc[cell, "ci_high"])


def test_summarize_is_deterministic():
    t = _table()
    pd.testing.assert_frame_equal(
        summarize(t, by=["cell_id"], value="samples_per_s"),
        summarize(t, by=["cell_id"], value="samples_per_s"),
    )


def test_summarize_unstable_threshold_is_a_parameter():
    s = summarize(_table(), by=["cell_id"], value="samples_per_s", unstable_iqr=0.25)
    assert not s.set_index("cell_id").loc["b", "unstable"]


def test_median_ci_degenerate():
    assert median_ci([5.0, 5.0, 5.0]) == (5.0, 5.0, "degenerate")


def test_compare_not_enough_data():
    c = compare([100.0, 101.0], [150.0, 151.0, 152.0])
    assert c.verdict == "not enough data" and not c.significant
    assert np.isnan(c.p_value) and np.isnan(c.ci_low)
    # NaN repetitions do not count
    assert compare([1.0, 2.0, np.nan], [1.0, 2.0, 3.0]).verdict == "not enough data"


def test_compare_same_distribution_is_no_difference():
    rng = np.random.default_rng(11)
    a = 100 * (1 + 0.02 * rng.standard_normal(10))
    b = 100 * (1 + 0.02 * rng.standard_normal(10))
    c = compare(a, b)
    assert isinstance(c, Comparison)
    assert c.verdict == "no difference" and not c.significant
    assert c.ci_low <= 1.0 <= c.ci_high


def test_compare_detects_a_20_percent_shift():
    rng = np.random.default_rng(12)
    a = 100 * (1 + 0.02 * rng.standard_normal(10))
    b = 120 * (1 + 0.02 * rng.standard_normal(10))
    c = compare(a, b)
    assert c.significant and c.verdict == "faster"
    assert c.ratio == pytest.approx(1.2, abs=0.03)
    assert c.ci_low > 1.0 and c.p_value < 0.05
    # for a lower-is-better metric (latency) the same shift is a slowdown
    assert compare(a, b, higher_is_better=False).verdict == "slower"
    # and swapping the sides flips the verdict
    assert compare(b, a).verdict == "slower"


def test_compare_small_effect_is_not_significant():
    rng = np.random.default_rng(13)
    a = 100 * (1 + 0.001 * rng.standard_normal(10))
    b = 102 * (1 + 0.001 * rng.standard_normal(10))  # clear, but 2 % < min_effect 5 %
    c = compare(a, b)
    assert c.p_value < 0.05 and c.ci_low > 1.0
    assert not c.significant and c.verdict == "no difference"
    assert compare(a, b, min_effect=0.01).verdict == "faster"


def test_comparison_is_frozen():
    c = compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.verdict = "faster"  # type: ignore[misc]


# --- the exact bootstrap distribution of the median (what scipy's resampling converges to) ---

from analysis.stats import EXACT_MAX_N, _median_atoms  # noqa: E402


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 10])
def test_exact_median_distribution_matches_resampling(n):
    a, b, p = _median_atoms(n)
    assert p.sum() == pytest.approx(1.0, abs=1e-12) and (p >= 0).all()
    rng = np.random.default_rng(n)
    x = np.sort(rng.normal(100, 5, n))
    draws = np.median(x[rng.integers(0, n, (100_000, n))], axis=1)
    for ai, bi, pi in zip(a, b, p):
        freq = np.mean(np.isclose(draws, (x[ai] + x[bi]) / 2))
        assert freq == pytest.approx(pi, abs=0.006)


def test_exact_interval_agrees_with_scipy_bootstrap():
    from scipy import stats as st

    rng = np.random.default_rng(5)
    for n in (5, 8, 12):
        x = rng.normal(100, 5, n)
        lo, hi, method = median_ci(x)
        res = st.bootstrap((x,), np.median, n_resamples=40_000, method="percentile",
                           rng=np.random.default_rng(1)).confidence_interval
        xs = np.sort(x)
        step = np.diff(xs).max()  # the intervals are order statistics: they may differ by one atom at most
        assert method == "percentile"
        assert abs(lo - res.low) <= step and abs(hi - res.high) <= step


def test_summarize_equals_median_ci_per_group():
    rng = np.random.default_rng(9)
    rows = [dict(cell_id=f"c{i}", repetition=r, status="ok", samples_per_s=v)
            for i, n in enumerate([3, 4, 5, 7, 10, EXACT_MAX_N + 1])
            for r, v in enumerate(rng.normal(100, 10, n))]
    s = summarize(pd.DataFrame(rows), by=["cell_id"], value="samples_per_s").set_index("cell_id")
    df = pd.DataFrame(rows)
    for cell, g in df.groupby("cell_id"):
        lo, hi, _ = median_ci(g["samples_per_s"])
        assert s.loc[cell, "ci_low"] == pytest.approx(lo) and s.loc[cell, "ci_high"] == pytest.approx(hi)
        assert s.loc[cell, "median"] == pytest.approx(g["samples_per_s"].median())
        q1, q3 = g["samples_per_s"].quantile([0.25, 0.75])
        assert s.loc[cell, "iqr"] == pytest.approx(q3 - q1)

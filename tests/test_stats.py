"""Tests of loaderbench.analysis.table.summary on synthetic tables (seeded, fast)."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from loaderbench.analysis.table.summary import summarize
from loaderbench.stats.bootstrap import EstimateInterval, paired_bootstrap_ci, rate_ratio_ci, sum_ratio_ci
from loaderbench.stats.comparison import VERDICTS, Comparison, compare
from loaderbench.stats.intervals import (
    coverage_text,
    median_ci,
    n_for_median,
    n_for_shift,
    order_coverage,
    order_k,
    shift_ci,
    shift_coverage,
    widest_shift_coverage,
)


def _table():
    rng = np.random.default_rng(7)
    rows = []
    # cell "a": clean, median 100, sd 1 -> stable, CI must contain 100
    for r, v in enumerate(100 + rng.standard_normal(21)):
        rows.append(
            dict(study="s", cell_id="a", workload="img", num_workers=4, repetition=r, status="ok", samples_per_s=v)
        )
    # cell "b": wide spread, IQR = 20 = 20 % of the median 100 -> unstable
    for r, v in enumerate([80.0, 90.0, 100.0, 110.0, 120.0]):
        rows.append(
            dict(study="s", cell_id="b", workload="img", num_workers=8, repetition=r, status="ok", samples_per_s=v)
        )
    # cell "c": two ok values plus a failed and a timed-out repetition
    rows += [
        dict(study="s", cell_id="c", workload="txt", num_workers=0, repetition=0, status="ok", samples_per_s=50.0),
        dict(study="s", cell_id="c", workload="txt", num_workers=0, repetition=1, status="ok", samples_per_s=52.0),
        dict(
            study="s", cell_id="c", workload="txt", num_workers=0, repetition=2, status="failed", samples_per_s=np.nan
        ),
        dict(
            study="s", cell_id="c", workload="txt", num_workers=0, repetition=3, status="timeout", samples_per_s=1e9
        ),  # not ok: must be ignored
    ]
    # cell "d": every repetition failed
    rows.append(
        dict(study="s", cell_id="d", workload="txt", num_workers=2, repetition=0, status="failed", samples_per_s=np.nan)
    )
    return pd.DataFrame(rows)


def test_summarize_columns_and_counts():
    s = summarize(_table(), by=["cell_id", "workload", "num_workers"], value="samples_per_s")
    assert list(s["cell_id"]) == ["a", "b", "c", "d"]
    for col in ["n", "median", "ci_low", "ci_high", "ci_method", "ci_coverage", "mean", "iqr", "iqr_rel", "unstable"]:
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
    assert a["ci_method"] == "order statistic"
    assert a["ci_coverage"] >= 0.95  # 21 repetitions reach the nominal 95%
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
        assert np.isnan(s.loc[cell, "ci_coverage"])


def test_summarize_unstable_threshold_is_a_parameter():
    s = summarize(_table(), by=["cell_id"], value="samples_per_s", unstable_iqr=0.25)
    assert not s.set_index("cell_id").loc["b", "unstable"]


def test_median_ci_degenerate():
    assert median_ci([5.0, 5.0, 5.0])[:3] == (5.0, 5.0, "degenerate")
    assert median_ci([5.0, 5.0, 5.0]).coverage == 0.75


def test_compare_not_enough_data():
    c = compare([100.0, 101.0], [150.0, 151.0, 152.0])
    assert c.verdict == "not measured yet" and not c.significant and "has 2 v 3" in c.reason
    assert np.isnan(c.p_value) and np.isnan(c.ci_low)
    # NaN repetitions do not count
    assert compare([1.0, 2.0, np.nan], [1.0, 2.0, 3.0]).verdict == "not measured yet"


def test_compare_same_distribution_is_equivalent():
    rng = np.random.default_rng(11)
    a = 100 * (1 + 0.02 * rng.standard_normal(10))
    b = 100 * (1 + 0.02 * rng.standard_normal(10))
    c = compare(a, b)
    assert isinstance(c, Comparison)
    assert c.verdict == "equivalent" and not c.significant  # the interval lies within +-5%
    assert c.ci_low <= 1.0 <= c.ci_high and c.ci_coverage >= 0.90


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
    assert not c.significant and c.verdict == "equivalent"
    assert compare(a, b, min_effect=0.01).verdict == "faster"


def test_comparison_is_frozen():
    c = compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.verdict = "faster"  # type: ignore[misc]  # the test: assigning must fail
    assert c.verdict in VERDICTS


# --- intervals that state their real coverage


@pytest.mark.parametrize("n,coverage", [(3, 0.75), (4, 0.875), (5, 0.9375), (6, 0.96875), (10, 1 - 2 * 11 / 1024)])
def test_median_interval_coverage_is_exact(n, coverage):
    # [x(k), x(n-k+1)] covers the median with 1 - 2 P(Binom(n, 1/2) <= k - 1); the narrowest reaching 95%,
    # else [min, max]: k = 1 up to n = 9, k = 2 at n = 10 (97.85%)
    assert order_k(n) == (2 if n == 10 else 1)
    assert order_coverage(n, order_k(n)) == pytest.approx(coverage, abs=1e-12)
    x = np.arange(1.0, n + 1)
    iv = median_ci(x)
    assert iv.coverage == pytest.approx(coverage, abs=1e-12) and iv.n == n and iv.method == "order statistic"
    assert (iv.low, iv.high) == (x[order_k(n) - 1], x[n - order_k(n)])


def test_median_interval_coverage_holds_by_simulation():
    rng = np.random.default_rng(3)
    for n in (3, 5):
        draws = rng.lognormal(0.0, 0.5, (20_000, n))  # population median 1
        lo, hi = draws.min(axis=1), draws.max(axis=1)
        assert np.mean((lo <= 1.0) & (1.0 <= hi)) == pytest.approx(order_coverage(n), abs=0.01)


def test_shift_interval_coverage_is_exact():
    # the widest interval: every value of one side below every value of the other, 1 - 2 / C(m + n, m)
    assert widest_shift_coverage(3, 3) == pytest.approx(0.9)
    assert widest_shift_coverage(2, 2) == pytest.approx(2 / 3)
    assert widest_shift_coverage(4, 4) == pytest.approx(1 - 2 / 70)
    assert widest_shift_coverage(5, 5) == pytest.approx(1 - 2 / 252)
    # 5 v 5 at 95%: U <= 2 has probability 4/252, U <= 3 has 7/252: k = 3
    assert shift_coverage(5, 5, 3) == pytest.approx(1 - 8 / 252)
    iv = shift_ci(np.arange(1.0, 6), np.arange(1.0, 6) * 2, 0.95)
    assert iv.k == 3 and iv.coverage == pytest.approx(1 - 8 / 252)
    assert n_for_shift(0.95) == 4 and n_for_median(0.95) == 6


def test_shift_interval_coverage_holds_by_simulation():
    rng = np.random.default_rng(4)
    hits = 0
    for _ in range(3000):
        a, b = rng.lognormal(0.0, 0.2, 3), 1.5 * rng.lognormal(0.0, 0.2, 3)
        iv = shift_ci(a, b, 0.95)
        hits += iv.low <= 1.5 <= iv.high
    assert hits / 3000 == pytest.approx(0.9, abs=0.02)  # asked for 95%, 3 v 3 gives exactly 90%


def test_summarize_reports_real_coverage():
    rows = [
        dict(cell_id=f"c{n}", repetition=r, status="ok", samples_per_s=100.0 + r)
        for n in (3, 4, 5, 6, 10)
        for r in range(n)
    ]
    s = summarize(pd.DataFrame(rows), by=["cell_id"], value="samples_per_s").set_index("cell_id")
    for n in (3, 4, 5, 6, 10):
        assert s.loc[f"c{n}", "ci_coverage"] == pytest.approx(order_coverage(n, order_k(n)))
        assert s.loc[f"c{n}", "confidence"] == 0.95
    assert s.loc["c3", "ci_low"] == 100.0 and s.loc["c3", "ci_high"] == 102.0


def test_compare_at_three_repetitions_decides_at_90_and_says_why_it_cannot_at_95():
    c = compare([100.0, 101.0, 102.0], [150.0, 151.0, 152.0], confidence=0.95)
    assert c.verdict == "inconclusive" and c.ci_coverage == pytest.approx(0.9)
    assert "reach at most 90%" in c.reason and "4 per side" in c.reason
    # the suite's decisions are at 90% two-sided (5% per direction): the same data are decided
    assert compare([100.0, 101.0, 102.0], [150.0, 151.0, 152.0]).verdict == "faster"


def test_coverage_text_never_says_95_below_it():
    assert coverage_text([3, 3]) == "interval [min, max] of 3 repetitions, 75% coverage"
    assert coverage_text([5]) == "interval [min, max] of 5 repetitions, 93.8% coverage"
    assert coverage_text([3, 6]) == "intervals of 3 to 6 repetitions, 75% to 96.9% coverage"
    assert "95%" not in coverage_text([3, 4, 5])


def test_summarize_equals_median_ci_per_group():
    rng = np.random.default_rng(9)
    rows = [
        dict(cell_id=f"c{i}", repetition=r, status="ok", samples_per_s=v)
        for i, n in enumerate([3, 4, 5, 7, 10, 41])
        for r, v in enumerate(rng.normal(100, 10, n))
    ]
    s = summarize(pd.DataFrame(rows), by=["cell_id"], value="samples_per_s").set_index("cell_id")
    df = pd.DataFrame(rows)
    for cell, g in df.groupby("cell_id"):
        iv = median_ci(g["samples_per_s"])
        assert s.loc[cell, "ci_low"] == pytest.approx(iv.low) and s.loc[cell, "ci_high"] == pytest.approx(iv.high)
        assert s.loc[cell, "ci_coverage"] == pytest.approx(iv.coverage)
        assert s.loc[cell, "median"] == pytest.approx(g["samples_per_s"].median())
        q1, q3 = g["samples_per_s"].quantile([0.25, 0.75])
        assert s.loc[cell, "iqr"] == pytest.approx(q3 - q1)


# --- paired bootstraps of ratios of sums (the suite's own benchmarks: rounds, runs) -------------------------


def test_paired_bootstrap_has_one_result_shape():
    iv = paired_bootstrap_ci(lambda a: a.mean(1), [1.0, 2.0, 3.0, 4.0])
    assert isinstance(iv, EstimateInterval)
    assert iv._fields == ("estimate", "low", "high", "method", "confidence", "n")
    assert iv.estimate == pytest.approx(2.5) and iv.low <= 2.5 <= iv.high
    assert (iv.method, iv.confidence, iv.n) == ("paired percentile bootstrap", 0.95, 4)


def test_paired_bootstrap_is_seeded():
    x = np.random.default_rng(0).normal(10, 1, 20)
    a = paired_bootstrap_ci(lambda v: np.median(v, axis=1), x, seed=7)
    assert a == paired_bootstrap_ci(lambda v: np.median(v, axis=1), x, seed=7)
    assert a != paired_bootstrap_ci(lambda v: np.median(v, axis=1), x, seed=8)


def test_paired_bootstrap_edges_say_why_there_is_no_interval():
    assert paired_bootstrap_ci(lambda a: a.sum(1), []).method == "no pairs"
    one = paired_bootstrap_ci(lambda a: a.sum(1), [3.0])
    assert (one.estimate, one.low, one.high, one.method) == (3.0, 3.0, 3.0, "one pair")
    assert math.isnan(rate_ratio_ci([1, 1], [0, 0], [1, 1], [1, 1]).estimate)  # no seconds: no throughput
    with pytest.raises(ValueError):
        rate_ratio_ci([1, 2], [1, 2], [1], [1])


def test_rate_ratio_is_total_over_total_and_pairs_cancel_shared_load():
    r = rate_ratio_ci([10, 30], [1.0, 1.0], [10, 30], [2.0, 1.0])
    assert r.estimate == pytest.approx((40 / 2) / (40 / 3))  # never the mean of per-round rates
    rng = np.random.default_rng(2)
    load = np.exp(rng.normal(0, 0.3, 40))  # each round's load moves both arms by +-30%
    units = np.full(40, 100.0)
    r = rate_ratio_ci(units, load / 0.98 * np.exp(rng.normal(0, 0.003, 40)), units, load, seed=1)
    assert r.low <= 0.98 <= r.high and r.high - r.low < 0.01


def test_rate_ratio_coverage_is_near_nominal():
    hits = 0
    for s in range(200):
        rng = np.random.default_rng(1000 + s)
        load = np.exp(rng.normal(0, 0.2, 30))
        units = np.full(30, 100.0)
        r = rate_ratio_ci(
            units,
            load / 0.97 * np.exp(rng.normal(0, 0.02, 30)),
            units,
            load * np.exp(rng.normal(0, 0.02, 30)),
            n_boot=1000,
            seed=s,
        )
        hits += r.low <= 0.97 <= r.high
    assert 0.87 <= hits / 200 <= 0.99


def test_sum_ratio_pays_the_offset_once():
    r = sum_ratio_ci([4.0, 4.0, 4.0], [1.0, 1.0, 1.0], den_offset=1.0)
    assert r.estimate == pytest.approx(12.0 / 4.0) and r.low == r.high == pytest.approx(3.0)
    r = sum_ratio_ci([3.0, 5.0, 4.0, 6.0], [1.0, 2.0, 1.0, 2.0], seed=0)
    assert r.estimate == pytest.approx(18.0 / 6.0) and r.low < r.estimate < r.high

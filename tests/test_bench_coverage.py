"""The adaptive-coverage check of `make bench` (loaderbench/bench/coverage.py): streams with known answers, the
coverage arithmetic, and driving the rule at window edges as the loop does per batch."""

import math

import numpy as np
import pytest

from loaderbench.bench import coverage as cov
from loaderbench.stats.stopping import StoppingRule


def test_identical_windows_are_covered_and_stop_at_the_second_look():
    rule = cov.drive_rule([1.0] * cov.MAX_WINDOWS, target=0.02)
    assert cov.outcome(rule, truth=1.0) == {"covered": True, "windows": 15, "reached": True}
    assert cov.outcome(rule, truth=1.01)["covered"] is False  # a zero-width interval holds only the rate itself


def test_an_interval_holds_the_truth_when_the_rate_is_within_its_half_width():
    rule = cov.drive_rule([0.95, 1.05] * 200, target=0.02)
    e = rule.last
    assert e.rate == pytest.approx(1.0, abs=0.01) and e.half_width_rel > 0
    assert cov.outcome(rule, truth=e.rate * (1 + 0.5 * e.half_width_rel))["covered"] is True
    assert cov.outcome(rule, truth=e.rate * (1 - 0.9 * e.half_width_rel))["covered"] is True
    assert cov.outcome(rule, truth=e.rate * (1 + 1.5 * e.half_width_rel))["covered"] is False


def test_driving_at_window_edges_is_driving_per_batch():
    times = 1 + 0.05 * np.random.default_rng(4).standard_normal(cov.MAX_WINDOWS)
    edges_only = cov.drive_rule(times, target=0.02, window_batches=5)
    per_batch = StoppingRule(
        warmup=cov.WARMUP, window_batches=5, max_windows=cov.MAX_WINDOWS, target=0.02, max_seconds=math.inf
    )
    t, b, stopped = 0.0, 0, False
    for _ in range(cov.WARMUP):
        b += 1
        stopped = per_batch(b, t)
    for x in times:
        for _ in range(5):
            b += 1
            t += x / 5
            if per_batch(b, t):
                stopped = True
                break
        if stopped:
            break
    assert edges_only.edges == pytest.approx(per_batch.edges)
    assert (edges_only.looks, edges_only.reached) == (per_batch.looks, per_batch.reached)


def test_summary_counts_coverage_over_trials_with_an_interval():
    outcomes = [
        {"covered": True, "windows": 10, "reached": True},
        {"covered": False, "windows": 20, "reached": True},
        {"covered": True, "windows": 40, "reached": False},
        {"covered": None, "windows": 40, "reached": False},
    ]
    s = cov.summarize_trials(outcomes)
    assert s["trials"] == 4
    assert s["coverage"] == pytest.approx(2 / 3)
    assert s["coverage_when_reached"] == pytest.approx(1 / 2)
    assert s["windows_median"] == 30
    assert s["reached_fraction"] == 0.5 and s["no_interval_fraction"] == 0.25


@pytest.mark.parametrize("kind, lag1", [("normal", 0.0), ("t3", 0.0), ("normal", 0.5), ("normal", 0.8)])
def test_streams_have_mean_one_the_stated_sd_and_lag1(kind, lag1):
    x = cov.window_times(np.random.default_rng(0), 40, 2000, kind, lag1)
    assert x.shape == (40, 2000) and np.all(x > 0)
    assert x.mean() == pytest.approx(1.0, abs=0.005)
    assert x.std() == pytest.approx(cov.SD, rel=0.15)
    d = x - x.mean()
    assert (d[:, 1:] * d[:, :-1]).mean() / d.var() == pytest.approx(lag1, abs=0.05)


def test_rows_are_seeded():
    a = cov.coverage_row("AR(1) lag-1 0.5", 0.02, trials=20, seed=3)
    b = cov.coverage_row("AR(1) lag-1 0.5", 0.02, trials=20, seed=3)
    assert a == b and a["trials"] == 20

"""The adaptive stopping rule (loaderbench/stats/stopping.py) on synthetic window times: no clocks, no loaders."""

import math

import numpy as np
import pytest

from loaderbench.stats.stopping import MIN_WINDOWS, StoppingRule, estimate, lag1_autocorrelation

T975_9 = 2.2621571627409915  # t(0.975, 9)


def edges(seconds) -> list[float]:
    return list(np.concatenate([[0.0], np.cumsum(seconds)]))


def test_no_reading_before_the_minimum_windows():
    assert estimate(edges([1.0] * (MIN_WINDOWS - 1))) is None
    assert estimate(edges([1.0] * MIN_WINDOWS)) is not None


def test_rate_is_the_ratio_estimator_never_a_mean_of_window_rates():
    secs = [1.0, 3.0] * 5
    e = estimate(edges(secs))
    assert e.rate == pytest.approx(10 / 20)  # windows over seconds; the mean of rates would be (1 + 1/3) / 2
    assert e.rate != pytest.approx(np.mean([1 / s for s in secs]))


def test_half_width_of_independent_windows_is_the_t_interval_of_the_mean_window_time():
    secs = [1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.1, 0.9, 1.02, 0.98]
    x = np.asarray(secs)
    assert lag1_autocorrelation(x) < 0  # nothing to widen for
    e = estimate(edges(secs))
    assert e.merge == 1 and e.windows == 10
    assert e.half_width_rel == pytest.approx(T975_9 * x.std(ddof=1) / (x.mean() * math.sqrt(10)))


def test_correlated_windows_are_merged_and_the_interval_widens():
    rng = np.random.default_rng(3)
    z = np.empty(160)
    z[0] = rng.standard_normal()
    for i in range(1, 160):
        z[i] = 0.8 * z[i - 1] + 0.6 * rng.standard_normal()
    secs = 1 + 0.05 * z
    e = estimate(edges(secs))
    naive = T975_9 * secs.std(ddof=1) / (secs.mean() * math.sqrt(secs.size))
    assert e.merge > 1
    assert e.half_width_rel > 2 * naive


def feed(rule: StoppingRule, seconds) -> int:
    """Drive the rule as the loop does, one call per consumed batch; returns how many batches it let through."""
    t, b = 0.0, 0
    for _ in range(rule.warmup):
        b += 1
        t += 1.0
        if rule(b, t):
            return b
    for s in seconds:
        for _ in range(rule.window_batches):
            b += 1
            t += s / rule.window_batches
            if rule(b, t):
                return b
    return b


def test_identical_windows_stop_at_the_second_look():
    rule = StoppingRule(warmup=3, window_batches=4, max_windows=200, target=0.02, max_seconds=1e9)
    consumed = feed(rule, [0.5] * 200)
    assert rule.reached and rule.looks == 2
    assert consumed == 3 + 4 * 15  # looks at 10 and 15 windows
    assert rule.summary()["precision_reached"] is True


def test_noisy_windows_run_to_the_cap_without_claiming_precision():
    rule = StoppingRule(warmup=1, window_batches=2, max_windows=30, target=0.001, max_seconds=1e9)
    consumed = feed(rule, [1.0, 2.0] * 40)
    assert not rule.reached and consumed == 1 + 60
    assert rule.summary()["windows"] == 30


def test_the_time_cap_ends_measuring():
    rule = StoppingRule(warmup=1, window_batches=1, max_windows=1000, target=0.001, max_seconds=5.0)
    consumed = feed(rule, [1.0, 2.0] * 500)
    assert not rule.reached and 1 + 3 <= consumed <= 1 + 5


def test_looks_follow_a_geometric_schedule():
    rule = StoppingRule(warmup=1, window_batches=1, max_windows=100, target=1e-9, max_seconds=1e9)
    feed(rule, [1.0, 1.5] * 50)
    assert rule.looks == len([10, 15, 23, 35, 53, 80]) + 1  # and the last look at the cap


def test_the_rule_covers_the_true_rate_on_independent_windows():
    """Real coverage of the sequential rule on independent normal windows, 400 seeded trials: near 95%
    (a statistical property; `make bench` reports it for correlated streams too)."""
    rng = np.random.default_rng(11)
    covered = 0
    for _ in range(400):
        rule = StoppingRule(warmup=1, window_batches=1, max_windows=400, target=0.02, max_seconds=1e12)
        feed(rule, 1 + 0.05 * rng.standard_normal(400))
        e = rule.last
        covered += abs(e.rate - 1.0) <= e.half_width_rel * e.rate
    assert 0.92 <= covered / 400 <= 0.99

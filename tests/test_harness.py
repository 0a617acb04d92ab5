"""The measuring loop's arithmetic, on synthetic clock readings."""

import pytest

from suite.harness import LoopTimes, make_step, run_loop, summarize_loop


def synthetic(epochs=1, batches=6, wait=0.1, step=0.0, start_cost=1.0, gap_extra=0.5):
    t, t_iter, got, done = 0.0, [], [], []
    for e in range(epochs):
        t_iter.append(t)
        t += start_cost if e == 0 else gap_extra
        g, d = [], []
        for _ in range(batches):
            if g:
                t += wait
            g.append(t)
            t += step
            d.append(t)
        got.append(g)
        done.append(d)
    return LoopTimes(t_iter, got, done)


def test_steady_throughput_is_samples_over_window():
    m = summarize_loop(synthetic(batches=6, wait=0.1), warmup=2, batch_size=10)
    # window: from the end of batch 1 to the end of batch 5 = 4 waits of 0.1 s, 40 samples
    assert m["measured_samples"] == 40
    assert m["measured_s"] == pytest.approx(0.4)
    assert m["samples_per_s"] == pytest.approx(100.0)
    assert m["time_to_first_batch_s"] == pytest.approx(1.0)
    assert m["batch_wait_s"]["p50"] == pytest.approx(0.1)
    assert m["data_stall_fraction"] == pytest.approx(1.0)
    assert m["epoch_gap_s"] is None


def test_step_time_lowers_stall_fraction_and_epoch_gap():
    m = summarize_loop(synthetic(epochs=3, batches=4, wait=0.1, step=0.1, gap_extra=0.7), warmup=1, batch_size=1)
    assert m["data_stall_fraction"] == pytest.approx(0.5)
    assert m["epoch_gap_s"] == pytest.approx(0.7)
    assert len(m["epoch_s"]) == 3


def test_zero_warmup_includes_startup():
    m = summarize_loop(synthetic(batches=3, wait=0.1, start_cost=1.0), warmup=0, batch_size=1)
    assert m["measured_s"] == pytest.approx(1.2)


def test_run_loop_counts_batches_per_epoch():
    seen = []
    times = run_loop([[1], [2], [3], [4]], epochs=2, batches_per_epoch=3, step=seen.append)
    assert seen == [[1], [2], [3]] * 2
    assert len(times.got) == 2 and len(times.got[0]) == 3
    assert all(d >= g for g, d in zip(times.got[0], times.done[0]))


@pytest.mark.parametrize("kind", ["busy", "sleep"])
def test_step_lasts_at_least_step_ms(kind):
    import time

    step = make_step(20, kind)
    t0 = time.perf_counter()
    step(None)
    assert time.perf_counter() - t0 >= 0.02


class FakeClock:
    """Each call advances time by the next per-batch cost; deterministic throughput without sleeping."""

    def __init__(self, costs):
        self.t, self.costs, self.i = 0.0, costs, 0

    def __call__(self):
        self.t += self.costs[(self.i // 3) % len(self.costs)] / 3  # three clock reads per batch
        self.i += 1
        return self.t


def test_precision_rule_on_known_rates():
    from suite.harness import precision_reached

    ok, half = precision_reached([100.0, 101.0, 99.0, 100.0], 0.02)
    assert ok and half < 0.02
    bad, half2 = precision_reached([50.0, 150.0, 100.0], 0.02)
    assert not bad and half2 > 0.5
    assert precision_reached([100.0], 0.02)[0] is False


def test_adaptive_stops_once_precise():
    from suite.harness import run_loop_adaptive

    loader = list(range(1000))
    times, p = run_loop_adaptive(loader, warmup=2, window_batches=5, min_windows=3, max_windows=50, target=0.02,
                                 max_seconds=1e9, step=lambda b: None, clock=FakeClock([0.01]))
    assert p["precision_reached"] and p["windows"] == 3
    assert len(times.got[0]) == 2 + 3 * 5


def test_adaptive_caps_when_noisy():
    from suite.harness import run_loop_adaptive

    loader = list(range(1000))
    # window rates alternate between fast and slow: never within 2%
    costs = [0.001] * 5 + [0.02] * 5
    times, p = run_loop_adaptive(loader, warmup=0, window_batches=5, min_windows=3, max_windows=8, target=0.02,
                                 max_seconds=1e9, step=lambda b: None, clock=FakeClock(costs))
    assert not p["precision_reached"] and p["windows"] == 8
    assert len(times.got[0]) == 8 * 5

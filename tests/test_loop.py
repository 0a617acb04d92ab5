"""The measuring loop's arithmetic, on synthetic clock readings."""

import pytest

from loaderbench.measure.loop import LoopTimes, make_step, run_loop, summarize_loop
from loaderbench.study.window import WindowPlan


def plan(warmup, measure, tail=0, mode="steady"):
    return WindowPlan(mode, warmup, measure, tail, measure)


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
    m = summarize_loop(synthetic(batches=6, wait=0.1), plan(2, 4), batch_size=10)
    # window: from the end of batch 1 to the end of batch 5 = 4 waits of 0.1 s, 40 samples
    assert m["measured_samples"] == 40
    assert m["measured_s"] == pytest.approx(0.4)
    assert m["samples_per_s"] == pytest.approx(100.0)
    assert m["time_to_first_batch_s"] == pytest.approx(1.0)
    assert m["batch_wait_s"]["p50"] == pytest.approx(0.1)
    assert m["data_stall_fraction"] == pytest.approx(1.0)
    assert m["epoch_gap_s"] is None


def test_step_time_lowers_stall_fraction_and_epoch_gap():
    m = summarize_loop(synthetic(epochs=3, batches=4, wait=0.1, step=0.1, gap_extra=0.7), plan(1, 3), batch_size=1)
    assert m["data_stall_fraction"] == pytest.approx(0.5)
    assert m["epoch_gap_s"] == pytest.approx(0.7)
    assert len(m["epoch_s"]) == 3


def test_an_epoch_window_includes_startup():
    m = summarize_loop(synthetic(batches=3, wait=0.1, start_cost=1.0), plan(0, 3, mode="epoch"), batch_size=1)
    assert m["measured_s"] == pytest.approx(1.2)


def test_the_tail_is_consumed_but_not_measured():
    # 2 warm-up, 4 measured, 3 tail batches; the tail's waits are slow and must not count
    t = synthetic(batches=9, wait=0.1)
    for b in range(6, 9):
        t.got[0][b] += 10.0 * (b - 5)
        t.done[0][b] += 10.0 * (b - 5)
    m = summarize_loop(t, plan(2, 4, tail=3), batch_size=10)
    assert m["measured_samples"] == 40 and m["measured_s"] == pytest.approx(0.4)
    assert m["batch_wait_s"]["max"] == pytest.approx(0.1)
    assert m["window"]["tail_batches"] == 3 and m["window"]["epoch_batches"] == 9


def test_stop_hook_ends_an_epoch_early():
    times = run_loop(
        range(100), epochs=1, batches_per_epoch=50, step=lambda b: None, stop=lambda consumed, t: consumed == 7
    )
    assert len(times.got[0]) == len(times.done[0]) == 7


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


def test_an_epoch_that_ends_early_names_both_counts():
    from loaderbench.measure.failures import classify_exception
    from loaderbench.measure.loop import EpochEndedEarly

    with pytest.raises(EpochEndedEarly) as info:
        run_loop([[1], [2], [3]], epochs=1, batches_per_epoch=5, step=lambda b: None)
    assert (info.value.got, info.value.needed) == (3, 5)
    c = classify_exception(info.value)
    assert c["kind"] == "dataset_error" and "after 3 batches" in c["message"] and "needs 5" in c["message"]

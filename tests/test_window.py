"""The measuring window on simulated pipelines (tests/pipeline_sim.py): a window that opens on a full pipeline
and closes on a drained one is credited with work done before it; the pipeline-neutral window is not."""

import pytest

from loaderbench.measure.loop import summarize_loop
from loaderbench.schema.cell import CellConfig
from loaderbench.study.study_file import parse_study
from loaderbench.study.window import WindowPlan, plan_window
from tests.pipeline_sim import simulate

BATCH_S = 0.01  # CPU-seconds per batch
BS = 1


def rate(times, plan: WindowPlan) -> float:
    return summarize_loop(times, plan, BS)["samples_per_s"]


def neutral(num_workers, prefetch, measure=12, warmup=0):
    return plan_window(
        CellConfig(
            num_workers=num_workers, prefetch_factor=prefetch, warmup_batches=warmup, measure_batches=measure, seed=0
        )
    )


SEEDS = range(30)
JITTER = 0.3  # per-batch cost spread: workers drift out of step, as real ones do


def mean_rate(workers: int, cores: int, plan: WindowPlan, **kw) -> float:
    """Mean over seeded runs of the window's reading (each run deterministic)."""
    rates = [
        rate(simulate(workers, cores, 2, plan.epoch_batches, BATCH_S, jitter=JITTER, seed=s, **kw), plan) for s in SEEDS
    ]
    return sum(rates) / len(rates)


@pytest.mark.parametrize("workers", [1, 4, 8])
def test_a_window_ending_on_a_drained_pipeline_overcounts_and_the_neutral_one_does_not(workers):
    """One core, CPU-bound: the ceiling is one core's worth (1 / BATCH_S). The naive window (warm-up of one
    pipeline, 12 batches, then the epoch ends on a drained pipeline) reads above it, more so with more workers
    (the +30% measured on a real core at 8 workers); the neutral window does not."""
    pipe = workers * 2
    ceiling = 1 / BATCH_S
    naive = WindowPlan("steady", pipe, 12, 0, 12)
    p = neutral(workers, 2)
    assert p.tail == pipe and p.warmup >= pipe and p.measure >= 2 * pipe
    assert mean_rate(workers, 1, p) == pytest.approx(ceiling, rel=0.06)
    if workers >= 4:
        assert mean_rate(workers, 1, naive) > 1.08 * mean_rate(workers, 1, p)
    if workers == 8:
        assert mean_rate(workers, 1, naive) > 1.2 * ceiling


def test_lockstep_workers_make_nothing_ahead():
    """Without jitter every worker finishes in step, so no window is biased: the simulator's control case."""
    naive = WindowPlan("steady", 16, 12, 0, 12)
    assert rate(simulate(8, 1, 2, naive.epoch_batches, BATCH_S), naive) == pytest.approx(1 / BATCH_S)


@pytest.mark.parametrize("workers,cores", [(2, 2), (4, 2), (4, 4), (3, 8)])
def test_the_neutral_window_reads_the_parallel_ceiling(workers, cores):
    assert mean_rate(workers, cores, neutral(workers, 2)) == pytest.approx(min(workers, cores) / BATCH_S, rel=0.06)


def test_a_consumer_slower_than_the_loader_keeps_the_pipeline_full_and_reads_the_consumer():
    """The step takes longer than the workers need: the pipeline stays full, refilled one batch per step, and
    throughput is the step's rate."""
    p = neutral(4, 2)
    got = rate(simulate(4, 4, 2, p.epoch_batches, BATCH_S, step_s=0.02, jitter=JITTER), p)
    assert got == pytest.approx(1 / 0.02, rel=0.01)


def test_the_neutral_window_agrees_with_a_ten_times_longer_one():
    p = neutral(8, 2)
    long = WindowPlan("steady", p.warmup, 10 * p.measure, p.tail, 10 * p.measure)
    assert mean_rate(8, 1, p) == pytest.approx(mean_rate(8, 1, long), rel=0.05)


def test_every_cell_of_a_study_gets_the_same_epoch():
    """Sized from the largest pipeline, so end-to-end throughput spreads start-up over the same work."""
    raw = {
        "study": {"name": "w", "warmup_batches": 4, "measure_batches": 12},
        "matrix": {"workload": "cpu", "num_workers": [0, 1, 4, 8], "prefetch_factor": [2, 4], "cores": 1},
    }
    plans = {plan_window(c.typed) for c in parse_study(raw, where="t").cells}
    assert len(plans) == 1
    (p,) = plans
    assert (p.warmup, p.measure, p.tail) == (32, 64, 32)


def test_an_epoch_window_needs_no_warmup_and_measures_the_whole_epoch():
    raw = {
        "study": {"name": "w", "warmup_batches": 0, "measure_batches": 16, "window": "epoch"},
        "matrix": {"workload": "sleep", "num_workers": [0, 2]},
    }
    for c in parse_study(raw, where="t").cells:
        p = plan_window(c.typed)
        assert (p.warmup, p.measure, p.tail, p.epoch_batches) == (0, 16, 0, 16)


def test_ranks_are_measured_over_the_interval_all_of_them_were_measuring():
    """Two ranks at 100 batches/s each, the second starting 1 s later: summing their own-window rates says
    200/s whatever the overlap; the common interval counts only batches done while both were measuring."""
    from loaderbench.measure.rank import common_window

    plan = WindowPlan("steady", 1, 200, 0, 200)

    def rank(start: float) -> dict:
        done = [start + 0.01 * (b + 1) for b in range(201)]
        return {"t_iter": [start], "got": [done], "done": [done]}

    seconds, samples, epochs = common_window([rank(0.0), rank(1.0)], plan, batch_size=1)
    assert epochs == 1
    assert seconds == pytest.approx(1.0)  # rank 1 opens at 1.01 s, rank 0 closes at 2.01 s
    assert samples / seconds == pytest.approx(200.0, rel=0.02)
    seconds, samples, epochs = common_window([rank(0.0), rank(5.0)], plan, batch_size=1)
    assert (seconds, samples, epochs) == (0.0, 0, 0)  # never measuring at the same time

"""The watch's fast path: most batches cost two clock reads and a log entry; the watch works only on the batches
it planned for (the phases' ends at their counts, the batches kept to replay, the CPU samples); the loop thread's
CPU clock is read on a random sample of the measured batches, and the CPU share estimated from it holds what the
loop spun."""

from __future__ import annotations

import importlib
import math
import time

import numpy as np
import pytest
from torch.utils.data import DataLoader

from loaderbench.doctor import cpu_sample
from loaderbench.doctor.api import watch
from loaderbench.doctor.watch import CACHED_BATCHES, LoaderWatch

watch_module = importlib.import_module("loaderbench.doctor.watch")  # the module, not the package's watch()


def _watch_of(w) -> LoaderWatch:
    (lw,) = w.session.watches.values()
    return lw


def _spin(cpu_s: float) -> None:
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        pass


@pytest.fixture
def planned(monkeypatch):
    """The batches the watch worked on (its slow path), by their index in the log, until it was done."""
    seen: list[int] = []
    original = LoaderWatch.next_planned

    def counted(self, it):
        if self.state != "done":
            seen.append(len(self.log))
        return original(self, it)

    monkeypatch.setattr(LoaderWatch, "next_planned", counted)
    return seen


def test_the_phases_change_at_exactly_their_counts_and_other_batches_take_the_fast_path(monkeypatch, planned):
    monkeypatch.setattr(cpu_sample, "EVERY_S", math.inf)  # no CPU sample after the first measured batch
    warmup, steps, head, rounds, per = 4, 40, 6, 2, 5
    loader = DataLoader(list(range(1000)), batch_size=2)
    w = watch(
        loader,
        steps=steps,
        warmup=warmup,
        headspace=head,
        echo=False,
        validate={"num_workers": 0},
        rounds=rounds,
        round_steps=per,
    )
    got = 0
    for _ in w:
        got += 1
        if got == 100:
            break
    lw = _watch_of(w)
    measure_end = warmup + steps - 1
    ab_first = measure_end + head + 1
    expected_segments = [(0, "warmup"), (warmup, "measure"), (measure_end + 1, "headspace")] + [
        (ab_first + r * per, f"ab-{'AB'[r % 2]}") for r in range(2 * rounds)
    ]
    assert lw.log.segments == expected_segments
    assert len(lw.log) == ab_first + 2 * rounds * per and lw.state == "done"
    # the watch worked on: the iterator's first batch, the last warm-up batch, the first measured one (always
    # sampled) and the next (its step's CPU time ends there), the measured batches kept for the replay, the
    # last headspace batch and the last batch of each round; every other batch took the fast path
    kept = range(measure_end - CACHED_BATCHES + 1, measure_end + 1)
    rounds_end = [ab_first + (r + 1) * per - 1 for r in range(2 * rounds)]
    assert planned == [0, warmup - 1, warmup, warmup + 1, *kept, ab_first - 1, *rounds_end]
    (lo,) = w.report()["processes"][0]["loaders"]
    assert lo["steps"]["measured_steps"] == steps and lo["headspace"]["steps"] == head
    assert lo["in_loop"]["rounds"] == rounds


def test_the_cpu_clock_is_read_only_on_a_sample_of_the_measured_batches(monkeypatch):
    """A counting stand-in for the CPU clock: four reads per sampled batch (before and after its next(), where its
    step starts and where it ends), none on any other batch; with every batch sampled, four per batch."""

    def run(steps: int) -> tuple[LoaderWatch, int]:
        reads = [0]

        def counting() -> float:
            reads[0] += 1
            return time.thread_time()

        monkeypatch.setattr(watch_module, "cpu_clock", counting)
        w = watch(DataLoader(list(range(50_000)), batch_size=8), steps=steps, warmup=5, headspace=0, echo=False)
        for _ in w:
            pass
        return _watch_of(w), reads[0]

    steps = 3000
    lw, reads = run(steps)
    cols = lw.log.columns()
    measured = set(lw.log.indices("measure"))
    sampled = set(lw.log.cpu_batch)
    assert len(measured) == steps and sampled <= measured and min(sampled) == min(measured)
    assert reads == 4 * len(sampled)
    # a loop that only takes in-memory batches (well under EVERY_S each): a few percent of its batches at most
    assert 1 <= len(sampled) <= steps // 10
    assert set(np.flatnonzero(~np.isnan(cols.step_cpu_s))) == sampled
    assert all(w >= 1.0 for w in lw.log.cpu_weight)

    monkeypatch.setattr(cpu_sample, "EVERY_S", 0.0)  # every batch is sampled
    lw, reads = run(200)
    assert set(lw.log.cpu_batch) == set(lw.log.indices("measure")) and reads == 4 * 200


def test_the_sampled_cpu_share_holds_what_the_steps_spun(monkeypatch):
    """Steps of 2 ms that spin on the CPU in a pattern of period 4 (1.2, 0, 0.4 and 0 ms) and sleep the rest, about
    one in ten of them sampled: each sampled step's CPU time holds its spin, and the estimated share matches the
    share over all measured steps (what the loop itself read) within four standard errors of a sample that size.
    A sample of every fourth step would read 60%, 20% or 0%."""
    monkeypatch.setattr(cpu_sample, "EVERY_S", 0.020)
    spins, period_s, steps, warmup = (0.0012, 0.0, 0.0004, 0.0), 0.002, 600, 4
    loader = DataLoader(list(range(steps + warmup + 10)), batch_size=1)
    w = watch(loader, steps=steps, warmup=warmup, headspace=0, echo=False)
    body: list[tuple[float, float, float]] = []  # per loop step: spun, its CPU time, its wall time
    for i, _ in enumerate(w):
        t0, c0 = time.perf_counter(), time.thread_time()
        spin = spins[i % 4]
        _spin(spin)
        rest = t0 + period_s - time.perf_counter()
        if rest > 0:
            time.sleep(rest)
        body.append((spin, time.thread_time() - c0, time.perf_counter() - t0))
    lw = _watch_of(w)
    (lo,) = w.report()["processes"][0]["loaders"]
    cols = lw.log.columns()
    measured = lw.log.indices("measure")
    sampled = [i for i in measured if cols.cpu_weight[i] > 0 and not math.isnan(cols.step_cpu_s[i])]
    n = len(sampled)
    assert lo["steps"]["cpu_sampled_steps"] == n and 20 <= n <= steps // 3
    assert len({i % 4 for i in sampled}) == 4  # not locked to the loop's pattern
    for i in sampled:  # physics: a sampled step's CPU time holds what it spun, and is no more than its wall time
        assert body[i][0] <= cols.step_cpu_s[i] <= cols.step_s[i] + 1e-4
    # the estimate is the weighted ratio over the sample
    wts = cols.cpu_weight[sampled]
    ratio = float(np.dot(wts, cols.step_cpu_s[sampled]) / np.dot(wts, cols.step_s[sampled]))
    estimate = lo["steps"]["step_cpu_share"]
    assert estimate == pytest.approx(ratio, abs=1e-4)
    # against the share over every measured step, as the loop read it around its own step
    cpu, wall = np.array([body[i][1] for i in measured]), np.array([body[i][2] for i in measured])
    truth = float(cpu.sum() / wall.sum())
    c_s, w_s = cpu[[measured.index(i) for i in sampled]], wall[[measured.index(i) for i in sampled]]
    r_s = float(c_s.sum() / w_s.sum())
    se = math.sqrt(float(np.sum((c_s - r_s * w_s) ** 2)) / (n - 1) / n) / float(w_s.mean())
    # 0.01: the watch's step also holds the loop's own few microseconds around the step's body
    assert abs(estimate - truth) <= 4 * se + 0.01, (estimate, truth, se, n)


def test_with_seconds_the_measurement_ends_at_the_first_batch_that_arrives_past_its_time():
    seconds = 0.05
    w = watch(DataLoader(list(range(2000)), batch_size=2), seconds=seconds, warmup=2, headspace=3, echo=False)
    for _ in w:
        time.sleep(0.001)
    lw = _watch_of(w)
    measured = [i for i, p in enumerate(lw.log.phase) if p == "measure"]
    last = measured[-1]
    end = lw._t_measure + seconds
    assert lw.log.arrived[last] >= end > lw.log.arrived[last - 1]
    assert [p for p in lw.log.phase[last + 1 :]] == ["headspace"] * 3
    # the replayed batches are measured ones the loop already had
    assert 0 < len(measured) and lw.log.segments[1] == (2, "measure")


def test_a_step_ends_where_its_iterator_ended_and_is_not_known_where_the_loop_left_it():
    loader = DataLoader(list(range(20)), batch_size=2)  # 10 batches an epoch
    w = watch(loader, steps=40, warmup=1, headspace=0, echo=False)
    for _ in range(2):
        for _ in w:  # two whole epochs: StopIteration ends each
            time.sleep(0.001)
    for i, _ in enumerate(w):
        if i == 4:
            break  # the loop leaves this iterator after 5 batches
        time.sleep(0.001)
    for _ in w:
        time.sleep(0.001)
    lw = _watch_of(w)
    assert lw.log.epoch_starts == [0, 10, 20, 25]
    steps = lw.log.step_s
    # every epoch's last step ends at the next() that ended its iterator; the step after which the loop left its
    # iterator is not known (the next batch came from another one)
    assert math.isnan(steps[24]) and len(steps) == 35
    assert all(s >= 0.001 for i, s in enumerate(steps) if i != 24)


def _run_logged(steps: int, warmup: int, headspace: int) -> tuple[LoaderWatch, list]:
    w = watch(
        DataLoader(list(range(steps + 100)), batch_size=1), steps=steps, warmup=warmup, headspace=headspace, echo=False
    )
    seen = [int(b) for b in w]
    return _watch_of(w), seen


def test_the_lean_path_of_the_sampled_batches_leaves_the_log_the_full_path_leaves(monkeypatch):
    """The batches planned for the CPU sample alone (sampled, or after a sampled one) take a path without the
    phase checks: the same batches sampled, the same readings, the same phases and replay; only a batch after a
    sampled one has no step start of its own (nothing is done after it arrives)."""
    monkeypatch.setattr(cpu_sample.CpuSampling, "probability", lambda self, period_s: 0.25)  # seeded gaps, no clock
    reads = [0]

    def counting() -> float:
        reads[0] += 1
        return time.thread_time()

    monkeypatch.setattr(watch_module, "cpu_clock", counting)
    lean_calls = [0]
    lean = LoaderWatch._next_sampling

    def counted(self, it):
        lean_calls[0] += 1
        return lean(self, it)

    monkeypatch.setattr(LoaderWatch, "_next_sampling", counted)
    lw_lean, seen_lean = _run_logged(300, 3, 6)
    reads_lean, reads[0] = reads[0], 0

    def full_path(self, it):  # the same batch through next_planned's own checks
        self._lean = False
        return self.next_planned(it)

    monkeypatch.setattr(LoaderWatch, "_next_sampling", full_path)
    lw_full, seen_full = _run_logged(300, 3, 6)
    a, b = lw_lean.log, lw_full.log
    assert lean_calls[0] >= len(a.cpu_batch) > 30  # most sampled batches and those after them took the lean path
    assert a.cpu_batch == b.cpu_batch and a.cpu_weight == b.cpu_weight and reads_lean == reads[0]
    assert a.segments == b.segments and a.epoch_starts == b.epoch_starts and seen_lean == seen_full
    ca, cb = a.columns(), b.columns()
    for col in ("step_s", "wait_cpu_s", "step_cpu_s"):
        assert np.array_equal(np.isnan(getattr(ca, col)), np.isnan(getattr(cb, col)))
    assert a.step_to.keys() == b.step_to.keys()
    after_sampled = {i + 1 for i in a.cpu_batch} - set(a.cpu_batch)
    assert set(a.step_from) <= set(b.step_from) and set(b.step_from) - set(a.step_from) <= after_sampled


def test_with_every_batch_sampled_and_seconds_the_lean_path_ends_the_measurement_and_keeps_the_replay(monkeypatch):
    monkeypatch.setattr(cpu_sample, "EVERY_S", 0.0)  # every measured batch is sampled: all but the first lean
    seconds = 0.05
    w = watch(DataLoader(list(range(200)), batch_size=1), seconds=seconds, warmup=2, headspace=12, echo=False)
    seen = []
    for b in w:
        seen.append(int(b))
        time.sleep(0.001)
    lw = _watch_of(w)
    measured = [i for i, p in enumerate(lw.log.phase) if p == "measure"]
    last = measured[-1]
    assert lw.log.arrived[last] >= lw._t_measure + seconds > lw.log.arrived[last - 1]
    assert lw.log.cpu_batch == measured
    # the replay cycles through the last measured batches, every one of which the watch worked on
    kept = seen[last - CACHED_BATCHES + 1 : last + 1]
    assert seen[last + 1 : last + 13] == kept + kept[:4]

"""The probe accounts for its own work: the CPU its samples took (never more than the wall time they took, one
thread), and that CPU as a share of one CPU over the time it sampled, which every record carries. Where the machine
has CPUs the cell does not use, the probe samples from those."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from loaderbench.measure.probes import TreeProbe, off_cell_cpus


def cell_records(results, sets: list[str]) -> list[dict]:
    """The records `loaderbench cell --set ...` measures into `results`."""
    args = [a for s in sets for a in ("--set", s)]
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench", "cell", *args, "--results", str(results), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout[out.stdout.index("[") : out.stdout.rindex("]") + 1])


def test_the_probe_counts_its_own_cpu_within_its_wall_time():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        probe = TreeProbe(child.pid, memory_interval_s=0.05)
        for _ in range(20):
            probe.sample()
            time.sleep(0.01)
        cost = probe.metrics()["probe"]
    finally:
        child.kill()
        child.wait()
    resolution = time.get_clock_info("thread_time").resolution + time.get_clock_info("perf_counter").resolution
    assert cost["samples"] == 20 and cost["memory_samples"] >= 2
    assert 0 < cost["cpu_s"] <= cost["cost_s"] + 20 * resolution + 1e-4  # rounding to 4 decimals
    assert 0 < cost["cpu_share"] < 1


def test_the_probe_samples_off_the_cells_cores_and_gives_them_back(tmp_path):
    """A one-core cell on a machine with more: the probe runs on the others, and the runner takes its CPUs back
    before it forks the next repetition (which would otherwise pin itself to the probe's CPUs and leave none)."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU: the probe can only share it (its record says so with off_cell_cpus = [])")
    records = cell_records(
        tmp_path, ["workload=sleep", "sleep_ms=1", "num_workers=1", "cores=1", "measure_batches=8", "repetitions=2"]
    )
    assert [r["metrics"]["probe"]["off_cell_cpus"] for r in records] == [allowed[1:], allowed[1:]]
    assert off_cell_cpus(len(allowed)) == []  # a cell on every CPU: the probe shares them


def test_the_runner_reads_pss_and_uss_once_more_when_the_last_window_ends_with_the_workers_alive(tmp_path):
    """A cell far shorter than the memory schedule: besides the walks at its start, the runner walks the tree once
    when the cell marks the end of its last window, and the cell's two workers are in that walk (its last entry),
    so that copy-on-write growth late in a short cell is read before the workers end."""
    sets = ["workload=sleep", "sleep_ms=1", "num_workers=2", "cores=2", "measure_batches=16", "epochs=2"]
    (record,) = cell_records(tmp_path, [*sets, "memory_interval_s=600", "repetitions=1"])
    metrics = record["metrics"]
    assert metrics["probe"]["memory_samples_at_window_end"] == 1
    assert metrics["memory_timeline"][-1][1] == 3  # the cell's process and its two workers


class FakeProcess:
    """One process of a fake tree: its RSS, and PSS = USS = `private` (RSS when unset)."""

    pid = 1
    rss = 100
    private: int | None = None

    def memory_info(self):
        return type("M", (), {"rss": self.rss})()

    def num_fds(self):
        return 3

    def oneshot(self):
        import contextlib

        return contextlib.nullcontext()

    def cpu_times(self):
        return type("C", (), {"user": 0.0, "system": 0.0})()

    def memory_full_info(self):
        held = self.rss if self.private is None else self.private
        return type("F", (), {"pss": held, "uss": held})()


def fake_probe(monkeypatch, interval_s: float) -> tuple[TreeProbe, FakeProcess]:
    from loaderbench.measure import probes

    fake = FakeProcess()
    monkeypatch.setattr(probes, "tree_pids", lambda pid: [1])
    probe = TreeProbe(1, memory_interval_s=interval_s, shm_reader=lambda: 0)
    monkeypatch.setattr(probe, "_process", lambda pid: fake)
    return probe, fake


def test_a_full_memory_sample_follows_a_new_high_of_rss_not_every_swing(monkeypatch):
    """RSS that swings between two levels (batches mapped in and out of shared memory) costs no full sample per
    swing, and a rise 5% above the highest RSS seen costs one at once."""
    probe, fake = fake_probe(monkeypatch, 3600.0)
    # RSS per tick, and whether the memory interval has run out at that tick
    ticks = [(100, False), (150, False), (100, True), (150, False), (100, True), (150, False), (160, False)]
    full = []
    for level, interval_over in ticks:
        fake.rss = level
        if interval_over:
            probe._last_full = float("-inf")
        before = probe.full_samples
        probe.sample()
        full.append(probe.full_samples - before)
    # the first sample, the rise to 150 (a new high), the interval's samples at the lows, never the swings back to
    # 150 after them, and 160 (above 1.05 x 150)
    assert full == [1, 1, 1, 0, 1, 0, 1]


def scheduled_full_samples(probe: TreeProbe, fake: FakeProcess, private_at) -> list[float]:
    """Tick once a second for 40 s with steady RSS; the private memory at each second from `private_at(t)`; the
    seconds at which a full sample was taken."""
    at = []
    for t in range(41):
        fake.private = private_at(t)
        before = probe.full_samples
        probe._sample(float(t))
        if probe.full_samples > before:
            at.append(t)
    return at


def test_a_steady_tree_is_walked_less_and_less_often_and_a_rising_one_on_schedule(monkeypatch):
    probe, fake = fake_probe(monkeypatch, 2.0)
    # steady: 2, 4, 8 s apart, then at most 4 x 2 s
    assert scheduled_full_samples(probe, fake, lambda t: 100) == [0, 2, 6, 14, 22, 30, 38]
    probe, fake = fake_probe(monkeypatch, 2.0)
    # pages turning private under copy-on-write (RSS steady, USS rising by 10% a second): every 2 s, as before
    assert scheduled_full_samples(probe, fake, lambda t: round(100 * 1.1**t)) == list(range(0, 41, 2))
    probe, fake = fake_probe(monkeypatch, 2.0)
    # steady, then a rise at 25 s: seen at the next scheduled walk (30 s), then every 2 s while it lasts
    got = scheduled_full_samples(probe, fake, lambda t: 100 if t < 25 else round(100 * 1.1 ** (t - 24)))
    assert got[:6] == [0, 2, 6, 14, 22, 30] and got[6:] == [32, 34, 36, 38, 40]
    assert probe.uss_peak == round(100 * 1.1**16)  # the peak at the last walk, 40 s
    probe, fake = fake_probe(monkeypatch, 2.0)
    # creeping up by 0.5% a second (1% between walks 2 s apart, under RISE): walked as the steady tree is
    got = scheduled_full_samples(probe, fake, lambda t: round(10_000 * 1.005**t))
    assert got == [0, 2, 6, 14, 22, 30, 38]
    assert probe.uss_peak == round(10_000 * 1.005**38)

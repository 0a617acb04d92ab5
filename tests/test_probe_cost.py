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
    sets = ["workload=sleep", "sleep_ms=1", "num_workers=1", "cores=1", "measure_batches=8", "repetitions=2"]
    args = [a for s in sets for a in ("--set", s)]
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench", "cell", *args, "--results", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout[out.stdout.index("[") : out.stdout.rindex("]") + 1])
    assert [r["metrics"]["probe"]["off_cell_cpus"] for r in records] == [allowed[1:], allowed[1:]]
    assert off_cell_cpus(len(allowed)) == []  # a cell on every CPU: the probe shares them


def test_a_full_memory_sample_follows_a_new_high_of_rss_not_every_swing(monkeypatch):
    """RSS that swings between two levels (batches mapped in and out of shared memory) costs one full sample per
    memory interval, and a rise 5% above the highest RSS seen costs one more at once."""
    from loaderbench.measure import probes

    # RSS per tick, and whether the memory interval has run out at that tick
    ticks = [(100, False), (150, False), (100, True), (150, False), (100, True), (150, False), (160, False)]

    class Fake:
        pid = 1

        def oneshot(self):
            import contextlib

            return contextlib.nullcontext()

        def memory_info(self):
            return type("M", (), {"rss": self.rss})()

        def num_fds(self):
            return 3

        def cpu_times(self):
            return type("C", (), {"user": 0.0, "system": 0.0})()

        def memory_full_info(self):
            return type("F", (), {"pss": self.rss, "uss": self.rss})()

    fake = Fake()
    monkeypatch.setattr(probes, "tree_pids", lambda pid: [1])
    probe = TreeProbe(1, memory_interval_s=3600.0, shm_reader=lambda: 0)
    monkeypatch.setattr(probe, "_process", lambda pid: fake)
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

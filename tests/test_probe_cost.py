"""The probe accounts for its own work: the CPU its samples took (never more than the wall time they took, one
thread), and that CPU as a share of one CPU over the time it sampled, which every record carries."""

from __future__ import annotations

import subprocess
import sys
import time

from loaderbench.measure.probes import TreeProbe


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

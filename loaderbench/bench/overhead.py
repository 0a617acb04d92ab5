"""Experiment 1, harness overhead, two ways.

a. The loop alone (`loop_cost`): `run_loop` (two clock reads, two list stores and the consumer's call per
   batch) against a bare `for batch in ...` over the same in-memory batches, ABAB, in this process, in CPU
   time: the nanoseconds the harness adds to every batch, precise whatever the machine's load.
b. In a real cell (`overhead_experiment`): one cell process built by the real
`loaderbench.measure.cell_process.measure_cell`
   (pinned cores, threads, sharing strategy, workload, DataLoader) and forked as the runner forks it, driven
   by `loaderbench.bench.abab`: rounds of four windows {bare loop, `run_loop`} x {probe off, probe on}. The probe
   is the runner's `TreeProbe`, sampling the cell's process tree from this process on the runner's cadence;
   the cell's pipe handshake at every window boundary switches it.

Contract: `overhead_ratios(windows)` returns throughput ratios keyed harness_over_bare, probe_on_over_off,
suite_over_bare, each an `loaderbench.stats.bootstrap.EstimateInterval` as a dict, from a paired bootstrap over rounds;
`loop_cost(...)["cost_ns_per_batch"]` is the median paired difference with its order-statistic interval.
"""

from __future__ import annotations

import math
import os
import random
import resource
import select
import time
from collections.abc import Callable

import numpy as np

from loaderbench.bench.abab import ORDER as ARMS
from loaderbench.bench.abab import OverheadPlan, abab_cell
from loaderbench.bench.common import describe, loadavg, make_cell, median_interval
from loaderbench.bench.fork import forked
from loaderbench.stats.bootstrap import rate_ratio_ci

__all__ = [
    "ARMS",
    "SUITE_FLOOR",
    "SUITE_REACH",
    "OverheadPlan",
    "arm_throughput",
    "loop_cost",
    "loop_cpu_per_batch",
    "overhead_cells",
    "overhead_experiment",
    "overhead_ratios",
    "rounds_for_goal",
    "rounds_for_goal_text",
    "suite_goal",
    "windows_to_arms",
]


def windows_to_arms(windows: list[dict]) -> dict[tuple[str, bool], dict[int, tuple[float, float]]]:
    """Group an ABAB run's windows by arm (loop, probe): round -> (batches, seconds)."""
    arms: dict[tuple[str, bool], dict[int, tuple[float, float]]] = {}
    for w in windows:
        arms.setdefault((w["loop"], w["probe"]), {})[w["round"]] = (w["batches"], w["seconds"])
    return arms


def overhead_ratios(windows: list[dict], seed: int = 0) -> dict[str, dict]:
    """Throughput ratios from the 2x2 ABAB run (loop: bare | harness) x (probe: off | on), each round holding one
    window of every arm. Main effects pool both levels of the other factor (every window counts twice):
      harness_over_bare   (harness, *) / (bare, *)
      probe_on_over_off   (*, on) / (*, off)
      suite_over_bare     (harness, on) / (bare, off): the suite as it runs against a bare loop, unprobed.
    Only rounds holding all four arms count."""
    arms = windows_to_arms(windows)
    if not all(k in arms for k in ARMS):
        return {}
    rounds = sorted(set.intersection(*(set(arms[k]) for k in ARMS)))

    def pooled(keys):
        return ([sum(arms[k][r][0] for k in keys) for r in rounds], [sum(arms[k][r][1] for k in keys) for r in rounds])

    def ratio(num, den, s):
        (nu, ns), (du, ds) = pooled(num), pooled(den)
        return rate_ratio_ci(nu, ns, du, ds, seed=seed + s)._asdict()

    return {
        "harness_over_bare": ratio([("harness", False), ("harness", True)], [("bare", False), ("bare", True)], 1),
        "probe_on_over_off": ratio([("bare", True), ("harness", True)], [("bare", False), ("harness", False)], 2),
        "suite_over_bare": ratio([("harness", True)], [("bare", False)], 3),
    }


def arm_throughput(windows: list[dict], arm: tuple[str, bool]) -> float:
    """Batches per second of one arm, pooled over its windows."""
    w = windows_to_arms(windows).get(arm) or {}
    secs = sum(s for _, s in w.values())
    return sum(b for b, _ in w.values()) / secs if secs > 0 else float("nan")


def loop_cpu_per_batch(windows: list[dict]) -> dict[str, float]:
    """Microseconds of the loop thread's CPU per batch, per loop (bare | harness), pooled over its windows: where a
    loop's time goes that the wall clock hides among the machine's other work."""
    out = {}
    for loop in ("bare", "harness"):
        ws = [w for w in windows if w["loop"] == loop and w.get("cpu_s") is not None]
        batches = sum(w["batches"] for w in ws)
        out[loop] = 1e6 * sum(w["cpu_s"] for w in ws) / batches if batches else float("nan")
    return out


#: the goal for every cell: the suite (harness and probe) reads at least this share of a bare, unprobed loop ...
SUITE_FLOOR = 0.98
#: ... and its interval reaches this share
SUITE_REACH = 0.99


def suite_goal(ratio: dict | None) -> str:
    """'met' when suite/bare is at least SUITE_FLOOR and its interval reaches SUITE_REACH, else 'missed'; 'n/a'
    without an interval."""
    if not ratio or ratio.get("estimate") is None or ratio.get("high") is None:
        return "n/a"
    est, high = ratio["estimate"], ratio["high"]
    if not (math.isfinite(est) and math.isfinite(high)):
        return "n/a"
    return "met" if est >= SUITE_FLOOR and high >= SUITE_REACH else "missed"


#: the half-width, as a share, an interval of suite/bare needs to tell SUITE_FLOOR from SUITE_REACH
GOAL_HALF_WIDTH = 0.01


def rounds_for_goal(ratio: dict | None, rounds: int) -> int | None:
    """Rounds after which the interval of `ratio` (measured on `rounds`) would be GOAL_HALF_WIDTH wide each side,
    its half-width (in log, the wider side) shrinking as 1 / sqrt(rounds): how long a cell must be measured on this
    machine before its goal is a measurement rather than a coin toss. None without an interval."""
    if not ratio or rounds < 1:
        return None
    est, low, high = (ratio.get(k) for k in ("estimate", "low", "high"))
    if not all(v is not None and math.isfinite(v) and v > 0 for v in (est, low, high)):
        return None
    half = max(math.log(high / est), math.log(est / low))
    return max(rounds, math.ceil(rounds * (half / math.log1p(GOAL_HALF_WIDTH)) ** 2))


def rounds_for_goal_text(row: dict) -> str:
    """The rounds a ±1% interval of suite/bare needs at a cell's spread, and about how long they take."""
    need, rounds, measured = row.get("rounds_for_goal"), row.get("rounds"), row.get("measured_s")
    if need is None or not rounds:
        return "n/a"
    return f"{need:,} (~{need * measured / rounds / 60:.0f} min)" if measured else f"{need:,}"


def overhead_cells() -> list:
    """A fast workload (where a per-batch cost shows most) at 0 and 2 workers, and the JPEG workload."""
    return [
        make_cell("sleep", 0, 1, sleep_ms=0.0, study={"measure_batches": 100_000}),
        make_cell("sleep", 2, 2, sleep_ms=0.0, study={"measure_batches": 40_000}),
        make_cell("jpeg", 0, 1, study={"measure_batches": 2_000}),
        make_cell("jpeg", 2, 2, study={"measure_batches": 3_000}),
    ]


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _ProbeSwitch:
    """The probe on the runner's cadence (sample, wait probe_interval_s, sample, ...) on one continuous
    schedule; ticks that fall in a probe-off window are skipped, so a probe-on window holds the share of
    samples it would hold in a probed run (sampling at every switch to "on" would double it in short windows)."""

    def __init__(self, probe, interval_s: float):
        self.probe, self.interval_s = probe, interval_s
        self.on, self.cpu_s, self.samples, self.on_s, self._since = False, 0.0, 0, 0.0, 0.0
        self.next_tick, self._wall_mean = time.perf_counter(), 0.0

    def tick(self) -> None:
        now = time.perf_counter()
        if now < self.next_tick:
            return
        if self.on:
            c0 = _self_cpu()
            self.probe.sample()
            self.cpu_s += _self_cpu() - c0
            self.samples += 1
            self._wall_mean = self.probe.sample_cost_s / max(1, self.probe.samples)
            self.next_tick = time.perf_counter() + self.interval_s
        else:
            self.next_tick = now + self._wall_mean + self.interval_s

    def switch(self, on: bool) -> None:
        now = time.perf_counter()
        if self.on:
            self.on_s += now - self._since
        self.on, self._since = on, now

    def metrics(self) -> dict | None:
        if not self.samples:
            return None
        cpu_s, wall_s = self.cpu_s / self.samples, self.probe.sample_cost_s / max(1, self.probe.samples)
        return {
            "samples": self.samples,
            "cpu_ms_per_sample": 1000 * cpu_s,
            "wall_ms_per_sample": 1000 * wall_s,
            # what the runner's loop (sample, then wait probe_interval_s) takes of one CPU
            "cpu_share_of_one_cpu": cpu_s / (self.interval_s + wall_s),
            "cpu_share_measured": self.cpu_s / self.on_s if self.on_s > 0 else None,
            "processes_peak": self.probe.procs_peak,
        }


def overhead_experiment(
    cell,
    prepared,
    plan: OverheadPlan,
    probe_interval_s: float,
    timeout_s: float = 300.0,
    probe_factory: Callable | None = None,
) -> dict:
    """Fork one cell process (as the runner does) and drive the probe from here while it measures ABAB windows.
    `probe_factory(pid)` builds the probe (default: the runner's TreeProbe)."""
    from loaderbench.measure.probes import TreeProbe

    config = cell.config
    ctl_r, ctl_w = os.pipe()
    ack_r, ack_w = os.pipe()
    load_before = loadavg()
    deadline = time.monotonic() + timeout_s
    try:
        with forked(lambda: abab_cell(config, prepared, plan, ctl_w, ack_r), close_in_child=(ctl_r, ack_w)) as child:
            os.close(ctl_w)
            os.close(ack_r)
            ctl_w = ack_r = -1
            switch = _ProbeSwitch((probe_factory or TreeProbe)(child.pid), probe_interval_s)
            while time.monotonic() <= deadline:
                switch.tick()
                ready, _, _ = select.select([ctl_r], [], [], max(0.0, min(switch.next_tick - time.perf_counter(), 5.0)))
                if ready:
                    msg = os.read(ctl_r, 1)
                    if not msg:
                        break  # the child closed its end: done (or dead)
                    switch.switch(msg == b"1")
                    os.write(ack_w, b"k")
            child.wait(max(0.0, deadline - time.monotonic()))
    finally:
        for fd in (ctl_r, ctl_w, ack_r, ack_w):
            if fd >= 0:
                os.close(fd)
    out = child.result if child.result is not None else {"error": child.error()}
    out.update(
        cell=describe(cell),
        config={
            k: config[k] for k in ("workload", "num_workers", "cores", "batch_size", "sleep_ms", "cpu_work", "decoder")
        },
        probe_interval_s=probe_interval_s,
        load_before=load_before,
        load_after=loadavg(),
    )
    probe = switch.metrics()
    if probe:
        out["probe"] = probe
    if "windows" in out:
        out["ratios"] = overhead_ratios(out["windows"], seed=plan.seed)
        out["bare_batches_per_s"] = arm_throughput(out["windows"], ("bare", False))
        out["loop_cpu_us_per_batch"] = loop_cpu_per_batch(out["windows"])
        out["goal"] = suite_goal(out["ratios"].get("suite_over_bare"))
        out["rounds_for_goal"] = rounds_for_goal(out["ratios"].get("suite_over_bare"), out.get("rounds", 0))
    return out


def loop_cost(config: dict, batches: int = 20_000, rounds: int = 21, seed: int = 0) -> dict:
    """The harness's own per-batch cost, alone and precisely: `run_loop` (two clock reads, two list stores, the
        consumer's call) against a bare `for batch in ...` over the same in-memory batches, ABAB, in this process,
        in CPU time. The median paired difference is the nanoseconds the harness adds to every batch of every cell
    (robust to the odd round a busy machine preempts)."""
    from loaderbench.measure.consumers import make_consumer
    from loaderbench.measure.loop import run_loop
    from loaderbench.schema.cell import CellConfig

    cell = CellConfig.of(config)
    data = [(None, 0)] * batches
    # CPU time of this thread: what the loop's own instructions cost, not the time other tenants of a busy
    # machine held the CPU while it ran (wall time here varies 5x with the load)
    clock = time.thread_time
    rng = random.Random(seed)
    bare, harness = [], []
    for _ in range(rounds):
        order = ["bare", "harness"]
        rng.shuffle(order)
        for arm in order:
            if arm == "bare":
                t0 = clock()
                for _, _batch in zip(range(batches), iter(data)):
                    pass
                bare.append((clock() - t0) / batches * 1e9)
            else:
                step = make_consumer(cell)  # the consumer a cell would get (a fresh one: its list of step times)
                t0 = clock()
                run_loop(data, 1, batches, step)
                harness.append((clock() - t0) / batches * 1e9)
    return {
        "batches": batches,
        "rounds": rounds,
        "bare_ns_per_batch": float(np.median(bare)),
        "harness_ns_per_batch": float(np.median(harness)),
        "cost_ns_per_batch": median_interval(np.asarray(harness) - np.asarray(bare)),
    }

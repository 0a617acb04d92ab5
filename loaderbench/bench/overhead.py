"""Experiment 1, harness overhead, two ways.

a. The loop alone (`loop_cost`): `run_loop` (two clock reads, two list stores and the consumer's call per
   batch) against a bare `for batch in ...` over the same in-memory batches, ABAB, in this process, in CPU
   time: the nanoseconds the harness adds to every batch, precise whatever the machine's load.
b. In a real cell (`overhead_experiment`): one cell process built by the real
   `loaderbench.measure.cell_process.measure_cell` (pinned cores, threads, sharing strategy, workload, DataLoader)
   and forked as the runner forks it, driven by `loaderbench.bench.abab`: rounds of two short windows, the bare
   loop and `run_loop`, back to back, while this process probes the cell's tree on the runner's cadence with the
   runner's `TreeProbe`, off the cell's cores where there are others, as the runner does.

Contract: `overhead_ratios(windows, spans)` returns throughput ratios keyed harness_over_bare, probe_on_over_off,
suite_over_bare, each an `loaderbench.stats.bootstrap.EstimateInterval` as a dict: the first paired over rounds,
the second from what each probe sample added to the windows it touched against their untouched neighbours;
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
from loaderbench.stats.bootstrap import BOOTSTRAP, N_BOOT, EstimateInterval

__all__ = [
    "ARMS",
    "SUITE_FLOOR",
    "SUITE_REACH",
    "OverheadPlan",
    "arm_throughput",
    "drift_text",
    "loop_cost",
    "loop_cpu_per_batch",
    "overhead_cells",
    "overhead_experiment",
    "overhead_ratios",
    "probe_cpu_text",
    "probe_excess",
    "rounds_for_goal",
    "rounds_for_goal_text",
    "speed_drift",
    "suite_goal",
]


def _rounds(windows: list[dict]) -> tuple[list[int], dict[tuple[str, int], dict]]:
    """The rounds holding a window of both loops, and each window by (loop, round)."""
    by = {(w["loop"], w["round"]): w for w in windows}
    rounds = sorted({w["round"] for w in windows if all((loop, w["round"]) in by for loop in ARMS)})
    return rounds, by


#: a window is touched by a probe sample when it starts between this many typical window lengths before the
#: sample and ...
TOUCH_BEFORE = 1.5
#: ... this many after the sample's end
TOUCH_AFTER = 1.0


def probe_excess(windows: list[dict], spans: list[tuple[float, float]], neighbours: int = 6) -> list[float] | None:
    """Seconds each probe sample added to the windows it touched. A window is touched by a sample when it starts
    between TOUCH_BEFORE typical window lengths before the sample and TOUCH_AFTER after its end (a batch the
    probe delayed may arrive a little later): chosen by where a window starts, never by how long it took (a slow
    window would otherwise be more often "touched" and a fast one more often "clean", and the two biases would add
    up to a cost the probe never had). Each touched window is compared with what its batches take in the untouched
    windows of the same loop nearest to it in time (the mean over `neighbours` of them, per batch), which share the
    machine's speed at that moment. One value per sample, about 0 where the sample ran beside the cell without
    slowing it; None where a loop has fewer than `neighbours` untouched windows (windows too long for the probe's
    interval)."""
    ws = sorted(windows, key=lambda w: w["t0"])
    if not ws or not spans:
        return [0.0] * len(spans)
    typical = float(np.median([w["seconds"] for w in ws]))
    starts = np.array([a for a, _ in spans]) - TOUCH_BEFORE * typical
    ends = np.array([b for _, b in spans]) + TOUCH_AFTER * typical
    hit = []
    for w in ws:
        j = np.flatnonzero((starts <= w["t0"]) & (w["t0"] <= ends))
        hit.append(int(j[0]) if j.size else -1)
    excess = [0.0] * len(spans)
    for loop in ARMS:
        idx = [i for i, w in enumerate(ws) if w["loop"] == loop]
        clean = [i for i in idx if hit[i] < 0]
        if len(clean) < neighbours:
            return None
        clean_t0 = np.array([ws[i]["t0"] for i in clean])
        per_batch = np.array([ws[i]["seconds"] / ws[i]["batches"] for i in clean])
        for i in idx:
            if hit[i] < 0:
                continue
            near = np.argsort(np.abs(clean_t0 - ws[i]["t0"]), kind="stable")[:neighbours]
            excess[hit[i]] += ws[i]["seconds"] - ws[i]["batches"] * float(per_batch[near].mean())
    return excess


def overhead_ratios(
    windows: list[dict], spans: list[tuple[float, float]] | None = None, seed: int = 0, n_boot: int = N_BOOT
) -> dict[str, dict]:
    """Throughput ratios of a run of rounds of two short windows (bare loop | run_loop) while the probe sampled the
    cell on its cadence (`spans`: each sample's start and end, on the windows' clock):
      harness_over_bare   run_loop / bare over every round holding both (paired: both windows of a round share
                          the machine's speed; the probe falls on either at random)
      probe_on_over_off   the probed throughput over the unprobed one: (T - E) / T, with T every window's seconds
                          and E what the probe's samples added to the windows they touched (`probe_excess`)
      suite_over_bare     their product: the suite as it runs against a bare, unprobed loop
    Each with a 95% percentile bootstrap interval: rounds resampled for the first, samples for the second, both for
    the product."""
    rounds, by = _rounds(windows)
    if not rounds:
        return {}
    spans = spans or []
    cols = {
        loop: tuple(np.array([by[(loop, r)][key] for r in rounds], float) for key in ("batches", "seconds"))
        for loop in ARMS
    }
    found = probe_excess([by[(lp, r)] for r in rounds for lp in ARMS], spans)
    excess = np.asarray(found if found is not None else [np.nan] * len(spans), float)
    total_s = float(sum(by[(lp, r)]["seconds"] for r in rounds for lp in ARMS))

    def h_of(ix):
        (hu, hs), (bu, bs) = cols["harness"], cols["bare"]
        return (hu[ix].sum(-1) / hs[ix].sum(-1)) / (bu[ix].sum(-1) / bs[ix].sum(-1))

    def p_of(ix):
        return 1.0 - (excess[ix].sum(-1) if excess.size else 0.0) / total_s

    n, m = len(rounds), excess.size
    h, p = float(h_of(np.arange(n))), float(p_of(np.arange(m)))
    rng = np.random.default_rng(seed)
    hb = h_of(rng.integers(0, n, size=(n_boot, n))) if n > 1 else np.full(n_boot, h)
    pb = p_of(rng.integers(0, m, size=(n_boot, m))) if m > 1 else np.full(n_boot, p)

    def interval(est, boot, k, method):
        if not np.isfinite(est):
            nan = float("nan")
            return EstimateInterval(nan, nan, nan, "windows too long for the probe's interval", 0.95, k)._asdict()
        lo, hi = np.quantile(boot, [0.025, 0.975])
        return EstimateInterval(est, float(lo), float(hi), method, 0.95, k)._asdict()

    return {
        "harness_over_bare": interval(h, hb, n, BOOTSTRAP + " over rounds"),
        "probe_on_over_off": interval(p, pb, m, BOOTSTRAP + " over the probe's samples"),
        "suite_over_bare": interval(h * p, hb * pb, n, BOOTSTRAP + " over rounds and samples"),
    }


def arm_throughput(windows: list[dict], loop: str) -> float:
    """Batches per second of one loop, pooled over its windows."""
    ws = [w for w in windows if w["loop"] == loop]
    secs = sum(w["seconds"] for w in ws)
    return sum(w["batches"] for w in ws) / secs if secs > 0 else float("nan")


def loop_cpu_per_batch(windows: list[dict]) -> dict[str, float]:
    """Microseconds of the loop thread's CPU per batch, per loop (bare | harness), pooled over its windows: where a
    loop's time goes that the wall clock hides among the machine's other work."""
    out = {}
    for loop in ARMS:
        ws = [w for w in windows if w["loop"] == loop and w.get("cpu_s") is not None]
        batches = sum(w["batches"] for w in ws)
        out[loop] = 1e6 * sum(w["cpu_s"] for w in ws) / batches if batches else float("nan")
    return out


def speed_drift(windows: list[dict], spans: list[tuple[float, float]] | None = None) -> dict[str, float]:
    """How the machine's speed moves under one loop, the bare one, in its windows untouched by the probe: the
    spread of per-batch time over all of them (a window against any other: what windows measured far apart read)
    against the spread of the change from one to the next (what two neighbouring windows share). Both as the
    interquartile range of log ratios to the median, so one outlier does not decide them."""
    ws = sorted((w for w in windows if w["loop"] == "bare"), key=lambda w: w["t0"])
    if spans:
        touched = set()
        for i, w in enumerate(ws):
            if any(a < w["t0"] + w["seconds"] and b > w["t0"] for a, b in spans):
                touched.add(i)
        ws = [w for i, w in enumerate(ws) if i not in touched]
    x = np.log([w["seconds"] / w["batches"] for w in ws]) if len(ws) >= 4 else np.array([])
    if x.size < 4:
        return {}

    def iqr(v):
        q1, q3 = np.quantile(v, [0.25, 0.75])
        return float(np.expm1(q3 - q1))

    return {"windows": int(x.size), "all_iqr": iqr(x - np.median(x)), "neighbour_iqr": iqr(np.diff(x))}


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


def drift_text(drift: dict | None) -> str:
    """How far the machine's speed moved under the bare loop's windows: between any two, and between neighbours."""
    if not drift:
        return "n/a"
    return f"{drift['all_iqr'] * 100:.0f}% | {drift['neighbour_iqr'] * 100:.0f}%"


def probe_cpu_text(p: dict) -> str:
    """The probe's CPU per sample, and how many of its samples walked the page tables at what cost each."""
    if p.get("cpu_ms_per_sample") is None:
        return "n/a"
    text = f"{p['cpu_ms_per_sample']:.1f} ms"
    if p.get("cpu_ms_per_walk") is not None:
        rest = p.get("cpu_ms_per_cheap_sample")
        text += f" ({p['walks']} walks, {p['cpu_ms_per_walk']:.0f} ms each"
        text += f"; the rest {rest:.1f} ms)" if rest is not None else ")"
    return text


def overhead_cells() -> list:
    """A fast workload (where a per-batch cost shows most) at 0 and 2 workers, and the JPEG workload one image a
    batch, so that its windows (at least two prefetch pipelines) last hundredths of a second, not 32-image
    batches' tenths: far shorter than the probe's interval, so that most windows are untouched by it."""
    return [
        make_cell("sleep", 0, 1, sleep_ms=0.0, study={"measure_batches": 100_000}),
        make_cell("sleep", 2, 2, sleep_ms=0.0, study={"measure_batches": 40_000}),
        make_cell("jpeg", 0, 1, batch_size=1, study={"measure_batches": 8_000}),
        make_cell("jpeg", 2, 2, batch_size=1, study={"measure_batches": 20_000}),
    ]


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _ProbeTicker:
    """The probe on the runner's cadence (sample, wait probe_interval_s, sample, ...) while the cell measures,
    each sample's start and end kept on the windows' clock."""

    def __init__(self, probe, interval_s: float):
        self.probe, self.interval_s = probe, interval_s
        self.on, self.cpu_s, self.on_s, self._since = False, 0.0, 0.0, 0.0
        self.next_tick = math.inf
        self.spans: list[tuple[float, float]] = []
        self.walk_cpu_s: list[float] = []  # the CPU of each sample that read PSS and USS (walked the page tables)

    def tick(self) -> None:
        if not self.on or time.perf_counter() < self.next_tick:
            return
        walks = getattr(self.probe, "full_samples", 0)
        c0 = _self_cpu()
        t0 = time.perf_counter()
        self.probe.sample()
        t1 = time.perf_counter()
        cpu_s = _self_cpu() - c0
        self.cpu_s += cpu_s
        if getattr(self.probe, "full_samples", 0) > walks:
            self.walk_cpu_s.append(cpu_s)
        self.spans.append((t0, t1))
        self.next_tick = t1 + self.interval_s

    def switch(self, on: bool) -> None:
        now = time.perf_counter()
        if self.on:
            self.on_s += now - self._since
        self.on, self._since = on, now
        self.next_tick = now if on else math.inf

    def metrics(self) -> dict | None:
        n = len(self.spans)
        if not n:
            return None
        cpu_s, wall_s = self.cpu_s / n, sum(b - a for a, b in self.spans) / n
        walks, walk_cpu_s = len(self.walk_cpu_s), sum(self.walk_cpu_s)
        return {
            "samples": n,
            "cpu_ms_per_sample": 1000 * cpu_s,
            # the samples that read PSS and USS, and what they took: most of the probe's CPU where the tree has
            # torch processes (the kernel walks each one's page tables)
            "walks": walks,
            "cpu_ms_per_walk": 1000 * walk_cpu_s / walks if walks else None,
            "cpu_ms_per_cheap_sample": 1000 * (self.cpu_s - walk_cpu_s) / (n - walks) if n > walks else None,
            "walks_share_of_probe_cpu": walk_cpu_s / self.cpu_s if self.cpu_s > 0 else None,
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
    """Fork one cell process (as the runner does) and probe it from here, off the cell's cores where there are
    others (as the runner does), while it measures its rounds of windows. `probe_factory(pid)` builds the probe
    (default: the runner's TreeProbe)."""
    from loaderbench.measure.probes import TreeProbe, off_cell_cpus

    config = cell.config
    ctl_r, ctl_w = os.pipe()
    ack_r, ack_w = os.pipe()
    load_before = loadavg()
    deadline = time.monotonic() + timeout_s
    own = os.sched_getaffinity(0)
    off = off_cell_cpus(config["cores"])
    try:
        with forked(lambda: abab_cell(config, prepared, plan, ctl_w, ack_r), close_in_child=(ctl_r, ack_w)) as child:
            os.close(ctl_w)
            os.close(ack_r)
            ctl_w = ack_r = -1
            if off:
                os.sched_setaffinity(0, off)
            ticker = _ProbeTicker((probe_factory or TreeProbe)(child.pid), probe_interval_s)
            while time.monotonic() <= deadline:
                ticker.tick()
                ready, _, _ = select.select([ctl_r], [], [], max(0.0, min(ticker.next_tick - time.perf_counter(), 5.0)))
                if ready:
                    msg = os.read(ctl_r, 1)
                    if not msg:
                        break  # the child closed its end: done (or dead)
                    ticker.switch(msg == b"1")
                    os.write(ack_w, b"k")
            child.wait(max(0.0, deadline - time.monotonic()))
    finally:
        if off:
            os.sched_setaffinity(0, own)
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
        probe_off_cell_cpus=off,
        load_before=load_before,
        load_after=loadavg(),
    )
    probe = ticker.metrics()
    if probe:
        out["probe"] = probe
    if "windows" in out:
        t_first = min((w["t0"] for w in out["windows"]), default=0.0)
        out["ratios"] = overhead_ratios(out["windows"], ticker.spans, seed=plan.seed)
        out["bare_batches_per_s"] = arm_throughput(out["windows"], "bare")
        out["loop_cpu_us_per_batch"] = loop_cpu_per_batch(out["windows"])
        out["speed_drift"] = speed_drift(out["windows"], ticker.spans)
        out["goal"] = suite_goal(out["ratios"].get("suite_over_bare"))
        out["rounds_for_goal"] = rounds_for_goal(out["ratios"].get("suite_over_bare"), out.get("rounds", 0))
        out["probe_spans"] = [(round(a - t_first, 6), round(b - t_first, 6)) for a, b in ticker.spans]
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

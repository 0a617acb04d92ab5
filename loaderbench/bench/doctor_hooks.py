"""What the doctor's watch costs a loop that does nothing but load: the loop alone against the same loop through
`loaderbench.watch` (the iterator the doctor's hooks hand a script), in interleaved rounds.

Each round times one window of each arm, in a shuffled order, on the same DataLoader: the bare `for` loop, and the
watched loop while the watch measures (two clock reads and one log entry per batch, and the sampler of the
workers' CPU and memory: their CPU times twice a second; their page tables for USS and PSS during the warm-up,
after the window, and within it only as loaderbench.doctor.workers.WALK_SHARE allows). Both arms skip the same
warm-up batches first. The ratio of the watched arm's batches per second over the bare arm's is taken per round, so
that a machine whose speed drifts moves both sides of a ratio; its median comes with an order-statistic interval
over the rounds. The sampler's own CPU within each watched window is counted beside the watch's; what it spends at
the window's edges (the baseline walk in the warm-up, the last sample after the window) is reported apart, in
milliseconds per watch.

Beside it, precise whatever the machine's load (`watch_cost`): the watch's own work per batch, in the loop thread's
CPU time, over an in-memory list (a bare `for` against the watched one, in a shuffled order per round): the median
paired difference is what the watch adds to every batch. A third arm prices the CPU samples (the loop thread's CPU
clock, read on about one batch per `loaderbench.doctor.cpu_sample.EVERY_S` of the loop's time): the same watched
list with samples far denser; its extra CPU over the watched arm's, per extra sampled batch, is what one sample
costs, and that over EVERY_S the share of the loop's time the samples take, at any step rate. Against each loop's
bare batch period: the watch's share of the fastest loop.

Contract: `hook_overhead(rounds, batches)` returns, per loop (num_workers 0 and 2), the per-round ratios, their
median with its interval, both arms' batches per second, `sampler_share` (the workers' sampler's CPU within the
watched window over the window, median over rounds), `sampler_edge_ms` (its CPU at the window's edges, median) and
`cpu_share` (the watch's CPU per batch over the bare batch period, plus the samples' share of the time, plus
`sampler_share`), and `watch_cost` (`watch_cost(...)`: `cost_ns_per_batch` and `sample_ns`, each with its
interval, and `samples_share_of_time`).
"""

from __future__ import annotations

import random
import statistics
import time

from loaderbench.bench.common import loadavg, median_interval

#: batches skipped before each window: the iterator's start and its workers' first batches
WARMUP = 20
LOOPS = (0, 2)  # num_workers


def _loader(num_workers: int):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    data = TensorDataset(torch.zeros(200_000, 16), torch.zeros(200_000, dtype=torch.long))
    return DataLoader(data, batch_size=8, num_workers=num_workers, persistent_workers=num_workers > 0)


def _window(iterable, batches: int, tail: int = 0) -> float:
    """Seconds for `batches` batches after WARMUP ones; then `tail` batches more, untimed."""
    it = iter(iterable)
    for _ in range(WARMUP):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    seconds = time.perf_counter() - t0
    for _ in range(tail):
        next(it)
    return seconds


def _watched(loader, batches: int):
    from loaderbench.doctor.api import watch

    # the whole window is in the watch's measuring phase; the step after it (untimed, the window's tail) ends the
    # measurement, so the diagnosis computed then and the sampler's end are not in the window
    return watch(loader, steps=batches + 1, warmup=WARMUP, headspace=0, echo=False)


#: The third arm of `watch_cost` samples about one batch per this much of the loop's time: some percent of its batches
DENSE_EVERY_S = 20e-6


def watch_cost(batches: int = 100_000, rounds: int = 11, seed: int = 0) -> dict:
    """The watch's own CPU per batch: a bare `for` over an in-memory list against the same list watched (two clock
    reads and a log entry per batch, the watch's work on the batches it planned for, its CPU samples), in this
    thread's CPU time, the arms in a shuffled order per round; the median paired difference with its order-statistic
    interval. And the price of one CPU sample, from a third arm sampling about one batch per DENSE_EVERY_S."""
    from loaderbench.doctor.cpu_sample import EVERY_S

    rng = random.Random(seed)
    data = list(range(batches + WARMUP + 2))
    ns: dict[str, list[float]] = {"bare": [], "watched": [], "sampled": []}
    share: dict[str, list[float]] = {"watched": [], "sampled": []}  # of the window's batches, those sampled
    for _ in range(rounds):
        arms = list(ns)
        rng.shuffle(arms)
        for arm in arms:
            watched = None if arm == "bare" else _watched(data, batches)
            it = iter(data if watched is None else watched)
            log = None
            if watched is not None:
                (lw,) = watched.session.watches.values()
                log = lw.log
                if arm == "sampled":
                    lw.cpu.every_s = DENSE_EVERY_S
            for _ in range(WARMUP):
                next(it)
            c0 = time.thread_time()
            for _ in range(batches):
                next(it)
            ns[arm].append((time.thread_time() - c0) / batches * 1e9)
            if log is not None:
                share[arm].append(sum(1 for i in log.cpu_batch if WARMUP <= i < WARMUP + batches) / batches)
            del it
    per_sample = [
        (s - w) / (fs - fw)
        for s, w, fs, fw in zip(ns["sampled"], ns["watched"], share["sampled"], share["watched"])
        if fs > fw
    ]
    sample = median_interval(per_sample)
    return {
        "batches": batches,
        "rounds": rounds,
        "bare_ns_per_batch": statistics.median(ns["bare"]),
        "watched_ns_per_batch": statistics.median(ns["watched"]),
        "cost_ns_per_batch": median_interval([w - b for w, b in zip(ns["watched"], ns["bare"])]),
        "sampled_share": {arm: statistics.median(v) for arm, v in share.items()},
        "sample_ns": sample,
        "every_s": EVERY_S,
        # one sample per EVERY_S of the loop's time, whatever its step rate
        "samples_share_of_time": sample["estimate"] * 1e-9 / EVERY_S if per_sample else None,
    }


def hook_overhead(rounds: int, batches: int, seed: int = 0, cost_batches: int = 100_000) -> dict:
    rng = random.Random(seed)
    out: dict = {"rounds": rounds, "batches": batches, "warmup": WARMUP, "load_start": loadavg(), "loops": []}
    out["watch_cost"] = cost = watch_cost(cost_batches, seed=seed)
    for workers in LOOPS:
        loader = _loader(workers)
        _window(loader, batches)  # first iterator: workers, caches
        ratios, rates, sampler, edge = [], {"bare": [], "watched": []}, [], []
        for _ in range(rounds):
            arms = ["bare", "watched"]
            rng.shuffle(arms)
            seconds = {}
            for arm in arms:
                if arm == "bare":
                    seconds[arm] = _window(loader, batches)
                else:
                    watched = _watched(loader, batches)
                    seconds[arm] = _window(watched, batches, tail=2)
                    (lw,) = watched.session.watches.values()
                    # within the window; and at its edges: the baseline walk (warm-up), the last sample (the tail)
                    sampler.append(lw.sampler.window_cpu_s / seconds[arm])
                    edge.append((lw.sampler.cpu_s - lw.sampler.window_cpu_s) * 1e3)
                rates[arm].append(batches / seconds[arm])
            ratios.append(seconds["bare"] / seconds["watched"])
        out["loops"].append(
            {
                "num_workers": workers,
                "ratio": median_interval(ratios),
                "ratios": ratios,
                "bare_batches_per_s": median_interval(rates["bare"]),
                "watched_batches_per_s": median_interval(rates["watched"]),
                # the watch's CPU per batch over this loop's bare batch period, its CPU samples' share of the
                # loop's time, and the workers' sampler's CPU over the watched window: the watch's share where
                # nothing else runs
                "sampler_share": statistics.median(sampler),
                "sampler_edge_ms": statistics.median(edge),
                "cpu_share": cost["cost_ns_per_batch"]["estimate"] * 1e-9 * median_interval(rates["bare"])["estimate"]
                + (cost["samples_share_of_time"] or 0.0)
                + statistics.median(sampler),
            }
        )
    out["load_end"] = loadavg()
    return out

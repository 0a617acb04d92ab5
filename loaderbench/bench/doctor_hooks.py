"""What the doctor's watch costs a loop that does nothing but load: the loop alone against the same loop through
`loaderbench.watch` (the iterator the doctor's hooks hand a script), in interleaved rounds.

Each round times one window of each arm, in a shuffled order, on the same DataLoader: the bare `for` loop, and the
watched loop while the watch measures (two clock reads and one log entry per batch, and the sampler of the
workers' CPU and memory, twice a second). Both arms skip the same warm-up batches first. The ratio of the watched
arm's batches per second over the bare arm's is taken per round, so that a machine whose speed drifts moves both
sides of a ratio; its median comes with an order-statistic interval over the rounds.

Beside it, precise whatever the machine's load (`watch_cost`): the watch's own work per batch, in the loop thread's
CPU time, over an in-memory list (a bare `for` against the watched one, ABAB): the median paired difference is what
the watch adds to every batch, and against each loop's bare batch period, its share of the fastest loop.

Contract: `hook_overhead(rounds, batches)` returns, per loop (num_workers 0 and 2), the per-round ratios, their
median with its interval, both arms' batches per second and `cpu_share` (the watch's CPU per batch over the bare
batch period), and `watch_cost` (`watch_cost(...)`: `cost_ns_per_batch` with its interval).
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


def watch_cost(batches: int = 100_000, rounds: int = 11, seed: int = 0) -> dict:
    """The watch's own CPU per batch: a bare `for` over an in-memory list against the same list watched (two clock
    and two CPU-clock reads, one log entry, the phase's bookkeeping), ABAB in this thread's CPU time; the median
    paired difference with its order-statistic interval."""
    rng = random.Random(seed)
    data = list(range(batches + WARMUP + 2))
    bare, watched = [], []
    for _ in range(rounds):
        arms = ["bare", "watched"]
        rng.shuffle(arms)
        for arm in arms:
            it = iter(data if arm == "bare" else _watched(data, batches))
            for _ in range(WARMUP):
                next(it)
            c0 = time.thread_time()
            for _ in range(batches):
                next(it)
            (bare if arm == "bare" else watched).append((time.thread_time() - c0) / batches * 1e9)
            del it
    return {
        "batches": batches,
        "rounds": rounds,
        "bare_ns_per_batch": statistics.median(bare),
        "watched_ns_per_batch": statistics.median(watched),
        "cost_ns_per_batch": median_interval([w - b for w, b in zip(watched, bare)]),
    }


def hook_overhead(rounds: int, batches: int, seed: int = 0, cost_batches: int = 100_000) -> dict:
    rng = random.Random(seed)
    out: dict = {"rounds": rounds, "batches": batches, "warmup": WARMUP, "load_start": loadavg(), "loops": []}
    out["watch_cost"] = cost = watch_cost(cost_batches, seed=seed)
    for workers in LOOPS:
        loader = _loader(workers)
        _window(loader, batches)  # first iterator: workers, caches
        ratios, rates = [], {"bare": [], "watched": []}
        for _ in range(rounds):
            arms = ["bare", "watched"]
            rng.shuffle(arms)
            seconds = {}
            for arm in arms:
                if arm == "bare":
                    seconds[arm] = _window(loader, batches)
                else:
                    seconds[arm] = _window(_watched(loader, batches), batches, tail=2)
                rates[arm].append(batches / seconds[arm])
            ratios.append(seconds["bare"] / seconds["watched"])
        out["loops"].append(
            {
                "num_workers": workers,
                "ratio": median_interval(ratios),
                "ratios": ratios,
                "bare_batches_per_s": median_interval(rates["bare"]),
                "watched_batches_per_s": median_interval(rates["watched"]),
                # the watch's CPU per batch over this loop's bare batch period: its share where nothing else runs
                "cpu_share": cost["cost_ns_per_batch"]["estimate"] * 1e-9 * median_interval(rates["bare"])["estimate"],
            }
        )
    out["load_end"] = loadavg()
    return out

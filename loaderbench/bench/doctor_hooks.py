"""What the doctor's watch costs a loop that does nothing but load: the loop alone against the same loop through
`loaderbench.watch` (the iterator the doctor's hooks hand a script), in interleaved rounds.

Each round times one window of each arm, in a shuffled order, on the same DataLoader: the bare `for` loop, and the
watched loop while the watch measures (two clock reads and one log entry per batch, and the sampler of the
workers' CPU and memory, twice a second). Both arms skip the same warm-up batches first. The ratio of the watched
arm's batches per second over the bare arm's is taken per round, so that a machine whose speed drifts moves both
sides of a ratio; its median comes with an order-statistic interval over the rounds.

Contract: `hook_overhead(rounds, batches)` returns, per loop (num_workers 0 and 2), the per-round ratios, their
median with its interval, and both arms' batches per second.
"""

from __future__ import annotations

import random
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


def hook_overhead(rounds: int, batches: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    out: dict = {"rounds": rounds, "batches": batches, "warmup": WARMUP, "load_start": loadavg(), "loops": []}
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
            }
        )
    out["load_end"] = loadavg()
    return out

"""A deterministic model of a DataLoader's prefetch pipeline, for testing window arithmetic.

Workers take batches round-robin (batch b goes to worker b % N, in order); the loader dispatches
`N x prefetch_factor` indices at start and one more each time the main process receives a batch, until the
sampler runs dry. Workers share `cores` CPUs equally (processor sharing): each active worker runs at
min(1, cores / active) of a core. Every batch costs `batch_s` CPU-seconds. Returns the consumer's timeline
as loaderbench.measure.loop.LoopTimes, so the window arithmetic can be checked against a known ceiling:
min(num_workers, cores) / batch_s batches per second (on average, with jitter).
"""

from __future__ import annotations

import math
import random

from loaderbench.measure.loop import LoopTimes


def simulate(
    num_workers: int,
    cores: int,
    prefetch_factor: int,
    batches: int,
    batch_s: float = 0.01,
    startup_s: float = 0.05,
    step_s: float = 0.0,
    jitter: float = 0.0,
    seed: int = 0,
) -> LoopTimes:
    """`jitter`: each batch costs batch_s x (1 + U(-jitter, jitter)), seeded, so workers drift out of phase
    as real ones do (with jitter = 0 they finish in lockstep and nothing is ever made ahead)."""
    rng = random.Random(seed)
    cost = [batch_s * (1 + rng.uniform(-jitter, jitter)) for _ in range(batches)]
    if num_workers == 0:
        got, done, t = [], [], 0.0
        for b in range(batches):
            t += cost[b]
            got.append(t)
            t += step_s
            done.append(t)
        return LoopTimes([0.0], [got], [done])
    queues: list[list[int]] = [[] for _ in range(num_workers)]
    left = [0.0] * num_workers  # CPU-seconds left of the batch at the head of each worker's queue
    ready: dict[int, float] = {}
    now = startup_s

    def dispatch(b: int) -> None:
        if b < batches:
            w = b % num_workers
            if not queues[w]:
                left[w] = cost[b]
            queues[w].append(b)

    def advance(until: float = math.inf, batch: int | None = None) -> None:
        nonlocal now
        while batch is None or batch not in ready:
            active = [w for w in range(num_workers) if queues[w]]
            if not active:
                assert batch is None, "deadlock: the batch waited for was never dispatched"
                now = max(now, until)
                return
            rate = min(1.0, cores / len(active))
            dt = min(left[w] for w in active) / rate
            if now + dt > until:
                for w in active:
                    left[w] -= (until - now) * rate
                now = until
                return
            now += dt
            for w in active:
                left[w] -= dt * rate
                if left[w] <= 1e-12:
                    ready[queues[w].pop(0)] = now
                    left[w] = cost[queues[w][0]] if queues[w] else 0.0

    for b in range(num_workers * prefetch_factor):
        dispatch(b)
    got, done, consumer_free = [], [], 0.0
    for b in range(batches):
        advance(batch=b)
        t_got = max(ready[b], consumer_free)
        advance(until=t_got)
        dispatch(b + num_workers * prefetch_factor)  # the loader refills one index per batch received
        got.append(t_got)
        consumer_free = t_got + step_s
        done.append(consumer_free)
    return LoopTimes([0.0], [got], [done])

"""Which measured batches the watch reads the loop thread's CPU clock on, and the CPU shares estimated from them.

The thread's CPU clock (`time.thread_time`, a system call) costs several times the wall clock, so it is read on a
random sample of the measured batches, not on every one. Each batch is sampled independently, with a chance
``p`` of the loop's recent batch period over ``EVERY_S`` (at most 1): about one sampled batch per ``EVERY_S`` of
the loop's time, whatever its step rate, so that the reads cost the same small share of the loop's time, and
every batch of a loop whose batches take ``EVERY_S`` or more. The first measured batch is always sampled. The
gaps between samples are drawn from a seeded generator, so a loop with a period of its own (an optimizer step
every 4 batches, a log line every 10) is not read always at the same point of it.

Each sampled batch carries the weight 1/p of its chance; a share is the ratio of the weighted sums of CPU time
and wall time over the sampled batches (a Horvitz-Thompson ratio estimator of the share over all measured
batches)."""

from __future__ import annotations

import math
import random

import numpy as np

from loaderbench.doctor.steps import Columns

#: About one batch is sampled per this much of the loop's time. A sample costs the loop some microseconds (four reads
#: of the CPU clock, and the watch's work on the sampled batch and the next): one per 5 ms is a few tenths of a
#: percent of its time at most.
EVERY_S = 0.005
#: The loop's recent batch period is read over this many batches.
PERIOD_BATCHES = 32
SEED = 0


class CpuSampling:
    """The chance and the gaps of the sample; ``p``: the chance of every batch until the next sampled one."""

    def __init__(self, every_s: float | None = None, seed: int = SEED):
        self.every_s = EVERY_S if every_s is None else every_s
        self.rng = random.Random(seed)
        self.p = 1.0

    def probability(self, period_s: float | None) -> float:
        """The chance of sampling a batch of a loop whose batches take ``period_s`` (None: not known yet: 1)."""
        if period_s is None or self.every_s <= 0:
            return 1.0
        return min(1.0, max(0.0, period_s / self.every_s))

    def gap(self, period_s: float | None) -> int | None:
        """After a sampled batch: how many batches further the next sampled one is (None: none). Each batch on the
        way is sampled with the chance ``p``, independently of the others (a geometric gap)."""
        self.p = p = self.probability(period_s)
        if p >= 1.0:
            return 1
        if p <= 0.0:
            return None
        u = 1.0 - self.rng.random()  # in (0, 1]
        return 1 + int(math.log(u) / math.log1p(-p))


def _ratio(cpu: np.ndarray, wall: np.ndarray, weight: np.ndarray) -> float | None:
    if not len(cpu):
        return None
    den = float(np.dot(weight, wall))
    if den <= 0:
        return None
    return min(1.0, float(np.dot(weight, cpu)) / den)


def cpu_shares(cols: Columns, phase: str = "measure") -> dict:
    """The loop thread's CPU share of the steps and of the waits of ``phase``, estimated from its sampled batches
    (None: none was sampled), and how many sampled steps the step's share rests on."""
    in_phase = np.array([p == phase for p in cols.phase], dtype=bool)
    sampled = in_phase & (cols.cpu_weight > 0)
    steps = sampled & ~np.isnan(cols.step_s) & ~np.isnan(cols.step_cpu_s)
    return {
        "step_cpu_share": _ratio(cols.step_cpu_s[steps], cols.step_s[steps], cols.cpu_weight[steps]),
        "wait_cpu_share": _ratio(cols.wait_cpu_s[sampled], cols.wait_s[sampled], cols.cpu_weight[sampled]),
        "cpu_sampled_steps": int(steps.sum()),
    }

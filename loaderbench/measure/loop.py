"""The measuring loop: iterate a DataLoader as a training loop would, with two clock reads per batch.

Everything else (probing, records) happens outside this loop, so the loop is what a bare
`for batch in loader` would be plus the simulated training step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from loaderbench.study.window import WindowPlan


def make_step(step_ms: float, kind: str | None) -> Callable[[Any], None]:
    """The simulated training step: sleep (an accelerator busy elsewhere) or busy-wait (a CPU step)."""
    seconds = step_ms / 1000.0
    if seconds <= 0:
        return lambda batch: None
    if kind == "busy":

        def busy(batch, _clock=time.perf_counter):
            end = _clock() + seconds
            while _clock() < end:
                pass

        return busy
    return lambda batch: time.sleep(seconds)


class EpochEndedEarly(RuntimeError):
    """The dataset stopped yielding before the epoch had the batches its window needs."""

    def __init__(self, got: int, needed: int):
        super().__init__(
            f"the dataset's epoch ended after {got} batches; each epoch needs {needed} (warm-up, "
            f"measured window and tail): make it yield at least {needed} full batches per epoch "
            f"(an iterable dataset: all its workers together, each dropping its last partial batch)"
        )
        self.got, self.needed = got, needed


@dataclass
class LoopTimes:
    """Raw per-batch times, one row per epoch: t_iter (iter() called), got[b] (batch b received), done[b] (step
    done)."""

    t_iter: list[float]
    got: list[list[float]]
    done: list[list[float]]


def run_loop(
    loader: Iterable,
    epochs: int,
    batches_per_epoch: int,
    step: Callable[[Any], None],
    on_epoch_end: Callable[[], None] | None = None,
    stop: Callable[[int, float], bool] | None = None,
) -> LoopTimes:
    """Consume `batches_per_epoch` batches per epoch, timing each. `stop(consumed, t_done)`, called after each
    step, may end an epoch early (the adaptive rule); `on_epoch_end` runs after an epoch's last step, before its
    iterator is dropped (outside every window)."""
    clock = time.perf_counter
    t_iter, got, done = [], [], []
    for _ in range(epochs):
        g = [0.0] * batches_per_epoch
        d = [0.0] * batches_per_epoch
        t0 = clock()
        it = iter(loader)
        b = 0
        while b < batches_per_epoch:
            try:
                batch = next(it)
            except StopIteration:
                raise EpochEndedEarly(b, batches_per_epoch) from None
            g[b] = clock()
            step(batch)
            d[b] = clock()
            b += 1
            if stop is not None and stop(b, d[b - 1]):
                break
        if on_epoch_end is not None:
            on_epoch_end()
        del it, batch  # non-persistent workers shut down here: part of the next epoch's gap
        t_iter.append(t0)
        got.append(g[:b])
        done.append(d[:b])
    return LoopTimes(t_iter, got, done)


def measured_steps(times: LoopTimes, plan: WindowPlan) -> list[int]:
    """Indices of the measured steps when all epochs' steps are concatenated (as the consumer counts them)."""
    out, offset = [], 0
    for g in times.got:
        out += [offset + b for b in plan.measured(len(g))]
        offset += len(g)
    return out


def window_bounds(t0: float, done: list[float], plan: WindowPlan) -> tuple[float, float, range]:
    """(open, close, measured batch indices) of one epoch's window. A steady window opens when the warm-up's
    last step is done and closes when the last measured step is; an epoch window opens at iter()."""
    measured = plan.measured(len(done))
    open_ = done[plan.warmup - 1] if plan.warmup > 0 else t0
    close = done[measured[-1]] if len(measured) else open_
    return open_, close, measured


def summarize_loop(times: LoopTimes, plan: WindowPlan, batch_size: int) -> dict:
    """Steady-state throughput = samples / wall time of the measured windows (never a mean of per-batch rates)."""
    window_s = 0.0
    samples = 0
    waits: list[float] = []
    epoch_s, gaps = [], []
    for e, (t0, g, d) in enumerate(zip(times.t_iter, times.got, times.done)):
        open_, close, measured = window_bounds(t0, d, plan)
        window_s += close - open_
        samples += len(measured) * batch_size
        prev = [open_] + [d[b] for b in measured[:-1]]
        waits += [g[b] - pb for b, pb in zip(measured, prev)]
        epoch_s.append(d[-1] - t0)
        if e > 0:
            gaps.append(g[0] - times.done[e - 1][-1])
    w = np.asarray(waits) if waits else np.zeros(1)
    total_s = times.done[-1][-1] - times.t_iter[0]
    total_samples = sum(len(g) for g in times.got) * batch_size
    return {
        "samples_per_s": samples / window_s if window_s > 0 else None,
        "measured_samples": samples,
        "measured_s": window_s,
        "end_to_end_samples_per_s": total_samples / total_s if total_s > 0 else None,
        "total_s": total_s,
        "time_to_first_batch_s": times.got[0][0] - times.t_iter[0],
        "batch_wait_s": {q: float(np.percentile(w, p)) for q, p in (("p50", 50), ("p95", 95), ("p99", 99))}
        | {"max": float(w.max()), "mean": float(w.mean())},
        "data_stall_fraction": float(w.sum() / window_s) if window_s > 0 else None,
        "epoch_s": epoch_s,
        "epoch_gap_s": float(np.mean(gaps)) if gaps else None,
        "epoch_gaps_s": gaps,
        "window": plan.describe(),
    }

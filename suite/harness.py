"""The measuring loop: iterate a DataLoader as a training loop would, with two clock reads per batch.

Everything else (probing, records) happens outside this loop, so the loop is what a bare
`for batch in loader` would be plus the simulated training step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np


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


@dataclass
class LoopTimes:
    """Raw per-batch times, one row per epoch: t_iter (iter() called), got[b] (batch b received), done[b] (step done)."""

    t_iter: list[float]
    got: list[list[float]]
    done: list[list[float]]


def run_loop(loader: Iterable, epochs: int, batches_per_epoch: int, step: Callable[[Any], None],
             on_epoch_end: Callable[[], None] | None = None) -> LoopTimes:
    """`on_epoch_end` runs after an epoch's last step, before its iterator is dropped (outside the window)."""
    clock = time.perf_counter
    t_iter, got, done = [], [], []
    for _ in range(epochs):
        g = [0.0] * batches_per_epoch
        d = [0.0] * batches_per_epoch
        t0 = clock()
        it = iter(loader)
        for b in range(batches_per_epoch):
            batch = next(it)
            g[b] = clock()
            step(batch)
            d[b] = clock()
        if on_epoch_end is not None:
            on_epoch_end()
        del it, batch  # non-persistent workers shut down here: part of the next epoch's gap
        t_iter.append(t0)
        got.append(g)
        done.append(d)
    return LoopTimes(t_iter, got, done)


def run_loop_adaptive(loader: Iterable, warmup: int, window_batches: int, min_windows: int, max_windows: int,
                      target: float, max_seconds: float, step: Callable[[Any], None],
                      clock: Callable[[], float] = time.perf_counter) -> tuple[LoopTimes, dict]:
    """One epoch measured in consecutive windows of `window_batches`, until the 95% interval of the mean window
    rate (batch means) is within `target` of it, or the caps are hit. The caller sizes the dataset for
    warmup + max_windows * window_batches batches."""
    total = warmup + max_windows * window_batches
    g = [0.0] * total
    d = [0.0] * total
    rates: list[float] = []
    reached, half = False, float("nan")
    # The first check imports scipy.stats (1-3 s here): do it before the clock starts, or that import lands
    # inside window min_windows + 1, drops its rate several-fold, and the rule never stops (seen in suite.bench).
    precision_reached([1.0, 1.0], target)
    t0 = clock()
    it = iter(loader)
    b = 0
    window_start = t0
    while b < total:
        batch = next(it)
        g[b] = clock()
        step(batch)
        d[b] = clock()
        b += 1
        if b == warmup:
            window_start = d[b - 1]
        elif b > warmup and (b - warmup) % window_batches == 0:
            rates.append(window_batches / (d[b - 1] - window_start))
            window_start = d[b - 1]
            if len(rates) >= min_windows:
                reached, half = precision_reached(rates, target)
                if reached or d[b - 1] - d[max(warmup - 1, 0)] >= max_seconds:
                    break
    del it, batch
    times = LoopTimes([t0], [g[:b]], [d[:b]])
    return times, {"windows": len(rates), "window_batches_per_s": rates, "precision_target": target,
                   "precision_half_width": half, "precision_reached": reached}


def precision_reached(rates: list[float], target: float, confidence: float = 0.95) -> tuple[bool, float]:
    """Batch-means stopping rule: half-width of the t interval of the mean window rate, relative to the mean."""
    from scipy import stats

    r = np.asarray(rates, dtype=float)
    if len(r) < 2 or not np.all(np.isfinite(r)) or r.mean() <= 0:
        return False, float("nan")
    half = stats.t.ppf(0.5 + confidence / 2, len(r) - 1) * r.std(ddof=1) / np.sqrt(len(r))
    rel = float(half / r.mean())
    return rel <= target, rel


def summarize_loop(times: LoopTimes, warmup: int, batch_size: int) -> dict:
    """Steady-state throughput = samples / wall time of the measured window (never a mean of per-batch rates)."""
    window_s = 0.0
    samples = 0
    waits: list[float] = []
    epoch_s, gaps = [], []
    for e, (t0, g, d) in enumerate(zip(times.t_iter, times.got, times.done)):
        start = d[warmup - 1] if warmup > 0 else t0
        window_s += d[-1] - start
        samples += (len(g) - warmup) * batch_size
        prev = [start] + d[warmup:-1]
        waits += [gb - pb for gb, pb in zip(g[warmup:], prev)]
        epoch_s.append(d[-1] - t0)
        if e > 0:
            gaps.append(g[0] - times.done[e - 1][-1])
    w = np.asarray(waits)
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
    }

"""The numbers of one watched loader: data-wait fraction with its interval, wait and step percentiles,
headspace, and the workers' CPU and memory."""

from __future__ import annotations

import math

import numpy as np

from loaderbench.doctor.steps import StepLog
from loaderbench.stats.bootstrap import sum_ratio_ci
from loaderbench.stats.intervals import shift_ci

#: Steps are resampled in blocks of consecutive steps (a loader's waits come in runs), about this many blocks.
BLOCKS = 20


def _blocks(x: np.ndarray, n_blocks: int = BLOCKS) -> np.ndarray:
    size = max(1, len(x) // n_blocks)
    n = len(x) // size
    return x[: n * size].reshape(n, size).sum(axis=1)


def _num(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def wait_fraction(wait: np.ndarray, period: np.ndarray) -> dict:
    """Sum of waits over sum of step periods, with a block-bootstrap interval (95%)."""
    ci = sum_ratio_ci(_blocks(wait), _blocks(period))
    return {"estimate": _num(ci.estimate), "low": _num(ci.low), "high": _num(ci.high), "method": ci.method}


def headspace(log: StepLog) -> dict | None:
    """The step rate with loading free (batches replayed from memory) against the measured one: ratio of the
    median step periods, with the distribution-free (Mann-Whitney) 95% interval."""
    m, h = log.indices("measure"), log.indices("headspace")
    if len(h) < 3 or len(m) < 3:
        return None
    period_m = np.array([log.wait_s[i] + log.step_s[i] for i in m])
    period_h = np.array([log.wait_s[i] + log.step_s[i] for i in h])
    ci = shift_ci(period_h, period_m)
    return {
        "steps": len(h),
        "median_period_s": _num(float(np.median(period_h))),
        "speedup": _num(float(np.median(period_m) / np.median(period_h)), 4),
        "low": _num(ci.low, 4),
        "high": _num(ci.high, 4),
        "method": ci.method,
    }


def _share(cpu: list[float], wall: np.ndarray) -> float | None:
    """The loop thread's CPU time over the wall time of the same spans (None where not read)."""
    c = np.asarray(cpu, dtype=float)
    if not len(c) or np.isnan(c).any() or float(wall.sum()) <= 0:
        return None
    return _num(min(1.0, float(c.sum()) / float(wall.sum())), 4)


def summarize_steps(log: StepLog) -> dict:
    idx = log.indices("measure")
    out: dict = {
        "warmup_steps": log.count("warmup"),
        "measured_steps": len(idx),
        "first_batch_s": _num(log.wait_s[0]) if log.wait_s else None,
    }
    if not idx:
        return out
    wait = np.array([log.wait_s[i] for i in idx])
    step = np.array([log.step_s[i] for i in idx])
    period = wait + step
    out.update(
        {
            "data_wait_fraction": wait_fraction(wait, period),
            "wait_p50_s": _num(float(np.percentile(wait, 50))),
            "wait_p95_s": _num(float(np.percentile(wait, 95))),
            "step_p50_s": _num(float(np.percentile(step, 50))),
            "step_p95_s": _num(float(np.percentile(step, 95))),
            "step_cpu_share": _share([log.step_cpu_s[i] for i in idx], step),
            "wait_cpu_share": _share([log.wait_cpu_s[i] for i in idx], wait),
            "steps_per_s": _num(len(idx) / float(period.sum()), 4),
            "measured_s": _num(float(period.sum()), 4),
        }
    )
    return out

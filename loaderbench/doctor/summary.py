"""The numbers of one watched loader: data-wait fraction with its interval, wait and step percentiles,
headspace, and the workers' CPU and memory."""

from __future__ import annotations

import math

import numpy as np

from loaderbench.doctor.cpu_sample import cpu_shares
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
    cols = log.columns()
    period = cols.wait_s + cols.step_s
    period_m, period_h = period[m], period[h]
    ci = shift_ci(period_h, period_m)
    return {
        "steps": len(h),
        "median_period_s": _num(float(np.median(period_h))),
        "speedup": _num(float(np.median(period_m) / np.median(period_h)), 4),
        "low": _num(ci.low, 4),
        "high": _num(ci.high, 4),
        "method": ci.method,
    }


def summarize_steps(log: StepLog) -> dict:
    idx = log.indices("measure")
    out: dict = {
        "warmup_steps": log.count("warmup"),
        "measured_steps": len(idx),
        "first_batch_s": _num(float(log.columns().wait_s[0])) if len(log) else None,
    }
    if not idx:
        return out
    cols = log.columns()
    wait, step = cols.wait_s[idx], cols.step_s[idx]
    period = wait + step
    cpu = cpu_shares(cols)
    out.update(
        {
            "data_wait_fraction": wait_fraction(wait, period),
            "wait_p50_s": _num(float(np.percentile(wait, 50))),
            "wait_p95_s": _num(float(np.percentile(wait, 95))),
            "step_p50_s": _num(float(np.percentile(step, 50))),
            "step_p95_s": _num(float(np.percentile(step, 95))),
            # estimated from a sample of the measured batches (loaderbench.doctor.cpu_sample)
            "step_cpu_share": _num(cpu["step_cpu_share"], 4),
            "wait_cpu_share": _num(cpu["wait_cpu_share"], 4),
            "cpu_sampled_steps": cpu["cpu_sampled_steps"],
            "steps_per_s": _num(len(idx) / float(period.sum()), 4),
            "measured_s": _num(float(period.sum()), 4),
        }
    )
    return out

"""Check 4, adaptive coverage: the adaptive stopping rule (`loaderbench.stats.stopping.StoppingRule`) simulated on
synthetic window-time streams whose true rate is known, to report the confidence its intervals really have.

Streams of window times with mean 1 s and standard deviation `SD` (so the true rate is 1 window per second):
independent normal, heavy-tailed (Student t with 3 degrees of freedom, scaled to the same sd and clipped
symmetrically at `CLIP_SD` sds so a window time stays positive; symmetric clipping keeps the mean), and
AR(1) with lag-1 correlation 0.5 and 0.8 (normal innovations, stationary from the first window). The rule
is driven as the measuring loop drives it: one warm-up batch, then a call at every window edge (calls at
other batches return False and change nothing), until it stops or reaches `MAX_WINDOWS`.

Contract: `adaptive_coverage(trials, seed)` returns {"rows": [one per (stream, target)], ...}; each row holds
trials, coverage (fraction of trials whose final interval, rate x (1 +- half_width_rel) of `rule.last`,
contains the true rate, over the trials that ended with an interval), coverage over the trials that reached
the target, the median windows used, the fraction that reached the target and the fraction left with no
interval. Seeded: the same seed gives the same numbers; pure CPU, no DataLoader.
"""

from __future__ import annotations

import math

import numpy as np

from loaderbench.stats.stopping import MIN_WINDOWS, StoppingRule

SD = 0.05
CLIP_SD = 10.0
TARGETS = (0.01, 0.02)
# name -> (innovations, lag-1 correlation)
STREAMS = {
    "independent normal": ("normal", 0.0),
    "heavy-tailed t3": ("t3", 0.0),
    "AR(1) lag-1 0.5": ("normal", 0.5),
    "AR(1) lag-1 0.8": ("normal", 0.8),
}
WINDOW_BATCHES = 10
WARMUP = 1
# room for a 1% target at sd 5% (about 100 independent windows) even when correlation triples what it needs
MAX_WINDOWS = 400


def window_times(rng: np.random.Generator, trials: int, n: int, kind: str, lag1: float, sd: float = SD) -> np.ndarray:
    """(trials, n) window times with mean 1 and marginal standard deviation `sd`."""
    if kind == "normal":
        e = rng.standard_normal((trials, n))
    elif kind == "t3":
        e = np.clip(rng.standard_t(3, (trials, n)) / math.sqrt(3.0), -CLIP_SD, CLIP_SD)  # t3 has variance 3
    else:
        raise ValueError(f"unknown innovations {kind!r}")
    z = np.empty_like(e)
    z[:, 0] = e[:, 0]
    scale = math.sqrt(1.0 - lag1 * lag1)
    for i in range(1, n):
        z[:, i] = lag1 * z[:, i - 1] + scale * e[:, i]
    return 1.0 + sd * z


def drive_rule(
    times,
    target: float,
    window_batches: int = WINDOW_BATCHES,
    max_windows: int = MAX_WINDOWS,
    min_windows: int = MIN_WINDOWS,
    warmup: int = WARMUP,
) -> StoppingRule:
    """Feed the rule the done-times of the warm-up's last batch and of every window edge after it."""
    rule = StoppingRule(
        warmup=warmup,
        window_batches=window_batches,
        max_windows=max_windows,
        target=target,
        max_seconds=math.inf,
        min_windows=min_windows,
    )
    t = 0.0
    if rule(warmup, t):
        return rule
    for i, x in enumerate(times):
        t += float(x)
        if rule(warmup + (i + 1) * window_batches, t):
            break
    return rule


def outcome(rule: StoppingRule, truth: float) -> dict:
    """Whether the rule's final interval contains `truth` (None when it ended with no interval)."""
    e = rule.last
    covered = None if e is None else bool(abs(e.rate - truth) <= e.half_width_rel * e.rate)
    return {"covered": covered, "windows": len(rule.edges) - 1, "reached": bool(rule.reached)}


def summarize_trials(outcomes: list[dict]) -> dict:
    with_interval = [o for o in outcomes if o["covered"] is not None]
    reached = [o for o in with_interval if o["reached"]]
    n = len(outcomes)
    return {
        "trials": n,
        "coverage": float(np.mean([o["covered"] for o in with_interval])) if with_interval else float("nan"),
        "coverage_when_reached": float(np.mean([o["covered"] for o in reached])) if reached else float("nan"),
        "windows_median": float(np.median([o["windows"] for o in outcomes])) if n else float("nan"),
        "reached_fraction": sum(o["reached"] for o in outcomes) / n if n else float("nan"),
        "no_interval_fraction": (n - len(with_interval)) / n if n else float("nan"),
    }


def coverage_row(stream: str, target: float, trials: int, seed: int) -> dict:
    kind, lag1 = STREAMS[stream]
    # the same streams for every target (common random numbers): targets differ only by the rule
    rng = np.random.default_rng([seed, list(STREAMS).index(stream)])
    times = window_times(rng, trials, MAX_WINDOWS, kind, lag1)
    outcomes = [outcome(drive_rule(x, target), truth=1.0) for x in times]
    return {"stream": stream, "innovations": kind, "lag1": lag1, "target": target, **summarize_trials(outcomes)}


def adaptive_coverage(trials: int, seed: int = 0) -> dict:
    from loaderbench.bench.common import loadavg
    from loaderbench.stats.stopping import CONFIDENCE

    load_start = loadavg()
    rows = [coverage_row(stream, target, trials, seed) for stream in STREAMS for target in TARGETS]
    return {
        "confidence": CONFIDENCE,
        "sd": SD,
        "window_batches": WINDOW_BATCHES,
        "warmup_batches": WARMUP,
        "min_windows": MIN_WINDOWS,
        "max_windows": MAX_WINDOWS,
        "trials": trials,
        "seed": seed,
        "load": {"start": load_start, "end": loadavg()},
        "rows": rows,
    }

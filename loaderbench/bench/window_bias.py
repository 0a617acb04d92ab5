"""Check 3, window bias: loaderbench's measuring window against a bare loop it did not write.

On one core a CPU-bound loader cannot read faster with 8 workers than with none: the core does the same
work either way. A window that opens on a full prefetch pipeline and closes on a drained one credits itself
with batches made before it opened, and reads faster with more workers. So, for the `cpu` workload
(`cpu_work = 15`, batch size 32) on one CPU (`os.sched_setaffinity`, which DataLoader workers inherit), at
`WORKERS` workers:
  a. a bare `for batch in DataLoader(...)` loop in a fresh forked process: `bare_warmup` batches, then
     `BARE_BATCHES` timed ones (the dataset holds one more pipeline's worth, so the epoch never ends inside
     the window); samples/s = samples / seconds;
  b. loaderbench's own cells through the real runner (`loaderbench.measure.runner.run_task`) with warmup_batches = 4 and
     measure_batches = 12 and 120 (the window plan may lengthen a window and add a tail: recorded per run),
repetitions interleaved. Both build their dataset with `loaderbench.workloads.build_dataset` from the same cell
config, so the bare loop does exactly the cell's work.

Repetitions are interleaved, every arm of every worker count once per repetition, in a new order each time. Each
ratio is taken per repetition (its arms measured in the same round), then its median over repetitions with an
order-statistic interval (6 repetitions reach 95%). A goal
is "met" when every interval it reads lies within 1 +- TOLERANCE, "missed" when one lies wholly outside, else
"undecided" (with about how many repetitions would decide it). Where a short window's time goes is read inside
the long window's cells: per repetition, its first WINDOWS[0] batches' mean step time against the rest's
(`step_profile`).

Contract: `window_bias(...)` returns {"runs": [...], "per_workers": {n: medians and ratio intervals},
"eight_over_zero": {arm: interval}, "eight_over_zero_over_bare": {arm: interval},
"verdicts": [{"claim", "status", "detail"}], ...}. The verdicts are measurements, printed by `make bench`; no
test asserts them.
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from loaderbench.bench.common import CONFIDENCE, loadavg, make_cell, median_interval
from loaderbench.bench.fork import forked
from loaderbench.bench.result_tables import fmt_interval
from loaderbench.stats.intervals import n_for_median

WORKERS = (0, 4, 8)
CPU_WORK = 15
BATCH_SIZE = 32
WARMUP_BATCHES = 4
WINDOWS = (12, 120)  # measure_batches of loaderbench's cells: a short and a long window
BARE_BATCHES = 200
# the goal: a window reads what a bare loop reads to within 2% (a window that credits itself with a pipeline's
# worth of batches it did not pay for reads 30% high: 8 workers, 12 batches)
TOLERANCE = 0.02
CLAIM_WORKERS = f"on one core, 8 workers over 0 read within {TOLERANCE:.0%} of the bare loop's 8 over 0"
CLAIM_WINDOWS = f"{WINDOWS[0]}- and {WINDOWS[1]}-batch windows agree within {TOLERANCE:.0%}"


def bare_warmup(num_workers: int, prefetch_factor: int) -> int:
    """Batches the bare loop consumes before its window: twice the prefetch pipeline, and at least 4."""
    return max(4, 2 * num_workers * prefetch_factor)


def time_bare_loop(
    loader: Iterable, warmup: int, batches: int, batch_size: int, clock: Callable[[], float] = time.perf_counter
) -> dict:
    """A bare `for batch in loader`: the window opens when batch `warmup` arrives and closes when batch
    `warmup + batches` does, so it holds `batches` batches."""
    if warmup < 1 or batches < 1:
        raise ValueError("warmup and batches must be at least 1")
    n, t_start = 0, clock()
    t0 = t1 = t_start
    for batch in loader:  # noqa: B007 - the loop is what is measured
        n += 1
        if n == warmup:
            t0 = clock()
        elif n == warmup + batches:
            t1 = clock()
            break
    else:
        raise ValueError(f"the loader ran out after {n} batches; the window needs {warmup + batches}")
    seconds = t1 - t0
    return {
        "samples_per_s": batches * batch_size / seconds if seconds > 0 else float("nan"),
        "seconds": seconds,
        "warmup_batches": warmup,
        "measure_batches": batches,
        "warmup_s": t0 - t_start,
    }


def bias_cell(num_workers: int, measure_batches: int):
    """The cell both arms measure, from the suite's own study parser."""
    return make_cell(
        "cpu",
        num_workers,
        1,
        cpu_work=CPU_WORK,
        batch_size=BATCH_SIZE,
        study={"warmup_batches": WARMUP_BATCHES, "measure_batches": measure_batches},
    )


def _bare_loop_body(config: dict, batches: int, repetition: int) -> dict:
    """Runs in the forked child: one CPU, one thread, the cell's dataset and DataLoader arguments."""
    cpu = sorted(os.sched_getaffinity(0))[0]  # the CPU a one-core cell is pinned to (cellproc.pin_cores)
    os.sched_setaffinity(0, {cpu})
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.multiprocessing as tmp
    from torch.utils.data import DataLoader

    from loaderbench.schema.cell import CellConfig
    from loaderbench.workloads import build_dataset

    # oversubscribing one core is the point here; torch's warning about it would only be noise
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    torch.set_num_threads(1)
    workers, pf = config["num_workers"], config["prefetch_factor"] or 0  # None without workers
    warmup = bare_warmup(workers, pf)
    parts = build_dataset(CellConfig.of(config), (warmup + batches + workers * pf) * BATCH_SIZE)
    kwargs: dict[str, Any] = {"collate_fn": parts.collate_fn}
    if workers:
        kwargs.update(
            multiprocessing_context=tmp.get_context(config["start_method"]),
            prefetch_factor=pf,
            worker_init_fn=parts.worker_init_fn,
        )
    generator = torch.Generator().manual_seed(config["seed"] * 1000 + repetition * 64)
    loader = DataLoader(
        parts.dataset,
        batch_size=BATCH_SIZE,
        shuffle=True,
        drop_last=True,
        num_workers=workers,
        generator=generator,
        **kwargs,
    )
    return {**time_bare_loop(loader, warmup, batches, BATCH_SIZE), "cpu": cpu}


def run_bare(config: dict, batches: int, repetition: int, timeout_s: float = 300.0) -> dict:
    with forked(lambda: _bare_loop_body(config, batches, repetition)) as child:
        child.wait(timeout_s)
    return child.result if child.result is not None else {"error": child.error()}


def _median(xs: list) -> float:
    xs = [x for x in xs if x is not None and np.isfinite(x)]
    return float(np.median(xs)) if xs else float("nan")


def _by_repetition(runs: list[dict], arms: list[tuple[int, str]]) -> list[np.ndarray]:
    """One column per (num_workers, arm), its rows the repetitions in which every one of `arms` measured."""
    nan = float("nan")
    value = {(r["num_workers"], r["arm"], r["repetition"]): float(r.get("samples_per_s") or nan) for r in runs}
    reps = sorted({r["repetition"] for r in runs})
    ok = [rep for rep in reps if all(np.isfinite(value.get((n, a, rep), nan)) for n, a in arms)]
    return [np.asarray([value[(n, a, rep)] for rep in ok], dtype=float) for n, a in arms]


def ratio_interval(runs: list[dict], arms: list[tuple[int, str]]) -> dict:
    """Per repetition, the ratio of the arms' throughputs (two arms: a / b; four: (a / b) / (c / d)), all measured
    in the same interleaved round, so the machine's drift between rounds cancels; then the median of those ratios
    with its order-statistic interval (distribution-free; 6 repetitions reach 95%)."""
    cols = _by_repetition(runs, arms)
    ratio = cols[0] / cols[1] if cols[0].size else cols[0]
    if len(cols) == 4 and ratio.size:
        ratio = ratio / (cols[2] / cols[3])
    return median_interval(ratio)


def _status(iv: dict, tolerance: float) -> str:
    """'met' when the interval lies within 1 +- tolerance, 'missed' when it lies wholly outside, 'undecided' when it
    reaches both, 'n/a' without one (a failed run, or a single repetition)."""
    low, high = iv.get("low"), iv.get("high")
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return "n/a"
    if (iv.get("confidence") or 0) < CONFIDENCE - 1e-9:
        return "n/a"
    if 1 - tolerance <= low and high <= 1 + tolerance:
        return "met"
    if low > 1 + tolerance or high < 1 - tolerance:
        return "missed"
    return "undecided"


def repetitions_to_decide(iv: dict, tolerance: float) -> int | None:
    """About how many repetitions would bring the interval inside 1 +- tolerance, if the estimate held and the
    interval narrowed as 1 / sqrt(n); None where the estimate itself lies outside (no count would meet it)."""
    values = [iv.get(k) for k in ("estimate", "low", "high")]
    n = int(iv.get("n") or 0)
    if not n or any(v is None or not np.isfinite(v) for v in values):
        return None
    est, low, high = (float(v) for v in values)  # type: ignore[arg-type]
    room = tolerance - abs(est - 1)
    if room <= 0:
        return None
    half = (high - low) / 2
    return max(n, math.ceil(round(n * (half / room) ** 2, 9)))


def _verdict(claim: str, intervals: dict, tolerance: float) -> dict:
    """One goal over several intervals (labelled): met when all are, missed when any is, else undecided."""
    statuses = {label: _status(iv, tolerance) for label, iv in intervals.items()}
    values = set(statuses.values())
    status = (
        "n/a"
        if not values or "n/a" in values
        else "missed"
        if "missed" in values
        else "met"
        if values == {"met"}
        else "undecided"
    )
    parts = []
    for label, iv in intervals.items():
        text = f"{label} {fmt_interval(iv, '.3f')}"
        if statuses[label] == "n/a" and 0 < (iv.get("n") or 0) < n_for_median(CONFIDENCE):
            text += f" ({iv['n']} repetitions; a {CONFIDENCE:.0%} interval needs {n_for_median(CONFIDENCE)})"
        if statuses[label] == "undecided":
            need = repetitions_to_decide(iv, tolerance)
            text += f" (about {need} repetitions would decide it)" if need else " (its estimate lies outside)"
        parts.append(text)
    return {"claim": claim, "status": status, "detail": ", ".join(parts)}


def short_window(runs: list[dict], num_workers: int) -> int:
    """The batches the short arm's window measured at this worker count (its plan may lengthen WINDOWS[0] to two
    pipelines): the long window's first batches are compared over that many, so that with workers, whose batches
    arrive in bursts, both spans hold whole bursts."""
    for r in runs:
        if r["num_workers"] == num_workers and r["arm"] == str(WINDOWS[0]) and r.get("window"):
            return int(r["window"]["measure_batches"])
    return WINDOWS[0]


def step_profile(runs: list[dict], num_workers: int, first: int) -> dict:
    """Whether a window's first batches cost more than its later ones, inside the same cell process: per repetition
    of the long window, the mean step time of its first `first` measured batches over that of the rest; then the
    median over repetitions with its order-statistic interval. 1 means no warm-up cost (a burst of the machine's
    other work that lands in the first batches of one repetition moves that repetition only)."""
    ratios = [
        float(np.mean(x[:first]) / np.mean(x[first:]))
        for x in (
            np.asarray(r["step_s"], dtype=float) for r in runs if r["num_workers"] == num_workers and r.get("step_s")
        )
        if x.size > first and np.mean(x[first:]) > 0
    ]
    return median_interval(ratios)


def summarize(runs: list[dict], tolerance: float = TOLERANCE) -> dict:
    """Medians per (num_workers, arm) over repetitions, the per-repetition ratios' medians with their intervals, the
    long window's
    step profile, and the two goals. Arms: "bare", and each window length of `WINDOWS` (as a string key)."""
    arms = ["bare", *map(str, WINDOWS)]
    ns = sorted({r["num_workers"] for r in runs})
    med = {
        n: {a: _median([r.get("samples_per_s") for r in runs if r["num_workers"] == n and r["arm"] == a]) for a in arms}
        for n in ns
    }
    short, long_ = str(WINDOWS[0]), str(WINDOWS[1])
    per = {
        n: {
            "bare_samples_per_s": m["bare"],
            **{f"lb{a}_samples_per_s": m[a] for a in arms[1:]},
            **{f"lb{a}_over_bare": ratio_interval(runs, [(n, a), (n, "bare")]) for a in arms[1:]},
            "short_over_long": ratio_interval(runs, [(n, short), (n, long_)]),
            "first_over_rest": step_profile([r for r in runs if r["arm"] == long_], n, short_window(runs, n)),
        }
        for n, m in med.items()
    }
    eight: dict = {}
    excess: dict = {}
    if len(ns) >= 2:
        lo, hi = ns[0], ns[-1]
        eight = {a: ratio_interval(runs, [(hi, a), (lo, a)]) for a in arms}
        excess = {a: ratio_interval(runs, [(hi, a), (lo, a), (hi, "bare"), (lo, "bare")]) for a in arms[1:]}
    verdicts = []
    if excess:
        lo, hi = ns[0], ns[-1]
        verdicts.append(
            _verdict(
                CLAIM_WORKERS,
                {f"loaderbench {a}-batch {hi}/{lo} over the bare loop's": iv for a, iv in excess.items()},
                tolerance,
            )
        )
    if per:
        verdicts.append(
            _verdict(CLAIM_WINDOWS, {f"{n} workers": p["short_over_long"] for n, p in per.items()}, tolerance)
        )
    return {"per_workers": per, "eight_over_zero": eight, "eight_over_zero_over_bare": excess, "verdicts": verdicts}


def measured_step_s(raw: dict | None, window: dict | None) -> list[float] | None:
    """The measured batches' step times of a record's first epoch (each from the step before it was done to its own
    step done, as the window counts them), from its per-batch times."""
    if not raw or not window or not raw.get("done"):
        return None
    done = raw["done"][0]
    start = window["warmup_batches"]
    end = min(start + window["measure_batches"], len(done))
    if start < 1 or end <= start:
        return None
    return [done[b] - done[b - 1] for b in range(start, end)]


def window_bias(
    repetitions: int,
    bare_batches: int,
    host_env: dict,
    probe_interval_s: float,
    timeout_s: float = 300.0,
    seed: int = 0,
) -> dict:
    from loaderbench.measure.runner import run_task
    from loaderbench.schema.cell import Task
    from loaderbench.schema.store import Store

    runs: list[dict] = []
    load_start = loadavg()
    with tempfile.TemporaryDirectory(prefix="loaderbench-bench-window-") as tmp:
        store = Store(tmp)
        rng = random.Random(seed)
        for rep in range(repetitions):  # interleaved: every arm of every worker count once per repetition
            order = [(n, arm) for n in WORKERS for arm in ("bare", *WINDOWS)]
            rng.shuffle(order)  # in a new order every repetition, so a drift of the machine favours no arm
            for n, arm in order:
                if arm == "bare":
                    bare = run_bare(bias_cell(n, WINDOWS[0]).config, bare_batches, rep, timeout_s)
                    runs.append({"num_workers": n, "arm": "bare", "repetition": rep, "load": loadavg(), **bare})
                    continue
                rec = run_task(
                    Task("bench-window", bias_cell(n, int(arm)), rep),
                    store,
                    host_env,
                    None,
                    timeout_s=timeout_s,
                    probe_interval_s=probe_interval_s,
                )
                window = rec.metric("window")
                row = {
                    "num_workers": n,
                    "arm": str(arm),
                    "repetition": rep,
                    "status": rec.status,
                    "samples_per_s": rec.samples_per_s if rec.ok else None,
                    "window": window,
                    "step_s": measured_step_s(rec.raw, window) if rec.ok else None,
                    "load": loadavg(),
                }
                if not rec.ok:
                    row["error"] = rec.error
                runs.append(row)
    return {
        "workload": "cpu",
        "cpu_work": CPU_WORK,
        "batch_size": BATCH_SIZE,
        "cores": 1,
        "workers": list(WORKERS),
        "windows": list(WINDOWS),
        "warmup_batches": WARMUP_BATCHES,
        "bare_batches": bare_batches,
        "repetitions": repetitions,
        "tolerance": TOLERANCE,
        "seed": seed,
        "load": {"start": load_start, "end": loadavg()},
        "runs": runs,
        **summarize(runs),
    }

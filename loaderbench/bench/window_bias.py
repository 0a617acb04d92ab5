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

Contract: `window_bias(...)` returns {"runs": [...], "per_workers": {n: medians and ratios},
"eight_over_zero": {bare, 12, 120}, "verdicts": [{"claim", "passed", "detail"}], ...}. The verdicts are
measurements, printed by `make bench`; no test asserts them.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from loaderbench.bench.common import loadavg, make_cell
from loaderbench.bench.fork import forked

WORKERS = (0, 4, 8)
CPU_WORK = 15
BATCH_SIZE = 32
WARMUP_BATCHES = 4
WINDOWS = (12, 120)  # measure_batches of loaderbench's cells: a short and a long window
BARE_BATCHES = 200
# a window that credits itself with a pipeline's worth of batches it did not pay for reads 30% high (8
# workers, 12 batches); 5% is well above the run-to-run noise of a CPU-bound cell on an idle core
TOLERANCE = 0.05
CLAIM_WORKERS = f"on one core, 8 workers read at most {TOLERANCE:.0%} above 0 workers"
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


def _ratio(a: float, b: float) -> float:
    return a / b if b and np.isfinite(a) and np.isfinite(b) and b > 0 else float("nan")


def _worst(values: list[float]) -> float:
    """The largest value, or NaN when any is missing (a failed run leaves nothing to judge)."""
    return max(values) if values and all(np.isfinite(v) for v in values) else float("nan")


def _verdict(claim: str, worst: float, detail: str) -> dict:
    """passed: True or False as measured; None when a run failed and there is nothing to judge."""
    passed = bool(worst <= TOLERANCE) if np.isfinite(worst) else None
    return {"claim": claim, "passed": passed, "detail": detail}


def summarize(runs: list[dict]) -> dict:
    """Medians per (num_workers, arm) over repetitions, their ratios, and the two verdicts. Arms: "bare",
    and each window length of `WINDOWS` (as a string key)."""
    arms = ["bare", *map(str, WINDOWS)]
    med = {
        n: {a: _median([r.get("samples_per_s") for r in runs if r["num_workers"] == n and r["arm"] == a]) for a in arms}
        for n in sorted({r["num_workers"] for r in runs})
    }
    short, long_ = str(WINDOWS[0]), str(WINDOWS[1])
    per = {
        n: {
            "bare_samples_per_s": m["bare"],
            **{f"lb{a}_samples_per_s": m[a] for a in arms[1:]},
            **{f"lb{a}_over_bare": _ratio(m[a], m["bare"]) for a in arms[1:]},
            "short_over_long": _ratio(m[short], m[long_]),
        }
        for n, m in med.items()
    }
    lo, hi = min(med, default=None), max(med, default=None)
    eight = {a: _ratio(med[hi][a], med[lo][a]) for a in arms} if med and hi != lo else {}
    verdicts = []
    if eight:
        excess = _worst([eight[a] - 1 for a in arms[1:]])  # loaderbench's windows; the bare loop is the reference
        verdicts.append(
            _verdict(
                CLAIM_WORKERS,
                excess,
                f"{hi} over {lo} workers: "
                + ", ".join(
                    f"{'bare loop' if a == 'bare' else 'loaderbench ' + a + '-batch'} {eight[a]:.3f}" for a in arms
                ),
            )
        )
    if per:
        gap = _worst([abs(p["short_over_long"] - 1) for p in per.values()])
        verdicts.append(
            _verdict(CLAIM_WINDOWS, gap, ", ".join(f"{n} workers {p['short_over_long']:.3f}" for n, p in per.items()))
        )
    return {"per_workers": per, "eight_over_zero": eight, "verdicts": verdicts}


def window_bias(
    repetitions: int, bare_batches: int, host_env: dict, probe_interval_s: float, timeout_s: float = 300.0
) -> dict:
    from loaderbench.measure.runner import run_task
    from loaderbench.schema.cell import Task
    from loaderbench.schema.store import Store

    runs: list[dict] = []
    load_start = loadavg()
    with tempfile.TemporaryDirectory(prefix="loaderbench-bench-window-") as tmp:
        store = Store(tmp)
        for rep in range(repetitions):  # interleaved: every arm of every worker count once per repetition
            for n in WORKERS:
                bare = run_bare(bias_cell(n, WINDOWS[0]).config, bare_batches, rep, timeout_s)
                runs.append({"num_workers": n, "arm": "bare", "repetition": rep, "load": loadavg(), **bare})
                for mb in WINDOWS:
                    rec = run_task(
                        Task("bench-window", bias_cell(n, mb), rep),
                        store,
                        host_env,
                        None,
                        timeout_s=timeout_s,
                        probe_interval_s=probe_interval_s,
                    )
                    row = {
                        "num_workers": n,
                        "arm": str(mb),
                        "repetition": rep,
                        "status": rec.status,
                        "samples_per_s": rec.samples_per_s if rec.ok else None,
                        "window": rec.metric("window"),
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
        "load": {"start": load_start, "end": loadavg()},
        "runs": runs,
        **summarize(runs),
    }

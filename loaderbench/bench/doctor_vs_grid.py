"""Part 10, the doctor against a grid: does `loaderbench doctor --tune` recommend, in one run of the user's script,
a setting as good as the best a grid of full runs finds, for a fraction of the grid's cost?

For each loop kind of loaderbench.bench.doctor_loop (I/O-bound, CPU-bound, not data-bound), started with
num_workers = 0:
  a. the grid: one full run of the loop per setting (num_workers x persistent_workers), each a fresh process;
     its cost is their wall time together, its choice the setting with the most steps per second;
  b. the doctor: `loaderbench doctor --tune --stop -- python -m loaderbench.bench.doctor_loop ...` once; its cost
     is that run's wall time, its choice the line it offers to paste (validated in the loop), else the loop's own
     setting;
  c. both choices run again, `holdout` fresh runs each, interleaved: the fraction of the best is the median of the
     doctor's choice over that of the grid's (the grid's own reading of its best is the best of many noisy ones,
     and reads high).
Targets, reported and not asserted: at least 95% of the grid's best for at most 30% of its cost.

Contract: `doctor_vs_grid(kinds, workers, holdout)` returns, per kind, the grid's runs and choice, the doctor's
run and choice, the holdout runs, `fraction_of_best` (an interval) and `cost_ratio`.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loaderbench.bench.common import loadavg, median_interval

TARGET_FRACTION = 0.95
TARGET_COST = 0.30
LOOP = [sys.executable, "-m", "loaderbench.bench.doctor_loop"]
DOCTOR_ARGS = (
    *("--steps", "40", "--warmup", "5", "--headspace-steps", "10"),
    *("--tune", "--budget-s", "10", "--rounds", "4", "--round-steps", "10", "--stop"),
)


def _env() -> dict:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}


def setting_args(setting: dict) -> list[str]:
    """The loop's command-line arguments for a DataLoader setting."""
    args = ["--num-workers", str(setting.get("num_workers", 0))]
    if setting.get("num_workers") and setting.get("prefetch_factor"):
        args += ["--prefetch-factor", str(setting["prefetch_factor"])]
    if setting.get("num_workers") and setting.get("persistent_workers"):
        args.append("--persistent-workers")
    return args


def full_run(kind: str, setting: dict, timeout_s: float = 600.0) -> dict:
    """One full run of the loop: its steps per second, and the wall time the run took (its cost)."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [*LOOP, "--kind", kind, *setting_args(setting)], capture_output=True, text=True, env=_env(), timeout=timeout_s
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        return {"setting": setting, "wall_s": wall, "error": out.stderr[-500:]}
    return {"setting": setting, "wall_s": wall, **json.loads(out.stdout.strip().splitlines()[-1])}


def grid_settings(workers: tuple[int, ...]) -> list[dict]:
    """num_workers, and with workers, persistent or not: the settings the doctor may change that a grid can run."""
    out = []
    for n, persistent in itertools.product(workers, (False, True)):
        if n == 0 and persistent:
            continue
        out.append({"num_workers": n, "persistent_workers": persistent} if n else {"num_workers": 0})
    return out


def doctor_choice(doc: dict, start: dict) -> dict:
    """The setting the doctor recommends: the validated changes it offers to paste, on top of the loop's own
    setting; the loop's own where it offers none."""
    loaders = [lo for p in doc.get("processes", []) for lo in p.get("loaders", [])]
    if not loaders or not loaders[0].get("paste"):
        return dict(start)
    changes = (loaders[0].get("in_loop") or {}).get("changes") or (loaders[0].get("tune") or {}).get("changes") or {}
    return {**start, **{k: v for k, v in changes.items() if v is not None}}


def doctor_run(kind: str, start: dict, timeout_s: float = 900.0) -> dict:
    with tempfile.TemporaryDirectory(prefix="loaderbench-bench-doctor-") as tmp:
        cmd = [sys.executable, "-m", "loaderbench", "doctor", "--out", tmp, *DOCTOR_ARGS, "--"]
        cmd += [*LOOP, "--kind", kind, "--epochs", "1000", *setting_args(start)]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout_s, cwd=tmp)
        wall = time.perf_counter() - t0
        path = Path(tmp) / "doctor.json"
        if out.returncode != 0 or not path.is_file():
            return {"wall_s": wall, "error": out.stderr[-800:], "choice": dict(start)}
        doc = json.loads(path.read_text())
    return {"wall_s": wall, "choice": doctor_choice(doc, start)}


def best_of(runs: list[dict]) -> dict | None:
    ok = [r for r in runs if r.get("steps_per_s")]
    return max(ok, key=lambda r: r["steps_per_s"])["setting"] if ok else None


def score(grid: list[dict], doctor: dict, holdout: list[dict]) -> dict:
    """Cost ratio, and the fraction of the best from the holdout runs paired by repetition."""
    grid_cost = sum(r["wall_s"] for r in grid)
    by_rep: dict[int, dict[str, float]] = {}
    for r in holdout:
        if r.get("steps_per_s"):
            by_rep.setdefault(r["repetition"], {})[r["arm"]] = r["steps_per_s"]
    ratios = [v["doctor"] / v["grid"] for v in by_rep.values() if {"doctor", "grid"} <= set(v)]
    fraction = median_interval(ratios)
    cost = doctor["wall_s"] / grid_cost if grid_cost > 0 else float("nan")
    met = fraction["estimate"] >= TARGET_FRACTION and cost <= TARGET_COST if ratios else None
    return {"fraction_of_best": fraction, "cost_ratio": cost, "grid_cost_s": grid_cost, "met": met}


def doctor_vs_grid(kinds: tuple[str, ...], workers: tuple[int, ...], holdout: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    start = {"num_workers": 0}
    out: dict = {"kinds": {}, "workers": list(workers), "holdout": holdout, "load_start": loadavg()}
    for kind in kinds:
        settings = grid_settings(workers)
        rng.shuffle(settings)
        grid = [full_run(kind, s) for s in settings]
        doctor = doctor_run(kind, start)
        best = best_of(grid)
        holdout_runs: list[dict] = []
        if best is not None:
            for rep in range(holdout):
                arms = [("doctor", doctor["choice"]), ("grid", best)]
                rng.shuffle(arms)
                for arm, setting in arms:
                    holdout_runs.append({"arm": arm, "repetition": rep, **full_run(kind, setting)})
        out["kinds"][kind] = {
            "grid": grid,
            "grid_choice": best,
            "doctor": doctor,
            "holdout_runs": holdout_runs,
            **score(grid, doctor, holdout_runs),
        }
    out["load_end"] = loadavg()
    return out

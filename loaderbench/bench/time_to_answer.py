"""Experiment 3, time to answer: a subset of the quick study run end to end by `python -m loaderbench run`, and the
same cells run as one fresh `python .../loaderbench/bench/script.py ...` process per cell and repetition, timed from
outside (the command-wrapping approach, like hyperfine), interleaved (half wrapped, the suite, half wrapped).

Contract: `time_to_answer(cells, repetitions)` returns wall times of both approaches, the suite's fixed cost,
`speedup` (wrapped wall over suite wall, bootstrapped over cell repetitions), `throughput_agreement` (the
median over cells of suite/wrapped median throughput, with its order-statistic interval; both intervals
`loaderbench.stats.bootstrap.EstimateInterval` as dicts), and
a model of the whole quick study. Both approaches run every cell's epoch as `loaderbench.study.window.plan_window` sizes
it: the script is handed the cell's warm-up, window and tail.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from loaderbench.bench.common import IMAGES, cores, describe, loadavg, median_interval
from loaderbench.locations import shipped_studies
from loaderbench.schema.record import Record
from loaderbench.stats.bootstrap import sum_ratio_ci

QUICK = shipped_studies()["quick"]


def script_file() -> Path:
    """The baseline script's file, where the import system finds the package. It runs as a file (no package
    import before its clock starts), so its path is looked up rather than the module imported."""
    spec = importlib.util.find_spec("loaderbench.bench.script")
    if spec is None or spec.origin is None:
        raise RuntimeError("loaderbench.bench.script is not importable: is loaderbench installed whole?")
    return Path(spec.origin)


# (workload, num_workers, cores): the quick study's story in six cells: I/O-bound loading scaling past the
# cores (sleep 0 -> 2 -> 4 workers), CPU-bound loading (cpu 0 -> 2), and real JPEG decoding at 2 workers.
TTA_CELLS = (("sleep", 0, 1), ("sleep", 2, 2), ("sleep", 4, 2), ("cpu", 0, 1), ("cpu", 2, 2), ("jpeg", 2, 2))
TTA_CELLS_QUICK = (("sleep", 0, 1), ("sleep", 2, 2), ("cpu", 2, 2))

# axes the one-configuration script does not reproduce: a cell using them would not be the same work
SCRIPT_DEFAULTS = {
    "batched": False,
    "step_ms": 0.0,
    "persistent_workers": False,
    "pin_memory": False,
    "in_order": True,
    "epochs": 1,
    "tensors_per_sample": 1,
}


def _toml_value(v) -> str:
    return json.dumps(v) if not isinstance(v, bool) else ("true" if v else "false")


def tta_study_text(cells, repetitions: int, base: Path = QUICK) -> str:
    """A study holding exactly `cells` of the quick study, with its measuring settings and dataset: the quick
    study's other axes as they are, this union of (workload, num_workers, cores), and one [[exclude]] per
    combination of the union that is not wanted."""
    import tomllib

    raw = tomllib.loads(base.read_text())
    study = {k: v for k, v in raw["study"].items() if k not in ("name", "description", "repetitions")}
    # other axes at the quick study's first value (e.g. jpeg_stage "full", not its decode-only reference cells)
    matrix = {
        k: (v[0] if isinstance(v, list) else v)
        for k, v in raw.get("matrix", {}).items()
        if k not in ("workload", "num_workers", "cores")
    }
    cells = [(w, n, cores(c)) for w, n, c in cells]
    axes = {
        "workload": sorted({c[0] for c in cells}),
        "num_workers": sorted({c[1] for c in cells}),
        "cores": sorted({c[2] for c in cells}),
    }
    lines = [
        "# written by loaderbench.bench: a subset of the shipped quick study (its measuring settings and dataset)",
        "[study]",
        'name = "bench-tta"',
        f"repetitions = {repetitions}",
    ]
    lines += [f"{k} = {_toml_value(v)}" for k, v in study.items()]
    lines += ["", "[dataset]"] + [f"{k} = {_toml_value(v)}" for k, v in raw.get("dataset", {}).items()]
    lines += ["", "[matrix]"] + [f"{k} = {_toml_value(v)}" for k, v in {**axes, **matrix}.items()]
    for combo in itertools.product(axes["workload"], axes["num_workers"], axes["cores"]):
        if combo not in cells:
            lines += ["", "[[exclude]]", f'workload = "{combo[0]}"', f"num_workers = {combo[1]}", f"cores = {combo[2]}"]
    return "\n".join(lines) + "\n"


def script_args(config: dict) -> list[str]:
    """The script's arguments for the work of one cell, its epoch as the cell's window plan sizes it."""
    from loaderbench.schema.cell import CellConfig
    from loaderbench.study.window import plan_window

    plan = plan_window(CellConfig.of(config))
    return [
        "--workload",
        config["workload"],
        "--workers",
        str(config["num_workers"]),
        "--cores",
        str(config["cores"]),
        "--batch-size",
        str(config["batch_size"]),
        "--warmup",
        str(plan.warmup),
        "--batches",
        str(plan.measure),
        "--tail",
        str(plan.tail),
        "--prefetch-factor",
        str(config["prefetch_factor"] or 2),
        "--sleep-ms",
        str(config["sleep_ms"] or 0),
        "--cpu-work",
        str(config["cpu_work"] or 1),
        "--sample-kb",
        str(config["sample_kb"] or 12.0),
        "--decoder",
        config["decoder"] or "pil",
        "--images",
        str(IMAGES),
        "--seed",
        str(config["seed"]),
        *(["--start-method", config["start_method"]] if config["num_workers"] else []),
    ]


def script_mismatch(config: dict) -> list[str]:
    return [f"{k}={config[k]!r}" for k, v in SCRIPT_DEFAULTS.items() if config.get(k) not in (None, v)]


def _run_script(config: dict, repetition: int) -> dict:
    cmd = [sys.executable, str(script_file()), *script_args(config), "--repetition", str(repetition)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    row: dict[str, Any] = {"wall_s": wall, "returncode": proc.returncode}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode == 0 and lines:
        row.update(json.loads(lines[-1]))
    else:
        row["error"] = (proc.stderr or proc.stdout)[-1000:]
    return row


def _cell_s(rec: Record) -> float:
    return rec.wall_s or 0.0


def _run_both(study_path: Path, results: Path, order: list) -> tuple[dict, dict]:
    """The wrapped runs of the first half, the suite on all, the wrapped runs of the second half."""
    wrapped: dict[tuple[str, int], dict] = {}
    half = len(order) // 2

    def wrap(tasks):
        for task in tasks:
            row = _run_script(task.cell.config, task.repetition)
            row.update(cell_id=task.cell.cell_id, repetition=task.repetition, cell=describe(task.cell))
            wrapped[(task.cell.cell_id, task.repetition)] = row

    load = {"before": loadavg()}
    t = time.perf_counter()
    wrap(order[:half])
    wrapped_s = time.perf_counter() - t
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "loaderbench", "run", str(study_path), "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    suite_wall = time.perf_counter() - t0
    load["after_suite"] = loadavg()
    t = time.perf_counter()
    wrap(order[half:])
    wrapped_s += time.perf_counter() - t
    load["after"] = loadavg()
    out = {"load": load, "suite_wall_s": suite_wall, "suite_returncode": proc.returncode, "wrapped_wall_s": wrapped_s}
    if proc.returncode != 0:
        out["suite_error"] = proc.stderr[-2000:]
    return out, wrapped


def time_to_answer(cells, repetitions: int) -> dict:
    from loaderbench.schema.store import Store
    from loaderbench.study.plan import pending_tasks
    from loaderbench.study.study_file import load_study

    with tempfile.TemporaryDirectory(prefix="loaderbench-bench-tta-") as tmp:
        study_path = Path(tmp) / "bench-tta.toml"
        study_path.write_text(tta_study_text(cells, repetitions))
        results = Path(tmp) / "results"
        study = load_study(study_path)
        order = pending_tasks(study, Store(results))  # the suite's own interleaved order
        runs, wrapped = _run_both(study_path, results, order)
        records = {(rec.cell_id, rec.repetition): rec for _, rec in Store(results).records(study.name) if rec}
    mismatch = sorted({m for t in order for m in script_mismatch(t.cell.config)})
    out: dict[str, Any] = {
        "cells": [describe(c) for c in study.cells],
        "repetitions": repetitions,
        "script_cannot_reproduce": mismatch,
        "runs": len(order),
        "measure_batches": study.settings.measure_batches,
        "warmup_batches": study.settings.warmup_batches,
        **runs,
    }
    keys = [(t.cell.cell_id, t.repetition) for t in order]
    ok = [k for k in keys if k in records and records[k].ok and "samples_per_s" in wrapped[k]]
    out["failed"] = len(keys) - len(ok)
    suite_cells = [_cell_s(records[k]) for k in ok]
    wrapped_walls = [wrapped[k]["wall_s"] for k in ok]
    fixed = out["suite_wall_s"] - sum(_cell_s(records[k]) for k in keys if k in records)
    out["suite_fixed_s"] = fixed  # interpreter start-up, torch import, study load, dataset check: paid once
    out["suite_cell_s_mean"] = float(np.mean(suite_cells)) if suite_cells else None
    out["wrapped_run_s_mean"] = float(np.mean(wrapped_walls)) if wrapped_walls else None
    startup = [wrapped[k]["wall_s"] - wrapped[k]["loop_s"] for k in ok]
    out["wrapped_startup_s_mean"] = float(np.mean(startup)) if startup else None  # interpreter + imports + setup
    out["wrapped_import_s_mean"] = float(np.mean([wrapped[k]["import_s"] for k in ok])) if ok else None
    # how many times sooner the suite gives the same answer; each run of a cell by the suite is paired with the
    # wrapped run of the same cell and repetition
    out["speedup"] = sum_ratio_ci(wrapped_walls, suite_cells, den_offset=max(fixed, 0.0))._asdict()
    per_cell = {}
    for cell in study.cells:
        s = [records[k].samples_per_s for k in ok if k[0] == cell.cell_id]
        w = [wrapped[k]["samples_per_s"] for k in ok if k[0] == cell.cell_id]
        if s and w:
            per_cell[describe(cell)] = {
                "suite_samples_per_s": float(np.median(s)),
                "wrapped_samples_per_s": float(np.median(w)),
                "ratio": float(np.median(s) / np.median(w)),
            }
    out["per_cell"] = per_cell
    if per_cell:  # the same answer? per-cell median throughput, suite over wrapped
        out["throughput_agreement"] = median_interval([v["ratio"] for v in per_cell.values()])
    out["quick_study_model"] = _quick_study_model(out, fixed)
    out["per_run"] = [
        {
            **{k: v for k, v in wrapped[k].items() if k not in ("pid",)},
            "suite_cell_s": _cell_s(records[k]) if k in records else None,
        }
        for k in keys
        if k in wrapped
    ]
    return out


def _quick_study_model(out: dict, fixed: float) -> dict:
    """The whole quick study: N runs of mean cell time c, per-process tax d, suite fixed cost S."""
    from loaderbench.study.study_file import load_study

    try:
        quick = load_study(QUICK)
        n = len(quick.cells) * quick.settings.repetitions
        c, d = out["suite_cell_s_mean"], out["wrapped_run_s_mean"] - out["suite_cell_s_mean"]
        return {"runs": n, "suite_s": fixed + n * c, "wrapped_s": n * (c + d), "speedup": n * (c + d) / (fixed + n * c)}
    except Exception as exc:  # noqa: BLE001 - a model only
        return {"error": str(exc)}

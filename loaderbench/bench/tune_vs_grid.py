"""Experiment 7, tune against the grid: on the same matrices, in the same run, `loaderbench tune` and the full
grid (every cell x the study's repetitions), each through the real runner into its own records.

The matrices are the quick study's, one per workload (sleep, cpu, jpeg; num_workers 0..8; 1 and 2 cores;
its measuring settings and dataset), so each has one scenario per core count. `--quick`: sleep and cpu on
one core, num_workers 0, 1, 2, 4. The matrices alternate which of the two runs first, so a drift of the
machine's load does not favour one of them.

Per scenario: tune's cell-seconds over the grid's (`fraction_of_cost`; a cell-second is a cell repetition's
start to end, as in the records), and the throughput of the setting tune chose over that of the setting the
grid chose (`fraction_of_best`). The grid chooses the cell of highest median; that median is the highest of
seven noisy ones and reads high (the winner's curse: by about one median's spread where settings tie), so
against it even the grid's own choice, measured again, falls short. So both chosen settings are measured
again after both runs, `HOLDOUT_REPETITIONS` fresh repetitions each, interleaved, and `fraction_of_best` is
the ratio of those medians, with their distribution-free comparison (loaderbench.stats.comparison.compare, 5% effect, at
`CONFIDENCE`); where tune chose the grid's setting it is 1 without measuring. The ratio on the grid's own
records (`fraction_of_best_in_grid`) and how far the grid's best read above its re-measurement
(`grid_best_over_holdout`) are reported beside it. Targets reported against, never asserted: at least
`TARGET_OF_BEST` of the grid's best for at most `TARGET_OF_COST` of its cell-seconds.

`control`: the grid is measured twice as many repetitions, and its second half (repetitions 3-5, a second
grid of the same cells, interleaved in the same run) chooses too; its choice is measured again with the others
and scored against the first grid's like tune's. How often a second full grid reaches 95% of the first one's
best is the noise floor of the target on this machine: what no search can beat from the same measurements.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from loaderbench.bench.common import cores, loadavg
from loaderbench.locations import shipped_studies
from loaderbench.schema.record import Record

QUICK_STUDY = shipped_studies()["quick"]
MATRICES = ("sleep", "cpu", "jpeg")
MATRICES_QUICK = ("sleep", "cpu")
WORKERS_QUICK = (0, 1, 2, 4)
TARGET_OF_BEST = 0.95
TARGET_OF_COST = 0.30
CONFIDENCE = 0.90  # of the comparisons of two cells (what 3 v 3 repetitions reach)
HOLDOUT_REPETITIONS = 8  # fresh repetitions of each chosen setting, to score tune's choice against the grid's


def _toml(v: Any) -> str:
    import json

    return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)


def matrix_study_text(workload: str, quick: bool, base: Path = QUICK_STUDY, repetitions: int | None = None) -> str:
    """The quick study's matrix for one workload (its settings, dataset and other axes), full JPEG pipeline
    only; with `quick`, one core and num_workers 0, 1, 2, 4; `repetitions` replaces the study's."""
    import tomllib

    raw = tomllib.loads(base.read_text())
    study = {k: v for k, v in raw["study"].items() if k not in ("name", "description")}
    if repetitions is not None:
        study["repetitions"] = repetitions
    matrix = dict(raw["matrix"])
    matrix["workload"] = [workload]
    matrix["jpeg_stage"] = ["full"]
    matrix["cores"] = [1] if quick else sorted({cores(c) for c in matrix["cores"]})
    if quick:
        matrix["num_workers"] = list(WORKERS_QUICK)
    lines = [
        f"# written by loaderbench.bench: the matrix of {base.name} for the {workload} workload",
        "[study]",
        f'name = "bench-tune-{workload}"',
    ] + [f"{k} = {_toml(v)}" for k, v in study.items()]
    lines += ["", "[dataset]"] + [f"{k} = {_toml(v)}" for k, v in raw.get("dataset", {}).items()]
    lines += ["", "[matrix]"] + [f"{k} = {_toml(v)}" for k, v in matrix.items()]
    return "\n".join(lines) + "\n"


def grid_cells(records: Iterable[Record | None], repetitions: range | None = None) -> dict[str, dict[str, Any]]:
    """Per cell id: its num_workers, the ok samples_per_s of the grid's records and their cell-seconds (ok or
    not); of the repetitions in `repetitions` only, when given (one grid of a doubled one). None: no record."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        if rec is None or (repetitions is not None and rec.repetition not in repetitions):
            continue
        row = out.setdefault(rec.cell_id, {"values": [], "cell_s": 0.0, "num_workers": rec.setting("num_workers")})
        row["cell_s"] += max(0.0, rec.wall_s or 0.0)
        if rec.ok and rec.samples_per_s is not None:
            row["values"].append(float(rec.samples_per_s))
    return out


def scenario_row(scenario: dict[str, Any], cell_ids: list[str], grid: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One scenario of tune.json against the grid's records of the same cells: the cost, the two chosen
    settings and the ratio of their medians on the grid's records (`fraction_of_best_in_grid`)."""
    from loaderbench.stats.comparison import compare

    medians = {cid: float(np.median(grid[cid]["values"])) for cid in cell_ids if grid.get(cid, {}).get("values")}
    grid_s = sum(grid[cid]["cell_s"] for cid in cell_ids if cid in grid)
    tune_s = scenario["cost"]["cell_seconds"]
    row: dict[str, Any] = {
        "scenario": scenario["label"],
        "grid_cell_seconds": grid_s,
        "tune_cell_seconds": tune_s,
        "fraction_of_cost": tune_s / grid_s if grid_s else None,
        "tune_measurements": scenario["cost"]["measurements"],
        "grid_measurements": sum(len(grid.get(cid, {}).get("values", [])) for cid in cell_ids),
        "grid_estimate_cell_seconds": scenario["cost"]["grid_cell_seconds_estimate"],
        "fraction_of_best": None,
        "fraction_of_best_in_grid": None,
        "tune_steps": scenario.get("steps", []),
    }
    answer = scenario["answer"]
    if answer is None or not medians:
        return {**row, "verdict": "no answer" if answer is None else "grid failed"}
    best_id = max(medians, key=medians.get)
    tuned_id = answer["cell_id"]
    row.update(
        tuned=answer["settings"],
        tuned_cell=tuned_id,
        tuned_tune_median=answer["median"],
        tuned_grid_median=medians.get(tuned_id),
        grid_best_cell=best_id,
        grid_best_median=medians[best_id],
        grid_best_num_workers=grid[best_id]["num_workers"],
    )
    if tuned_id not in medians:
        return {**row, "verdict": "the grid has no ok record of the tuned setting"}
    row["fraction_of_best_in_grid"] = medians[tuned_id] / medians[best_id]
    if tuned_id == best_id:
        return {**row, "fraction_of_best": 1.0, "verdict": "the grid's best"}
    cmp = compare(grid[best_id]["values"], grid[tuned_id]["values"], min_effect=0.05, confidence=CONFIDENCE)
    row["in_grid_comparison"] = f"{cmp.verdict} {cmp.interval_text()}"
    return row


def control_row(
    row: dict[str, Any], cell_ids: list[str], grid: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The second grid's choice (its highest median) beside tune's, on the first grid's records: `control`
    holds its cell, and its fraction of the best once scored (1 where it chose the first grid's best)."""
    medians = {cid: float(np.median(second[cid]["values"])) for cid in cell_ids if second.get(cid, {}).get("values")}
    if not medians or row.get("grid_best_cell") is None:
        return {**row, "control": None}
    cid = max(medians, key=medians.get)
    control = {"cell": cid, "num_workers": second[cid]["num_workers"], "fraction_of_best": None}
    if cid == row["grid_best_cell"]:
        control.update(fraction_of_best=1.0, verdict="the grid's best")
    return {**row, "control": control}


def control_scores(row: dict[str, Any], chosen: list[float], best: list[float]) -> dict[str, Any]:
    """Score the second grid's choice on fresh repetitions like tune's (`chosen`, `best`: the ok samples_per_s)."""
    return {**row, "control": {**row["control"], **_fresh_ratio(chosen, best)}}


def holdout_scores(row: dict[str, Any], tuned: list[float], best: list[float]) -> dict[str, Any]:
    """Score a scenario whose two chosen settings differ on their fresh repetitions (`tuned`, `best`: the ok
    samples_per_s of each): the ratio of medians, its comparison, and how far the grid's best read high."""
    out = {
        **row,
        "holdout": {"repetitions": HOLDOUT_REPETITIONS, "tuned": tuned, "best": best},
        **_fresh_ratio(tuned, best),
    }
    if tuned and best:
        out["grid_best_over_holdout"] = row["grid_best_median"] / float(np.median(best))
    return out


def _fresh_ratio(chosen: list[float], best: list[float]) -> dict[str, Any]:
    """A choice against the grid's best on fresh repetitions: the ratio of medians and its comparison (5% effect,
    `CONFIDENCE`), or that a re-measurement failed."""
    from loaderbench.stats.comparison import compare

    if not chosen or not best:
        return {"verdict": "a re-measurement failed"}
    cmp = compare(best, chosen, min_effect=0.05, confidence=CONFIDENCE)
    return {
        "fraction_of_best": float(np.median(chosen)) / float(np.median(best)),
        "verdict": cmp.verdict,
        "comparison": cmp.interval_text(),
    }


def _remeasure(study, rows: list[dict[str, Any]], cells: dict[str, Any], root: Path) -> list[dict[str, Any]]:
    """Fresh repetitions of both chosen settings of every scenario where they differ, interleaved (every
    cell's repetition r before any r + 1), as records of the study `<name>-holdout`; the rows, scored."""
    from loaderbench.launch.base import CellSettings, TaskRunner, dataset_spec
    from loaderbench.schema.cell import Task
    from loaderbench.schema.store import Store
    from loaderbench.tune.trials import observation

    todo = [r for r in rows if r.get("fraction_of_best_in_grid") is not None and r["tuned_cell"] != r["grid_best_cell"]]
    control = [r for r in rows if r.get("control") and r["control"]["fraction_of_best"] is None]
    if not todo and not control:
        return rows
    store, settings, name = Store(root), CellSettings.of(study), f"{study.name}-holdout"
    runner = TaskRunner(dataset_spec(study))
    values: dict[str, list[float]] = {}
    pairs = [(r["tuned_cell"], r["grid_best_cell"]) for r in todo] + [
        (r["control"]["cell"], r["grid_best_cell"]) for r in control
    ]
    for rep in range(HOLDOUT_REPETITIONS):
        for cid in dict.fromkeys(c for pair in pairs for c in pair):
            obs = observation(runner.run(Task(name, cells[cid], rep), store, settings), "samples_per_s", False)
            values.setdefault(cid, [])
            if obs.ok:
                values[cid].append(obs.value)
    redo, recontrol = {id(r) for r in todo}, {id(r) for r in control}
    out = []
    for r in rows:
        scored = holdout_scores(r, values[r["tuned_cell"]], values[r["grid_best_cell"]]) if id(r) in redo else r
        if id(r) in recontrol:
            scored = control_scores(scored, values[r["control"]["cell"]], values[r["grid_best_cell"]])
        out.append(scored)
    return out


def _run_grid(study, root: Path) -> float:
    from loaderbench.launch.local import run_local
    from loaderbench.schema.store import Store

    t0 = time.perf_counter()
    run_local(study, Store(root))
    return time.perf_counter() - t0


def _run_tune(study, root: Path) -> tuple[dict, float]:
    from loaderbench.tune.options import TuneOptions
    from loaderbench.tune.run import run_tune

    t0 = time.perf_counter()
    run = run_tune(study, root, TuneOptions())
    return run.result, time.perf_counter() - t0


def tune_vs_grid(quick: bool, runs: int = 1, on_run: Any = None, control: bool = False) -> dict[str, Any]:
    """`runs` independent runs of tune against the grid (fresh records each), and how the targets fared over
    them: a scenario's answer at the noise floor of one repetition can fall either side of a target in one run,
    so several runs give its distribution (as pyperf runs a benchmark in several processes). `on_run(i)` is
    told before each run starts. `control`: a second grid chooses too, and is scored like tune (module doc)."""
    out = []
    for i in range(runs):
        if on_run is not None:
            on_run(i)
        start = loadavg()
        run = _one_run(quick, control)
        out.append({**run, "load": {"start": start, "end": loadavg()}})
    return {
        "quick": quick,
        "targets": {"fraction_of_best": TARGET_OF_BEST, "fraction_of_cost": TARGET_OF_COST},
        "confidence": CONFIDENCE,
        "holdout_repetitions": HOLDOUT_REPETITIONS,
        "control": control,
        "runs": out,
        "over_runs": over_runs([r["summary"] for r in out]),
    }


def _one_run(quick: bool, control: bool = False) -> dict[str, Any]:
    from loaderbench.schema.store import Store
    from loaderbench.study.study_file import load_study
    from loaderbench.tune.space import scenarios

    matrices = []
    with tempfile.TemporaryDirectory(prefix="loaderbench-bench-tune-") as tmp:
        root = Path(tmp)
        for i, workload in enumerate(MATRICES_QUICK if quick else MATRICES):
            path = root / f"{workload}.toml"
            path.write_text(matrix_study_text(workload, quick))
            study = load_study(path)
            reps = study.settings.repetitions
            grid_study = study
            if control:  # the same cells, twice the repetitions: two grids, interleaved
                doubled = root / f"{workload}-control.toml"
                doubled.write_text(matrix_study_text(workload, quick, repetitions=2 * reps))
                grid_study = load_study(doubled)
            if i % 2 == 0:
                grid_wall = _run_grid(grid_study, root / "results")
                result, tune_wall = _run_tune(study, root / "results")
            else:
                result, tune_wall = _run_tune(study, root / "results")
                grid_wall = _run_grid(grid_study, root / "results")
            records = [r for _, r in Store(root / "results").records(study.name)]
            grid = grid_cells(records, range(reps))
            spaces = scenarios(study.cells)
            rows = [
                scenario_row(sc, [c.key for c in space.candidates], grid)
                for sc, space in zip(result["scenarios"], spaces)
            ]
            if control:
                second = grid_cells(records, range(reps, 2 * reps))
                rows = [
                    control_row(r, [c.key for c in space.candidates], grid, second) for r, space in zip(rows, spaces)
                ]
            t0 = time.perf_counter()
            rows = _remeasure(
                study, rows, {c.key: c.cell for space in spaces for c in space.candidates}, root / "results"
            )
            holdout_wall = time.perf_counter() - t0
            matrices.append(
                {
                    "workload": workload,
                    "order": "grid first" if i % 2 == 0 else "tune first",
                    "cells": len(study.cells),
                    "repetitions": study.settings.repetitions,
                    "grid_wall_s": grid_wall,
                    "tune_wall_s": tune_wall,
                    "holdout_wall_s": holdout_wall,
                    "scenarios": rows,
                    "answers": _answers(result),
                }
            )
    return {"matrices": matrices, "summary": summary(matrices)}


def _answers(result: dict) -> list[str]:
    from loaderbench.tune.answer_text import answer_line

    return [f"{sc['label']}: {answer_line(sc)}" for sc in result["scenarios"]]


def summary(matrices: list[dict]) -> dict[str, Any]:
    """Over every scenario, and per matrix: how many met each target, the fractions, the cost."""
    rows = [r for m in matrices for r in m["scenarios"]]
    best = [r["fraction_of_best"] for r in rows if r.get("fraction_of_best") is not None]
    in_grid = [r["fraction_of_best_in_grid"] for r in rows if r.get("fraction_of_best_in_grid") is not None]
    cost = [r["fraction_of_cost"] for r in rows if r.get("fraction_of_cost") is not None]
    grid_s = sum(r["grid_cell_seconds"] for r in rows)
    tune_s = sum(r["tune_cell_seconds"] for r in rows)
    per_matrix = {}
    for m in matrices:
        g = sum(r["grid_cell_seconds"] for r in m["scenarios"])
        fb = [r["fraction_of_best"] for r in m["scenarios"]]
        per_matrix[m["workload"]] = {
            "fraction_of_cost": sum(r["tune_cell_seconds"] for r in m["scenarios"]) / g if g else None,
            "min_fraction_of_best": None if None in fb or not fb else min(fb),
        }
        if any("control" in r for r in m["scenarios"]):
            cb = [(r.get("control") or {}).get("fraction_of_best") for r in m["scenarios"]]
            per_matrix[m["workload"]]["control_min_fraction_of_best"] = None if None in cb or not cb else min(cb)
    return {
        "scenarios": len(rows),
        "met_best": sum(b >= TARGET_OF_BEST for b in best),
        "met_cost": sum(c <= TARGET_OF_COST for c in cost),
        "median_fraction_of_best": float(np.median(best)) if best else None,
        "min_fraction_of_best": min(best) if best else None,
        "min_fraction_of_best_in_grid": min(in_grid) if in_grid else None,
        "median_fraction_of_cost": float(np.median(cost)) if cost else None,
        "grid_cell_seconds": grid_s,
        "tune_cell_seconds": tune_s,
        "fraction_of_cost_overall": tune_s / grid_s if grid_s else None,
        "per_matrix": per_matrix,
    }


def over_runs(summaries: list[dict]) -> dict[str, Any]:
    """Per matrix over the runs: each run's cost and lowest fraction of the best, their medians, and the runs
    that met both targets; and the runs that met both for every matrix."""

    def met(pm: dict) -> bool:
        return (
            pm["fraction_of_cost"] is not None
            and pm["fraction_of_cost"] <= TARGET_OF_COST
            and pm["min_fraction_of_best"] is not None
            and pm["min_fraction_of_best"] >= TARGET_OF_BEST
        )

    per_matrix: dict[str, dict[str, Any]] = {}
    for workload in dict.fromkeys(w for s in summaries for w in s["per_matrix"]):
        pms = [s["per_matrix"][workload] for s in summaries if workload in s["per_matrix"]]
        cost = [pm["fraction_of_cost"] for pm in pms]
        best = [pm["min_fraction_of_best"] for pm in pms]
        per_matrix[workload] = {
            "fraction_of_cost": cost,
            "min_fraction_of_best": best,
            "median_fraction_of_cost": _median(cost),
            "median_min_fraction_of_best": _median(best),
            "runs_met_both": sum(met(pm) for pm in pms),
            "runs": len(pms),
        }
        if any("control_min_fraction_of_best" in pm for pm in pms):
            control = [pm.get("control_min_fraction_of_best") for pm in pms]
            per_matrix[workload].update(
                control_min_fraction_of_best=control,
                control_runs_met_best=sum(c is not None and c >= TARGET_OF_BEST for c in control),
            )
    return {
        "runs": len(summaries),
        "per_matrix": per_matrix,
        "runs_met_both_everywhere": sum(all(met(pm) for pm in s["per_matrix"].values()) for s in summaries),
    }


def _median(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None

"""The command line of `python -m loaderbench.bench` (`make bench`): runs the experiments in order, writes one JSON
file (strict JSON: NaN becomes null) with the machine's fingerprint and the load averages seen, and prints
the tables. `--quick` shortens every part; `--skip-*` leave parts out.

JSON schema history (SCHEMA):
  loaderbench.bench/1  overhead, precision, time_to_answer, analysis_scale; intervals keyed "ratio" or "value";
                       analysis_scale read from bench_scale's printed output
  loaderbench.bench/2  every interval an loaderbench.stats.bootstrap.EstimateInterval (estimate, low, high, method,
                       confidence, n); loop cost and throughput agreement: medians with order-statistic
                       intervals; window_bias and adaptive_coverage added; analysis_scale["result"] is
                       bench_scale's --json output
  loaderbench.bench/3  tune_vs_grid added (loaderbench.bench.tune_vs_grid)
  loaderbench.bench/4  tune_vs_grid: fraction_of_best from fresh repetitions of both chosen settings (holdout),
                       fraction_of_best_in_grid and grid_best_over_holdout beside it, summary.per_matrix
  loaderbench.bench/5  tune_vs_grid: `runs` (each with its matrices, summary and load averages) and
                       `over_runs` (per matrix over the runs: costs, lowest fractions of the best, their medians,
                       runs that met both targets) instead of one run's matrices and summary
  loaderbench.bench/6  tune_vs_grid: `control` (--grid-control): per scenario the second grid's choice scored
                       like tune's (`control`), per matrix its lowest fraction of the best, and over the runs
                       how often it met 95%
  loaderbench.bench/7  rerun_agreement added (loaderbench.bench.rerun_agreement): a study run twice, the share of
                       cells within 5% and 10% (raw as first measured, raw as kept, normalized), the reference's
                       noise and cost
  loaderbench.bench/8  doctor_hooks added (loaderbench.bench.doctor_hooks): the doctor's watch against the bare
                       loop, per num_workers, the per-round ratio's median with its interval
  loaderbench.bench/9  window_bias: every ratio an interval over repetitions (bootstrap), `first_over_rest` (the long
                       window's step profile), `eight_over_zero_over_bare`, verdicts with `status` (met, missed,
                       undecided, n/a) instead of `passed`; runs in a shuffled order per repetition, with `step_s`;
                       overhead cells: `loop_cpu_us_per_batch` and `goal`; doctor_vs_grid added
  loaderbench.bench/10 overhead cells: `rounds_for_goal`, the rounds a ±1% interval of suite/bare would need;
                       doctor_hooks: `watch_cost` (the watch's CPU per batch) and each loop's `cpu_share`
  loaderbench.bench/11 overhead cells: rounds of two short windows (bare | harness) while the probe samples on its
                       cadence, instead of 2x2 windows switching the probe; windows carry `t0` and no `probe`;
                       `probe_spans`, `speed_drift`, `probe_off_cell_cpus`; the JPEG cells take one image a batch
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from loaderbench.bench.common import IMAGES, describe, json_safe, loadavg

SCHEMA = "loaderbench.bench/11"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m loaderbench.bench", description="The benchmarks and checks of the suite itself."
    )
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--quick", action="store_true", help="shorter runs (about a third of the time), wider intervals")
    p.add_argument("--skip-scale", action="store_true", help="do not run loaderbench.analysis.stage_costs")
    p.add_argument("--skip-overhead", action="store_true")
    p.add_argument("--skip-precision", action="store_true")
    p.add_argument("--skip-window-bias", action="store_true", help="skip the window-vs-bare-loop check")
    p.add_argument(
        "--window-reps",
        type=int,
        default=None,
        help="repetitions of part 3, the window bias (default 6; 2 with --quick)",
    )
    p.add_argument("--skip-coverage", action="store_true", help="skip the adaptive rule's coverage simulation")
    p.add_argument("--skip-tta", action="store_true", help="skip the time-to-answer comparison")
    p.add_argument("--skip-tune", action="store_true", help="skip loaderbench tune against the full grid")
    p.add_argument(
        "--tune-runs",
        type=int,
        default=1,
        help="independent runs of tune against the full grid, to see how its targets fare over runs "
        "(default: %(default)s; about 10 minutes each)",
    )
    p.add_argument(
        "--grid-control",
        action="store_true",
        help="measure the grid of part 7 twice and score the second grid's choice like tune's: the noise "
        "floor of its targets on this machine (one more grid's time per run)",
    )
    p.add_argument(
        "--skip-rerun", action="store_true", help="skip running a study twice to see how many of its cells agree"
    )
    p.add_argument(
        "--skip-doctor", action="store_true", help="skip what the doctor's watch costs a loop that only loads"
    )
    p.add_argument(
        "--skip-doctor-grid", action="store_true", help="skip the doctor's recommendation against a grid of full runs"
    )
    p.add_argument(
        "--rerun-results",
        default=None,
        help="keep the two runs of the rerun part here (run-1, run-2; default: a temporary folder)",
    )
    p.add_argument(
        "--probe-interval",
        type=float,
        default=None,
        help="probe interval in s (default: the study default, [study] probe_interval_s)",
    )
    p.add_argument(
        "--records", type=int, default=None, help="records for loaderbench.analysis.stage_costs (default 100000)"
    )
    p.add_argument(
        "--trials",
        type=int,
        default=None,
        help="trials per stream and target of the coverage simulation (default 2000, 500 with --quick)",
    )
    p.add_argument("--seed", type=int, default=0)
    return p


def run_overhead(args, prepared, probe_interval: float, err) -> dict:
    from loaderbench.bench.overhead import OverheadPlan, loop_cost, overhead_cells, overhead_experiment

    plan = OverheadPlan(total_s=6.0 if args.quick else 16.0, seed=args.seed)
    cells = overhead_cells()
    err.print("[dim]1. overhead: the harness's own cost per batch (in-memory batches, ABAB) ...[/dim]")
    micro = loop_cost(cells[0].config, rounds=11 if args.quick else 21, seed=args.seed)
    rows = []
    for cell in cells:
        err.print(f"[dim]1. overhead: {describe(cell)}, {plan.total_s:.0f} s of windows, bare and harness ...[/dim]")
        rows.append(overhead_experiment(cell, prepared, plan, probe_interval))
        if "error" in rows[-1]:
            err.print(f"[red]   {rows[-1]['error']}[/red]\n{rows[-1].get('traceback', '')}")
    cost = micro["cost_ns_per_batch"]
    for row in rows:  # the loop's cost as a fraction of each cell's time per batch: precise, whatever the load
        rate = row.get("bare_batches_per_s")
        if rate and math.isfinite(rate):
            row["loop_cost_fraction"] = cost["estimate"] * 1e-9 * rate
            row["loop_cost_fraction_high"] = cost["high"] * 1e-9 * rate
    return {"probe_interval_s": probe_interval, "plan": plan.__dict__, "loop_cost": micro, "cells": rows}


def run_parts(args, result: dict, host: dict, probe_interval: float, err) -> None:
    prepared = None
    if not (args.skip_overhead and args.skip_precision and args.skip_tta):
        from loaderbench.datasets import DatasetSpec, ensure_dataset

        prepared = ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=IMAGES))
    if not args.skip_overhead:
        result["overhead"] = run_overhead(args, prepared, probe_interval, err)
    if not args.skip_precision:
        from loaderbench.bench.precision_per_second import precision_cells, precision_experiment

        cells = precision_cells(max_measure_s=8.0 if args.quick else 20.0)
        err.print(f"[dim]2. precision: {len(cells)} cells x 1 repetition, adaptive ...[/dim]")
        result["precision"] = precision_experiment(cells, 1, prepared, host, probe_interval)
    if not args.skip_window_bias:
        from loaderbench.bench.window_bias import BARE_BATCHES, window_bias

        reps, bare = (2, 60) if args.quick else (6, BARE_BATCHES)
        reps = args.window_reps or reps
        err.print(
            f"[dim]3. window bias: cpu on one core, bare loop vs loaderbench's windows, {reps} repetition(s) ...[/dim]"
        )
        result["window_bias"] = window_bias(reps, bare, host, probe_interval, seed=args.seed)
    if not args.skip_coverage:
        from loaderbench.bench.coverage import adaptive_coverage

        trials = args.trials or (500 if args.quick else 2000)
        err.print(f"[dim]4. adaptive coverage: {trials} simulated trials per stream and target ...[/dim]")
        result["adaptive_coverage"] = adaptive_coverage(trials, seed=args.seed)
    if not args.skip_tta:
        from loaderbench.bench.time_to_answer import TTA_CELLS, TTA_CELLS_QUICK, time_to_answer

        cells = TTA_CELLS_QUICK if args.quick else TTA_CELLS
        err.print(
            f"[dim]5. time to answer: {len(cells)} cells x 2 repetitions, the suite vs one process per run ...[/dim]"
        )
        result["time_to_answer"] = time_to_answer(cells, 2)
    if not args.skip_tune:
        from loaderbench.bench.tune_vs_grid import tune_vs_grid

        which = "sleep and cpu on one core" if args.quick else "sleep, cpu, jpeg on 1 and 2 cores"
        err.print(
            f"[dim]7. tune against the grid: {which}, the quick study's matrix per workload"
            f"{f', {args.tune_runs} runs' if args.tune_runs > 1 else ''} ...[/dim]"
        )
        result["tune_vs_grid"] = tune_vs_grid(
            args.quick,
            args.tune_runs,
            on_run=(lambda i: err.print(f"[dim]   run {i + 1} of {args.tune_runs}[/dim]"))
            if args.tune_runs > 1
            else None,
            control=args.grid_control,
        )
    if not args.skip_rerun:
        from loaderbench.bench.rerun_agreement import rerun_agreement

        which = "a 12-cell study" if args.quick else "the quick study"
        err.print(f"[dim]8. rerun agreement: {which}, twice, one run after the other ...[/dim]")
        result["rerun_agreement"] = rerun_agreement(
            args.quick, args.rerun_results, on_run=lambda i: err.print(f"[dim]   run {i} of 2[/dim]")
        )
    if not args.skip_doctor:
        from loaderbench.bench.doctor_hooks import hook_overhead

        rounds, batches = (7, 1000) if args.quick else (21, 2000)
        err.print(f"[dim]9. the doctor's watch: {rounds} rounds of {batches} batches, watched and not ...[/dim]")
        result["doctor_hooks"] = hook_overhead(rounds, batches, seed=args.seed)
    if not args.skip_doctor_grid:
        from loaderbench.bench.doctor_vs_grid import doctor_vs_grid

        kinds, workers, holdout = (
            (("io", "cpu"), (0, 2, 4), 3) if args.quick else (("io", "cpu", "step"), (0, 1, 2, 4, 8), 5)
        )
        err.print(f"[dim]10. the doctor against a grid: loops {', '.join(kinds)} ...[/dim]")
        result["doctor_vs_grid"] = doctor_vs_grid(kinds, workers, holdout, seed=args.seed)
    records = args.records or (20_000 if args.quick else 100_000)
    if args.skip_scale:
        result["analysis_scale"] = {"available": False, "skipped": True, "records": records}
    else:
        from loaderbench.bench.analysis_scale import analysis_scale

        err.print(f"[dim]6. analysis at scale: {records} records ...[/dim]")
        result["analysis_scale"] = analysis_scale(records)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.tune_runs < 1:
        parser.error(f"--tune-runs {args.tune_runs}: allowed: 1 or more")
    from rich.console import Console

    from loaderbench.bench.result_tables import render
    from loaderbench.measure.fingerprint import host_fingerprint
    from loaderbench.measure.warm import warm_imports
    from loaderbench.study.study_file import StudySettings

    console = Console(highlight=False)
    if not console.is_terminal:  # a log file or a pipe: wide enough for the tables
        console = Console(highlight=False, width=170)
    err = Console(stderr=True, highlight=False)
    t_start = time.perf_counter()
    probe_interval = args.probe_interval or StudySettings.model_fields["probe_interval_s"].default
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "quick": args.quick,
        "argv": sys.argv[1:] if argv is None else argv,
        "load": {"start": loadavg()},
    }
    warm_imports()  # what the runner does once: cells forked from here inherit it
    host = host_fingerprint()
    host["cpus_allowed"] = sorted(os.sched_getaffinity(0))
    result["host"] = host
    run_parts(args, result, host, probe_interval, err)
    result["load"]["end"] = loadavg()
    result["elapsed_s"] = time.perf_counter() - t_start
    result["finished_at"] = dt.datetime.now(dt.UTC).isoformat()
    if args.out:
        from loaderbench.schema.store import atomic_write_json

        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out, json_safe(result))
        result["out"] = str(out)
    render(result, console)
    return 0

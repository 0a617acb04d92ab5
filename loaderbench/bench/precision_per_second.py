"""Experiment 2, precision per second spent: cells measured by the real runner (`loaderbench.measure.runner.run_task`)
with adaptive measuring (`target_precision`), into a temporary store.

Contract: `precision_experiment` returns {"target_precision", "confidence", "cells": {name: summary}}, where
each summary holds the runs (seconds measured, windows, half-width reached or not, cell wall time, and the
seconds the 1/sqrt(time) law predicts for the target) and their medians.
"""

from __future__ import annotations

import math
import tempfile
import time

import numpy as np

from loaderbench.bench.common import CONFIDENCE, describe, loadavg, make_cell
from loaderbench.schema.metrics import Precision
from loaderbench.schema.record import Record

TARGET = 0.02  # the 95% half-width, relative to the throughput, the cells measure to


def seconds_for_precision(half_width: float, measured_s: float, target: float) -> float:
    """Measuring time the batch-means interval would need for `target`, from the 1/sqrt(time) law."""
    if not (half_width > 0 and measured_s > 0 and math.isfinite(half_width)):
        return float("nan")
    return measured_s * (half_width / target) ** 2


def precision_cells(max_measure_s: float) -> list:
    study = {
        "warmup_batches": 4,
        "measure_batches": 10,
        "target_precision": TARGET,
        "max_windows": 120,
        "max_measure_s": max_measure_s,
    }
    return [
        make_cell("sleep", 2, 2, sleep_ms=2.0, study=study),
        make_cell("cpu", 2, 2, cpu_work=15, study=study),
        make_cell("jpeg", 2, 2, study=study),
    ]


def _row(rec: Record, rep: int, wall: float) -> dict:
    p: Precision = rec.metric("precision") or {}
    row = {
        "repetition": rep,
        "status": rec.status,
        "cell_wall_s": wall,
        "measured_s": rec.metric("measured_s"),
        "samples_per_s": rec.samples_per_s,
        "windows": p.get("windows"),
        "window_batches": p.get("window_batches"),
        "half_width": p.get("precision_half_width"),
        "reached": p.get("precision_reached"),
        "time_to_first_batch_s": rec.time_to_first_batch_s,
        "load": loadavg(),
    }
    if not rec.ok:
        row["error"] = rec.error
    row["est_s_for_target"] = seconds_for_precision(row["half_width"] or float("nan"), row["measured_s"] or 0.0, TARGET)
    return row


def _summary(rs: list[dict]) -> dict:
    ok = [r for r in rs if r["status"] == "ok"]
    return {
        "runs": rs,
        "measured_s_median": float(np.median([r["measured_s"] for r in ok])) if ok else None,
        "measured_s_range": [min(r["measured_s"] for r in ok), max(r["measured_s"] for r in ok)] if ok else None,
        "cell_wall_s_median": float(np.median([r["cell_wall_s"] for r in ok])) if ok else None,
        "windows": [r["windows"] for r in ok],
        "reached": sum(bool(r["reached"]) for r in ok),
        "of": len(rs),
        "half_width": [r["half_width"] for r in ok],
    }


def precision_experiment(cells: list, repetitions: int, prepared, host_env: dict, probe_interval_s: float) -> dict:
    from loaderbench.measure.runner import run_task
    from loaderbench.schema.cell import Task
    from loaderbench.schema.store import Store

    rows: dict[str, list[dict]] = {describe(c): [] for c in cells}
    with tempfile.TemporaryDirectory(prefix="loaderbench-bench-") as tmp:
        store = Store(tmp)
        for rep in range(repetitions):  # interleaved, as the suite orders repetitions
            for cell in cells:
                t0 = time.perf_counter()
                rec = run_task(
                    Task("bench-precision", cell, rep),
                    store,
                    host_env,
                    prepared,
                    timeout_s=300,
                    probe_interval_s=probe_interval_s,
                )
                rows[describe(cell)].append(_row(rec, rep, time.perf_counter() - t0))
    return {
        "target_precision": TARGET,
        "confidence": CONFIDENCE,
        "cells": {name: _summary(rs) for name, rs in rows.items()},
    }

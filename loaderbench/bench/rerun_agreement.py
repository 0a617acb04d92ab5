"""Rerun agreement: a study measured twice, one run after the other, and how many of its cells agree.

A user who reruns a study, or tunes on Monday and checks on Tuesday, should get the same numbers. This part runs
the same study twice into two result folders, each with the suite's defence against a machine whose speed moves
(the reference timed beside every repetition, disturbed repetitions measured again within the study's
`remeasure_budget`: loaderbench.study.remeasure), and reports, per cell, the second run's median against the
first's:

- raw throughput as first measured (each repetition's first ok attempt: what a suite without re-measuring reads);
- raw throughput as kept (disturbed repetitions replaced by their re-measurement);
- throughput at the machine's own speed (samples per reference unit: loaderbench.schema.disturbance.normalized),
  over the cells where normalizing is sound (CPU-bound, local storage);
- the two together: normalized where it is sound, raw (disturbed ones measured again) elsewhere.

For each, the share of cells within 5% and within 10%, the median and the worst deviation; then the machine's
noise seen by the reference (the spread of its rates in each run, and the second run's median against the
first's) and what the reference cost per repetition. Last, the reference's own repeatability: timed back to back on
one core, how far two readings a few milliseconds apart differ. Only a move well beyond that is the machine's.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from loaderbench.schema.disturbance import machine_of, normalized
from loaderbench.schema.record import Record
from loaderbench.schema.store import Store

QUICK_STUDY = {
    "study": {"name": "rerun-quick", "repetitions": 3, "warmup_batches": 4, "measure_batches": 20, "timeout_s": 120},
    "dataset": {"kind": "synthetic-jpeg", "images": 1024},
    "matrix": {
        "workload": ["sleep", "cpu", "jpeg"],
        "num_workers": [0, 2],
        "cores": [1, 2],
        "batch_size": 32,
        "sleep_ms": 2.0,
        "cpu_work": 15,
    },
}
TOLERANCES = (0.05, 0.10)
MEASURES = ("raw_first", "raw", "normalized", "combined")


def first_ok_value(record: Record) -> float | None:
    """The repetition's throughput as first measured: its earliest ok attempt's (a disturbed one replaced later), or
    the record's own."""
    for attempt in record.previous_attempts or ():
        if attempt.get("status") == "ok":
            value = (attempt.get("metrics") or {}).get("samples_per_s")
            if isinstance(value, int | float):
                return float(value)
    return record.samples_per_s


def cell_values(records: Iterable[Record]) -> dict[str, dict[str, list[float]]]:
    """Per cell id, each measure's values over its ok repetitions."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in records:
        if not r.ok or r.samples_per_s is None:
            continue
        cell = out.setdefault(r.cell_id, {m: [] for m in MEASURES})
        norm = normalized(r.samples_per_s, r.config, machine_of(r.metrics))
        values = {
            "raw_first": first_ok_value(r),
            "raw": r.samples_per_s,
            "normalized": norm,
            "combined": norm if norm is not None else r.samples_per_s,
        }
        for m, v in values.items():
            if v is not None:
                cell[m].append(float(v))
    return out


def agreement(a: dict[str, dict[str, list[float]]], b: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    """Per measure: cells compared, share within each tolerance, median and worst deviation of b's median from a's."""
    out: dict[str, Any] = {}
    for m in MEASURES:
        devs = sorted(
            abs(statistics.median(b[c][m]) / statistics.median(a[c][m]) - 1.0)
            for c in sorted(set(a) & set(b))
            if a[c][m] and b[c][m] and statistics.median(a[c][m]) > 0
        )
        out[m] = {
            "cells": len(devs),
            **{
                f"within_{round(t * 100)}pct": (sum(d <= t for d in devs) / len(devs) if devs else None)
                for t in TOLERANCES
            },
            "median_deviation": statistics.median(devs) if devs else None,
            "worst_deviation": devs[-1] if devs else None,
        }
    return out


def machine_noise(records: list[Record]) -> dict[str, Any]:
    """The reference's rates over a run's kept repetitions: median, IQR and range relative to it; how far it moved
    within repetitions; how many repetitions were disturbed and measured again; what it cost."""
    machines = [(r, machine_of(r.metrics)) for r in records if r.ok]
    rates = [m["python_per_s"] for _, m in machines if m and isinstance(m.get("python_per_s"), int | float)]
    if not rates:
        return {"repetitions": 0}
    med = statistics.median(rates)
    q = statistics.quantiles(rates, n=4) if len(rates) > 1 else [med, med, med]
    moved = [abs(m["python_change"]) for _, m in machines if m and isinstance(m.get("python_change"), int | float)]
    cost = [m["cost_s"] for _, m in machines if m and isinstance(m.get("cost_s"), int | float)]
    share = [
        m["cost_s"] / r.wall_s
        for r, m in machines
        if m and isinstance(m.get("cost_s"), int | float) and r.wall_s and r.wall_s > 0
    ]
    return {
        "repetitions": len(rates),
        "python_per_s_median": med,
        "iqr_rel": (q[2] - q[0]) / med,
        "range_rel": (max(rates) - min(rates)) / med,
        "moved_within_median": statistics.median(moved) if moved else None,
        "moved_within_max": max(moved) if moved else None,
        "disturbed_kept": sum(1 for r, _ in machines if r.disturbed),
        "remeasured": sum(sum(1 for a in r.previous_attempts or () if a.get("status") == "ok") for r, _ in machines),
        "reference_cost_s_median": statistics.median(cost) if cost else None,
        "reference_cost_share_median": statistics.median(share) if share else None,
    }


def reference_repeatability(cpu: int = 0, pairs: int = 40) -> dict[str, Any]:
    """The reference timed `pairs` times two back to back on `cpu`: the relative change between the two of a pair
    (median, 90th percentile, max) per reference. The machine cannot change much in the few milliseconds between
    them, so this is the reference's own noise, the floor under any speed margin."""
    from loaderbench.measure.machine_speed import run_reference

    out: dict[str, Any] = {"pairs": pairs, "cpu": cpu}
    changes: dict[str, list[float]] = {"python_per_s": [], "jpeg_per_s": []}
    run_reference([cpu])  # warm: the JPEG is made and the code paths are hot before the first pair
    for _ in range(pairs):
        a, b = run_reference([cpu]), run_reference([cpu])
        for key, values in changes.items():
            values.append(abs(b[key] / a[key] - 1.0))
    for key, values in changes.items():
        values.sort()
        name = key.removesuffix("_per_s")
        out[name] = {
            "median": statistics.median(values),
            "p90": values[min(len(values) - 1, round(0.9 * (len(values) - 1)))],
            "max": values[-1],
        }
    return out


def rerun_agreement(
    quick: bool, folder: str | Path | None = None, on_run: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Run the study (the quick study; with `quick`, QUICK_STUDY) twice into `folder`/run-1 and run-2 (a
    temporary folder when None), then compare the runs."""
    from loaderbench.launch.local import run_local
    from loaderbench.study.study_file import load_study, parse_study

    study = parse_study(QUICK_STUDY, where="loaderbench.bench.rerun_agreement") if quick else load_study("quick")
    with tempfile.TemporaryDirectory(prefix="loaderbench-rerun-") as tmp:
        root = Path(folder) if folder is not None else Path(tmp)
        runs = []
        for i in (1, 2):
            if on_run is not None:
                on_run(i)
            store = Store(root / f"run-{i}")
            summary = run_local(study, store)
            records = [r for _, r in store.records(study.name) if r is not None]
            runs.append(
                {
                    "results": str(store.root) if folder is not None else None,
                    "measured": summary.measured,
                    "failed": len(summary.failed),
                    "noise": machine_noise(records),
                    "values": cell_values(records),
                }
            )
    a, b = runs[0]["values"], runs[1]["values"]
    med = [r["noise"].get("python_per_s_median") for r in runs]
    return {
        "study": study.name,
        "cells": len(study.cells),
        "repetitions": study.settings.repetitions,
        "margins": {
            "speed": study.settings.speed_margin,
            "others": study.settings.others_margin,
            "remeasure_budget": study.settings.remeasure_budget,
        },
        "agreement": agreement(a, b),
        "reference_run2_over_run1": med[1] / med[0] if med[0] and med[1] else None,
        "reference_repeatability": reference_repeatability(),
        "runs": [{k: v for k, v in r.items() if k != "values"} for r in runs],
    }

"""Which cell repetitions still need measuring, in the order they should run.

Repetitions are interleaved across cells (all cells' repetition 0, then 1, ...), each round in a
seeded shuffled order, so slow drifts of the machine spread over all cells instead of biasing one.
"""

from __future__ import annotations

import random

from loaderbench.schema.cell import Task
from loaderbench.schema.record import OK
from loaderbench.schema.store import Store
from loaderbench.study.study_file import Study


def pending_tasks(
    study: Study, store: Store, retry_failed: bool = True, skip: set | None = None, pattern: str | None = None
) -> list[Task]:
    """Tasks with no `ok` record (and, unless retry_failed, no record at all), minus `skip` keys, of the cells
    that match `pattern` (see `matches`)."""
    skip = skip or set()
    tasks = []
    for rep in range(study.settings.repetitions):
        cells = [c for c in study.cells if matches(c, pattern)]
        random.Random(study.settings.seed * 7919 + rep).shuffle(cells)
        for cell in cells:
            status = store.status(study.name, cell.cell_id, rep)
            if status == OK or (status is not None and not retry_failed):
                continue
            task = Task(study.name, cell, rep)
            if task.key not in skip:
                tasks.append(task)
    return tasks


def counts(study: Study, store: Store) -> dict[str, int]:
    out = {"ok": 0, "failed": 0, "timeout": 0, "missing": 0}
    for rep in range(study.settings.repetitions):
        for cell in study.cells:
            status = store.status(study.name, cell.cell_id, rep)
            out[status if status in out else "missing"] += 1
    return out


def matches(cell, pattern: str | None) -> bool:
    """`-k PATTERN`: every whitespace-separated term matches, either `axis=value` (the cell's value printed
    as in a study file; `axis=a|b` for any of several) or a piece of the cell's id or label
    (loaderbench.schema.cell.describe)."""
    if not pattern:
        return True
    from loaderbench.schema.cell import describe

    label = f"{cell.cell_id} {describe(cell.config)}"
    for term in pattern.split():
        axis, eq, value = term.partition("=")
        if eq and axis in cell.config:
            if _printed(cell.config[axis]) not in {v.strip("\"'").lower() for v in value.split("|")}:
                return False
        elif term.lower() not in label.lower():
            return False
    return True


def _printed(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).lower()


def plan_report(study: Study, results: str, profile=None, pattern: str | None = None) -> dict:
    """What `loaderbench plan` shows: counts of done and pending repetitions and an estimate of the time the
    pending ones take, here and (with a cluster profile) on Slurm."""
    from loaderbench.schema.cell import describe
    from loaderbench.study.estimate import Estimator, duration, estimate_study

    store = Store(results)
    selected = [c for c in study.cells if matches(c, pattern)]
    tasks = pending_tasks(study, store, pattern=pattern)
    estimator = Estimator.from_records(r for _, r in store.records(study.name) if r is not None)
    est = estimate_study(study, tasks, estimator)
    report = {
        "study": study.name,
        "study_file": str(study.path),
        "cells": len(study.cells),
        "selected": len(selected),
        "repetitions": study.settings.repetitions,
        "counts": counts(study, store),
        "estimate": {
            "pending": est.pending,
            "pending_s": est.pending_s,
            "pending_text": duration(est.pending_s),
            "longest_s": est.longest_s,
            "longest_text": duration(est.longest_s),
            "core_hours": est.core_hours,
            "calibrated": est.calibrated,
        },
        "cell_list": [
            {"cell_id": c.cell_id, "label": describe(c.config), "seconds": estimator.seconds(c)} for c in selected
        ],
    }
    if profile is not None:
        s = profile.settings.slurm
        slurm = est.slurm(s.node_cores, s.array_parallelism)
        report["slurm"] = {
            "profile": str(profile.path),
            "node_cores": s.node_cores,
            "array_parallelism": s.array_parallelism,
            **slurm,
            "wall_text": duration(slurm["wall_s"]),
        }
    return report

"""Which cell repetitions still need measuring, in the order they should run.

Repetitions are interleaved across cells (all cells' repetition 0, then 1, ...), each round in a
seeded shuffled order, so slow drifts of the machine spread over all cells instead of biasing one.
"""

from __future__ import annotations

import random

from suite.cell import Task
from suite.store import OK, Store
from suite.study import Study


def pending_tasks(study: Study, store: Store, retry_failed: bool = True, skip: set | None = None) -> list[Task]:
    """Tasks with no `ok` record (and, unless retry_failed, no record at all), minus `skip` keys."""
    skip = skip or set()
    tasks = []
    for rep in range(study.settings.repetitions):
        cells = list(study.cells)
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

"""Disturbed repetitions measured again, within the study's budget.

A local run judges every repetition as it is written (loaderbench.schema.disturbance): against its own reference
before and after the window, against the study's median reference so far, and by the share of its cores other
processes took. The disturbed ones are measured again, in the same interleaved order as the study's other
repetitions (by repetition, then in the study's seeded order of cells), at most `remeasure_budget` x (cells x
repetitions) of them over the study's life and MAX_REMEASURES per repetition, so a noisy machine cannot keep a run
going forever. The new attempt replaces the record; the store keeps what the disturbed one read.
"""

from __future__ import annotations

import math
import random
import statistics

from loaderbench.schema.cell import Task
from loaderbench.schema.disturbance import MAX_REMEASURES, Margins, judge, machine_of, remeasures_of
from loaderbench.schema.record import Record
from loaderbench.schema.store import Store
from loaderbench.study.plan import matches
from loaderbench.study.study_file import Study


def margins_of(study: Study) -> Margins:
    s = study.settings
    return Margins(speed=float(s.speed_margin), others=float(s.others_margin))


class StudyReference:
    """The study's median pure-Python reference rate over its ok repetitions, kept up to date as a run writes
    records; `judge` marks a new record disturbed or not by the study's margins."""

    def __init__(self, study: Study, store: Store):
        self.margins = margins_of(study)
        self.rates: list[float] = []
        for _, record in store.records(study.name):
            if record is not None and record.ok:
                self._add(record)

    def _add(self, record: Record) -> None:
        rate = (machine_of(record.metrics) or {}).get("python_per_s")
        if isinstance(rate, int | float) and rate > 0:
            self.rates.append(float(rate))

    @property
    def median(self) -> float | None:
        return statistics.median(self.rates) if self.rates else None

    def judge(self, record: Record) -> None:
        """Mark an ok record disturbed or not (before it is written), then count its reference in."""
        if not record.ok:
            return
        judge(record.metrics, self.median, self.margins)
        self._add(record)


def budget(study: Study) -> int:
    """How many repetitions the study may measure again over its life."""
    return math.floor(study.settings.remeasure_budget * study.settings.repetitions * len(study.cells) + 1e-9)


def remeasure_tasks(study: Study, store: Store, pattern: str | None = None) -> list[Task]:
    """The disturbed repetitions to measure again now, in interleaved order, within what is left of the budget."""
    left = budget(study)
    if left <= 0:
        return []
    wanted: list[Task] = []
    for rep in range(study.settings.repetitions):
        cells = list(study.cells)
        random.Random(study.settings.seed * 7919 + rep).shuffle(cells)
        for cell in cells:
            record = store.read(study.name, cell.cell_id, rep)
            if record is None:
                continue
            used = remeasures_of(record.previous_attempts)
            left -= used
            if record.disturbed and used < MAX_REMEASURES and matches(cell, pattern):
                wanted.append(Task(study.name, cell, rep))
    return wanted[: max(left, 0)]

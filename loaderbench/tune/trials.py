"""Measuring for the search: one candidate's repetition is one ordinary cell repetition through the ordinary
runner (loaderbench.launch.base.TaskRunner), written as an ordinary record of the study `<study>-tune`.

So `make figures` draws every point tune explored, and a repetition that already has a record is read back
instead of measured again: a tune run that was interrupted, or run again with other options, resumes from
what is there (the search decides only from observations, so it replays the same path up to where it
stopped). The runner is set up (dataset, warm imports) only when something has to be measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loaderbench.launch.base import CellSettings, TaskRunner, dataset_spec
from loaderbench.schema.cell import Task
from loaderbench.schema.disturbance import machine_of, normalized
from loaderbench.schema.record import Record
from loaderbench.schema.store import Store
from loaderbench.study.study_file import Study
from loaderbench.tune.evidence import Observation
from loaderbench.tune.space import Candidate

TUNE_SUFFIX = "-tune"


def tune_study_name(study: str) -> str:
    """The study name tune's records carry (and their folder under RESULTS)."""
    return f"{study}{TUNE_SUFFIX}"


def observation(record: Record, metric: str, reused: bool) -> Observation:
    """A record as the search sees it: the objective `metric`, the USS peak, the CPU it kept busy, the cost, the
    error if any."""
    status, error = record.status, None
    if not record.ok:
        error = record.error_line(200)
    value = record.metric(metric) if record.ok else None
    if record.ok and value is None:
        status, error = "failed", f"the record has no {metric}"
    memory = record.uss_peak_bytes
    return Observation(
        status=status,
        value=float(value) if value is not None else None,
        memory_bytes=float(memory) if memory is not None else None,
        cell_s=max(0.0, record.wall_s or 0.0),
        error=error,
        reused=reused,
        cpu_busy=record.cpu_busy if record.ok else None,
        normalized=normalized(value, record.config, machine_of(record.metrics)) if record.ok else None,
    )


class CellMeasurer:
    """measure(candidate, repetition) for the search (loaderbench.tune.evidence.Measure). `runner_factory(dataset)`
    makes the task runner (TaskRunner; tests pass one that writes synthetic records)."""

    def __init__(
        self,
        study: Study,
        store: Store,
        metric: str,
        *,
        launcher: dict | None = None,
        retry_failed: bool = True,
        runner_factory: Callable[[dict | None], Any] = TaskRunner,
    ):
        self.study_name = tune_study_name(study.name)
        self.store, self.metric, self.launcher, self.retry_failed = store, metric, launcher, retry_failed
        self.settings = CellSettings.of(study)
        self.dataset = dataset_spec(study)
        self.runner_factory = runner_factory
        self._runner = None
        self.measured = 0
        self.reused = 0
        self.gpus: int | None = None  # GPUs the records saw (env.gpus), for the 4-per-GPU rule of thumb

    def __call__(self, candidate: Candidate, repetition: int) -> Observation:
        record = self.store.read(self.study_name, candidate.key, repetition)
        reuse = record is not None and (record.ok or not self.retry_failed)
        if record is None or not reuse:
            if self._runner is None:
                self._runner = self.runner_factory(self.dataset)
            task = Task(self.study_name, candidate.cell, repetition)
            record = self._runner.run(task, self.store, self.settings, self.launcher)
            self.measured += 1
        else:
            self.reused += 1
        if record.gpus is not None:
            self.gpus = record.gpus
        return observation(record, self.metric, reused=reuse)

"""Measuring for the search: one candidate's repetition is one ordinary cell repetition through the ordinary
runner (suite.launch.base.TaskRunner), written as an ordinary record of the study `<study>-tune`.

So `make figures` draws every point tune explored, and a repetition that already has a record is read back
instead of measured again: a tune run that was interrupted, or run again with other options, resumes from
what is there (the search decides only from observations, so it replays the same path up to where it
stopped). The runner is set up (dataset, warm imports) only when something has to be measured.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Callable

from suite.cell import Task
from suite.launch.base import CellSettings, TaskRunner, dataset_spec
from suite.record import OK
from suite.store import Store
from suite.study import Study
from suite.tune.evidence import Observation
from suite.tune.space import Candidate

TUNE_SUFFIX = "-tune"


def tune_study_name(study: str) -> str:
    """The study name tune's records carry (and their folder under RESULTS)."""
    return f"{study}{TUNE_SUFFIX}"


def cell_seconds(record: dict[str, Any]) -> float:
    """What a record's cell repetition took, from its start to its end (0 when unreadable)."""
    try:
        start = dt.datetime.fromisoformat(record["started_at"])
        end = dt.datetime.fromisoformat(record["finished_at"])
    except (KeyError, TypeError, ValueError):
        return 0.0
    return max(0.0, (end - start).total_seconds())


def cpu_busy(metrics: dict[str, Any]) -> float | None:
    """CPU seconds of the loading processes (main, workers, pin-memory thread) per second of the loop: how many
    cores the cell kept busy; None when the record lacks them."""
    cpu, total = metrics.get("cpu_s") or {}, metrics.get("total_s")
    try:
        spent = sum(float(cpu.get(k) or 0.0) for k in ("main", "workers", "pin_memory_thread"))
        return spent / float(total) if cpu and total and float(total) > 0 else None
    except (TypeError, ValueError):
        return None


def observation(record: dict[str, Any], metric: str, reused: bool) -> Observation:
    """A record as the search sees it: the objective `metric`, the USS peak, the CPU it kept busy, the cost, the
    error if any."""
    metrics = record.get("metrics") or {}
    status = record.get("status", "failed")
    error = None
    if status != OK:
        err = record.get("error") or {}
        error = f"{err.get('kind', 'error')}: {str(err.get('message', ''))[:200]}"
    value = metrics.get(metric) if status == OK else None
    if status == OK and value is None:
        status, error = "failed", f"the record has no {metric}"
    mem = (metrics.get("memory_bytes") or {}).get("uss_peak")
    return Observation(status=status, value=float(value) if value is not None else None,
                       memory_bytes=float(mem) if mem is not None else None, cell_s=cell_seconds(record),
                       error=error, reused=reused, cpu_busy=cpu_busy(metrics) if status == OK else None)


class CellMeasurer:
    """measure(candidate, repetition) for the search (suite.tune.evidence.Measure). `runner_factory(dataset)`
    makes the task runner (TaskRunner; tests pass one that writes synthetic records)."""

    def __init__(self, study: Study, store: Store, metric: str, *, launcher: dict | None = None,
                 retry_failed: bool = True, runner_factory: Callable[[dict | None], Any] = TaskRunner):
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
        reuse = record is not None and (record.get("status") == OK or not self.retry_failed)
        if not reuse:
            if self._runner is None:
                self._runner = self.runner_factory(self.dataset)
            task = Task(self.study_name, candidate.cell, repetition)
            record = self._runner.run(task, self.store, self.settings, self.launcher)
            self.measured += 1
        else:
            self.reused += 1
        gpus = (record.get("env") or {}).get("gpus")
        if isinstance(gpus, list):
            self.gpus = len(gpus)
        return observation(record, self.metric, reused=reuse)

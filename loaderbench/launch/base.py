"""What every launcher shares: which tasks are pending, the set-up a process needs before it can run tasks
(the dataset, the warm imports, the host's fingerprint) and running one task into one record. A launcher
fills in only how tasks reach a machine (`Launcher.launch`): here, one after another, or as Slurm job arrays.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from loaderbench.schema.cell import Task
from loaderbench.schema.record import Record
from loaderbench.schema.store import Store
from loaderbench.study.plan import counts, pending_tasks
from loaderbench.study.study_file import Study


@dataclass(frozen=True)
class CellSettings:
    """The study's settings every one of its tasks runs under."""

    timeout_s: float
    probe_interval_s: float
    memory_interval_s: float

    @classmethod
    def of(cls, study: Study) -> CellSettings:
        s = study.settings
        return cls(float(s.timeout_s), float(s.probe_interval_s), float(s.memory_interval_s))


def dataset_spec(study: Study) -> dict | None:
    """The study's [dataset], when any of its cells reads it."""
    return study.dataset.model_dump() if study.needs_dataset() else None


def prepare_dataset(spec: dict | None):
    """Generate (once, into the shared cache) or find and verify the dataset; None when none is needed."""
    if spec is None:
        return None
    from loaderbench.datasets import DatasetSpec, ensure_dataset

    return ensure_dataset(DatasetSpec(**spec))


class TaskRunner:
    """The set-up of a process that runs tasks, done once: the dataset, the imports its cells inherit
    (`imports`: loaderbench.measure.warm.study_imports of the study; None: those of any cell), the host's
    fingerprint, with the machine's 1-minute load average read before any of it (`load_1m_at_start`: the load
    others left on the machine when the run began). Then `run` measures one task into one record."""

    def __init__(self, dataset: dict | None, imports: Iterable[str] | None = None):
        from loaderbench.measure.fingerprint import host_fingerprint
        from loaderbench.measure.warm import warm_imports

        load_at_start = os.getloadavg()[0]
        self.prepared = prepare_dataset(dataset)
        warm_imports(imports)
        self.host_env = {**host_fingerprint(), "load_1m_at_start": load_at_start}

    def run(
        self,
        task: Task,
        store: Store,
        settings: CellSettings,
        launcher: dict | None = None,
        judge: Callable[[Record], None] | None = None,
    ) -> Record:
        from loaderbench.measure.runner import run_task

        return run_task(
            task,
            store,
            self.host_env,
            self.prepared,
            timeout_s=settings.timeout_s,
            probe_interval_s=settings.probe_interval_s,
            launcher=launcher,
            memory_interval_s=settings.memory_interval_s,
            judge=judge,
        )


class Launcher(ABC):
    """A study's pending tasks, and a way to get them measured."""

    def __init__(self, study: Study, store: Store, retry_failed: bool = True, pattern: str | None = None):
        self.study, self.store, self.retry_failed, self.pattern = study, store, retry_failed, pattern
        self.settings = CellSettings.of(study)

    @property
    def total(self) -> int:
        return self.study.settings.repetitions * len(self.study.cells)

    def done(self) -> int:
        """Tasks of the study that already have an ok record."""
        return counts(self.study, self.store)["ok"]

    def pending(self) -> list[Task]:
        """Tasks with no ok record (and, unless retry_failed, no record at all), in the order they should run."""
        return pending_tasks(self.study, self.store, retry_failed=self.retry_failed, pattern=self.pattern)

    @abstractmethod
    def launch(self, tasks: list[Task]) -> Any:
        """Get `tasks` measured; what that returns is the launcher's own summary."""

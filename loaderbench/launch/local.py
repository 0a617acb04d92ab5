"""Run a study's pending cell repetitions here, one fresh process each, in interleaved order."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from loaderbench.launch.base import Launcher, TaskRunner, dataset_spec
from loaderbench.launch.progress import Progress
from loaderbench.schema.cell import Task
from loaderbench.schema.record import Record
from loaderbench.schema.store import Store
from loaderbench.study.study_file import Study


@dataclass
class RunSummary:
    measured: int = 0
    failed: list[Record] = field(default_factory=list)
    skipped_done: int = 0


def _sigterm_as_interrupt(signum, frame):  # a scheduler's SIGTERM ends the run like Ctrl-C does
    raise KeyboardInterrupt


class LocalLauncher(Launcher):
    """Measures tasks here, one after another, each in a fresh process (loaderbench.measure.runner)."""

    def __init__(
        self,
        study: Study,
        store: Store,
        retry_failed: bool = True,
        launcher: dict | None = None,
        pattern: str | None = None,
    ):
        super().__init__(study, store, retry_failed, pattern)
        self.launcher_info = launcher

    def launch(self, tasks: list[Task]) -> RunSummary:
        summary = RunSummary(skipped_done=self.done())
        if not tasks:
            return summary
        from loaderbench.storage.host_tools import check_tools

        check_tools([t.cell.typed for t in tasks])  # a missing nginx, ip or tc: one clear error, before any cell
        runner = TaskRunner(dataset_spec(self.study))
        progress = Progress(len(tasks))
        previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
        try:
            for task in tasks:
                progress.start(task)
                record = runner.run(task, self.store, self.settings, self.launcher_info)
                progress.finish(task, record)
                summary.measured += 1
                if not record.ok:
                    summary.failed.append(record)
        finally:
            signal.signal(signal.SIGTERM, previous)
        return summary


def run_local(
    study: Study, store: Store, retry_failed: bool = True, launcher: dict | None = None, pattern: str | None = None
) -> RunSummary:
    """Measure every pending task of `study` (of the cells matching `pattern`) here; returns what was measured
    and what failed."""
    local = LocalLauncher(study, store, retry_failed, launcher, pattern)
    return local.launch(local.pending())

"""Run a study's pending cell repetitions here, one fresh process each, in interleaved order."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from loaderbench.launch.base import Launcher, TaskRunner, dataset_spec
from loaderbench.launch.progress import Progress
from loaderbench.launch.same_machine import check_same_machine
from loaderbench.measure.warm import study_imports
from loaderbench.schema.cell import Task
from loaderbench.schema.record import Record
from loaderbench.schema.store import Store
from loaderbench.study.remeasure import StudyReference, remeasure_tasks
from loaderbench.study.study_file import Study


@dataclass
class RunSummary:
    measured: int = 0
    failed: list[Record] = field(default_factory=list)
    skipped_done: int = 0
    disturbed: int = 0  # repetitions judged disturbed as they were written (measured again within the budget)


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

    def pending(self) -> list[Task]:
        """The pending tasks, then the disturbed repetitions to measure again (loaderbench.study.remeasure)."""
        pending = super().pending()
        keys = {t.key for t in pending}
        return pending + [t for t in remeasure_tasks(self.study, self.store, self.pattern) if t.key not in keys]

    def launch(self, tasks: list[Task]) -> RunSummary:
        """Measure `tasks`, judging each repetition as it is written; then, round after round, the repetitions
        found disturbed, until none is left or the study's budget for them is spent."""
        summary = RunSummary(skipped_done=self.done())
        if not tasks:
            return summary
        from loaderbench.storage.host_tools import check_tools

        check_tools([t.cell.typed for t in tasks])  # a missing nginx, ip or tc: one clear error, before any cell
        check_same_machine(self.study.name, self.store)
        runner = TaskRunner(dataset_spec(self.study), study_imports(c.typed for c in self.study.cells))
        reference = StudyReference(self.study, self.store)
        previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
        try:
            while tasks:
                progress = Progress(len(tasks))
                for task in tasks:
                    progress.start(task)
                    record = runner.run(task, self.store, self.settings, self.launcher_info, judge=reference.judge)
                    progress.finish(task, record)
                    summary.measured += 1
                    if not record.ok:
                        summary.failed.append(record)
                    elif record.disturbed:
                        summary.disturbed += 1
                tasks = remeasure_tasks(self.study, self.store, self.pattern)
                if tasks:
                    progress.console.print(f"measuring {len(tasks)} disturbed repetitions again")
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

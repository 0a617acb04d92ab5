"""Run a study's pending cell repetitions here, one fresh process each, in interleaved order."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from suite.plan import pending_tasks
from suite.progress import Progress
from suite.store import Store
from suite.study import Study


@dataclass
class RunSummary:
    measured: int = 0
    failed: list = field(default_factory=list)
    skipped_done: int = 0


def prepare_dataset(study: Study):
    if not study.needs_dataset():
        return None
    from suite.dataset import DatasetSpec, ensure_dataset

    d = study.dataset
    return ensure_dataset(DatasetSpec(kind=d.kind, images=d.images, path=d.path, recipe=d.recipe))


def _sigterm_as_interrupt(signum, frame):  # a scheduler's SIGTERM ends the run like Ctrl-C does
    raise KeyboardInterrupt


def run_local(study: Study, store: Store, retry_failed: bool = True, launcher: dict | None = None) -> RunSummary:
    from suite.fingerprint import host_fingerprint
    from suite.runner import run_task, warm_imports

    tasks = pending_tasks(study, store, retry_failed=retry_failed)
    total = study.settings.repetitions * len(study.cells)
    summary = RunSummary(skipped_done=total - len(tasks))
    if not tasks:
        return summary
    prepared = prepare_dataset(study)
    warm_imports()
    host_env = host_fingerprint()
    progress = Progress(len(tasks))
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        for task in tasks:
            progress.start(task)
            record = run_task(task, store, host_env, prepared, timeout_s=study.settings.timeout_s,
                              probe_interval_s=study.settings.probe_interval_s, launcher=launcher,
                              memory_interval_s=study.settings.memory_interval_s)
            progress.finish(task, record)
            summary.measured += 1
            if record["status"] != "ok":
                summary.failed.append(record)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return summary

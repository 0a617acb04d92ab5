"""Run one cell repetition in a fresh process and turn what happened into exactly one record.

The runner imports torch and the workloads once; each cell repetition is a process forked from it
(a zygote, as Android and pyperf-like runners do), so a cell pays no interpreter start-up or torch
import, yet starts with clean process-global state. The runner never touches CUDA or starts a
DataLoader itself, and holds no threads when it forks.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import select
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from suite.errors import classify_exit
from suite.probes import TreeProbe, processes_in_group
from suite.store import SCHEMA, Store


def warm_imports() -> None:
    """What every cell would import: done once here so forked cells inherit it."""
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch.utils.data  # noqa: F401
    import torchvision.transforms.v2  # noqa: F401

    import suite.cellproc  # noqa: F401
    import suite.harness  # noqa: F401
    import suite.workloads.cpu  # noqa: F401
    import suite.workloads.jpeg  # noqa: F401
    import suite.workloads.sleep  # noqa: F401


@dataclass(frozen=True)
class Task:
    """One cell repetition to measure."""

    study: str
    cell: Any  # suite.cell.Cell
    repetition: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.study, self.cell.cell_id, self.repetition)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def _pidfd_wait(pid: int, timeout: float, pidfd: int | None) -> bool:
    """Wait up to `timeout` s for the child to exit; True when it has."""
    if pidfd is not None:
        r, _, _ = select.select([pidfd], [], [], timeout)
        return bool(r)
    time.sleep(timeout)
    return os.waitpid(pid, os.WNOHANG)[0] != 0


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_task(task: Task, store: Store, host_env: dict, prepared=None, timeout_s: float = 300.0,
             probe_interval_s: float = 0.2, launcher: dict | None = None) -> dict:
    """Measure one cell repetition and write its record; returns the record.

    KeyboardInterrupt/SystemExit while measuring kill the cell and write nothing (the cell is not done).
    """
    from suite.cellproc import cell_main

    config = task.cell.config
    fd, result_path = tempfile.mkstemp(prefix="loaderbench-cell-", suffix=".json")
    os.close(fd)
    started_at = _now()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the cell process
        code = 70
        try:
            code = cell_main(config, task.repetition, prepared, result_path)
        finally:
            os._exit(code)
    try:
        os.setpgid(pid, pid)  # also done by the child; whichever runs first wins the race harmlessly
    except (ProcessLookupError, PermissionError):
        pass
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    probe = TreeProbe(pid)
    deadline = time.monotonic() + timeout_s
    timed_out = False
    status = None
    try:
        while True:
            probe.sample()
            if _pidfd_wait(pid, probe_interval_s, pidfd):
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
        if timed_out:
            _kill_group(pid)
        _, raw_status = os.waitpid(pid, 0)
        status = os.waitstatus_to_exitcode(raw_status)
    except BaseException:
        _kill_group(pid)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        _cleanup(result_path, pidfd)
        raise
    leftovers = processes_in_group(pid)
    if leftovers:
        _kill_group(pid)  # workers or a forkserver outliving their cell: never leave them behind
    result = _read_result(result_path)
    _cleanup(result_path, pidfd)

    record: dict[str, Any] = {
        "schema": SCHEMA,
        "study": task.study,
        "cell_id": task.cell.cell_id,
        "repetition": task.repetition,
        "config": config,
        "launcher": launcher or {"kind": "local"},
        "started_at": started_at,
        "finished_at": _now(),
    }
    if result is None or timed_out:
        record["status"] = "timeout" if timed_out else "failed"
        record["error"] = classify_exit(status if status is not None else -9, timed_out, timeout_s)
        record["metrics"] = _probe_only(probe)
    else:
        record["status"] = result["status"]
        if result["status"] != "ok":
            record["error"] = result["error"]
            record["traceback"] = result.get("traceback")
            record["metrics"] = _probe_only(probe)
        else:
            metrics = result["metrics"]
            pm = probe.metrics()
            metrics["cpu_s"]["workers"] = max(metrics["cpu_s"]["workers"], pm["probe"]["workers_cpu_s_sampled"])
            metrics.update({k: v for k, v in pm.items()})
            record["metrics"] = metrics
            record["raw"] = _relative(result["raw"])
    record["env"] = {**host_env, **(result or {}).get("cell_env", {})}
    if leftovers:
        record["leftover_processes_killed"] = len(leftovers)
    store.write(record)
    return record


def _probe_only(probe: TreeProbe) -> dict:
    pm = probe.metrics()
    pm.pop("memory_timeline", None)
    return pm


def _relative(raw: dict) -> dict:
    t0 = raw["t_iter"][0]
    rel = lambda xs: [round(x - t0, 6) for x in xs]  # noqa: E731
    return {"t_iter": rel(raw["t_iter"]), "got": [rel(g) for g in raw["got"]], "done": [rel(d) for d in raw["done"]]}


def _read_result(path: str) -> dict | None:
    try:
        with open(path) as fh:
            text = fh.read()
        return json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None


def _cleanup(path: str, pidfd: int | None) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
    if pidfd is not None:
        os.close(pidfd)

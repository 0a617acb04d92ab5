"""A cell repetition as a Slurm array task (loaderbench.launch.slurm.CellJob) at its time limit: preempted or
timed out with requeues left, it writes no record and is requeued unchanged, so it is measured once, whole, when
it runs again; out of requeues it records a timeout. Runs submitit's own job entry point (`python -m
submitit.core._submit`) as Slurm would start it, and sends the signal Slurm sends before the time limit
(USR2) while the cell is being measured; only `scontrol requeue` is a stand-in, which records its call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from submitit.core.utils import DelayedSubmission

from loaderbench.launch.base import CellSettings
from loaderbench.launch.slurm import CellJob
from loaderbench.schema.cell import Task
from loaderbench.schema.store import Store
from loaderbench.study.one_cell import one_cell_study
from tests.conftest import REPO

pytestmark = pytest.mark.slow

JOB = "4242"
HANG_S = 300  # bounds a hang only
MEASURE_BATCHES = 40
# 40 batches of 4 samples of 25 ms from one worker: about 4 s of measuring, long enough to be interrupted (the
# signal follows the worker's start by one 50 ms poll)
CELL = ["workload=sleep", "sleep_ms=25.0", "batch_size=4", "num_workers=1", "cores=1", "warmup_batches=1",
        f"measure_batches={MEASURE_BATCHES}"]  # fmt: skip


def _job(tmp_path: Path, requeues_left: int) -> tuple[Path, Task, Store]:
    study = one_cell_study(CELL)
    task = Task(study.name, study.cells[0], 0)
    store = Store(tmp_path / "results")
    folder = tmp_path / "submitit"
    folder.mkdir()
    job = CellJob(
        task, str(store.root), None, CellSettings(timeout_s=120.0, probe_interval_s=0.2, memory_interval_s=2.0)
    )
    delayed = DelayedSubmission(job)
    delayed.set_timeout(timeout_min=1, max_num_timeout=requeues_left)  # 1 minute: any USR2 means "timed out"
    delayed.dump(folder / f"{JOB}_submitted.pkl")
    return folder, task, store


def _environment(tmp_path: Path, restarts: int = 0) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scontrol.log"}\n')
    scontrol.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SUBMITIT_"))}
    return {
        **env,
        "PATH": f"{bin_dir}:{env['PATH']}",
        "SUBMITIT_EXECUTOR": "slurm",
        "SLURM_JOB_ID": JOB,
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NODEID": "0",
        "SLURM_RESTART_COUNT": str(restarts),
    }


def _start(folder: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-u", "-m", "submitit.core._submit", str(folder)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _signal_while_measuring(proc: subprocess.Popen) -> None:
    """USR2 once the cell's DataLoader worker runs (the job's grandchild): the runner is then watching the cell
    measure, which is where Slurm's warning lands in a real job. (Not at the moment the cell is forked: a signal
    handler that raises inside the fork's at-fork hooks has its exception ignored.)"""
    job = psutil.Process(proc.pid)

    def measuring() -> bool:
        try:
            return any(c.children() for c in job.children() if c.cmdline() == job.cmdline())
        except psutil.Error:  # a child that ended while we looked
            return False

    deadline = time.monotonic() + HANG_S
    while not measuring():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "the job never started its cell"
        time.sleep(0.05)
    proc.send_signal(signal.SIGUSR2)


def _result(folder: Path) -> tuple[str, object]:
    import pickle

    with open(folder / f"{JOB}_0_result.pkl", "rb") as fh:
        return pickle.load(fh)


def test_out_of_requeues_the_time_limit_is_recorded_as_a_timeout(tmp_path):
    folder, task, store = _job(tmp_path, requeues_left=0)
    proc = _start(folder, _environment(tmp_path))
    _signal_while_measuring(proc)
    out = proc.communicate(timeout=HANG_S)[0]
    assert proc.returncode != 0, out
    rec = store.read(task.study, task.cell.cell_id, 0)
    assert rec is not None, out
    assert rec.status == "timeout" and rec.error_kind == "timeout", rec.error
    message = rec.error["message"] if rec.error else ""
    assert "Slurm time limit reached" in message and "timed-out too many times" in message
    assert rec.launcher["kind"] == "slurm" and rec.launcher["job_id"] == JOB
    assert rec.env.get("python"), "the record carries the host's fingerprint"
    kind, text = _result(folder)
    assert kind == "error" and "UncompletedJobError" in text  # submitit sees the job end, not a lost one
    assert not (tmp_path / "scontrol.log").exists()  # not requeued


def test_with_requeues_left_it_writes_nothing_and_runs_again_whole(tmp_path):
    folder, task, store = _job(tmp_path, requeues_left=3)
    proc = _start(folder, _environment(tmp_path))
    _signal_while_measuring(proc)
    out = proc.communicate(timeout=HANG_S)[0]
    assert proc.returncode != 0, out
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", JOB]
    assert store.read(task.study, task.cell.cell_id, 0) is None  # a cell is measured whole or not at all
    assert not list(store.root.glob("*/*.json"))
    requeued = DelayedSubmission.load(folder / f"{JOB}_submitted.pkl")
    job = requeued.function
    assert isinstance(job, CellJob) and job.task == task and requeued._timeout_countdown == 2
    # Slurm starts the requeued job: it measures the cell once, whole
    proc = _start(folder, _environment(tmp_path, restarts=1))
    out = proc.communicate(timeout=HANG_S)[0]
    assert proc.returncode == 0, out
    rec = store.read(task.study, task.cell.cell_id, 0)
    assert rec is not None and rec.ok and rec.attempt == 1 and rec.launcher["restarts"] == 1
    assert rec.metric("measured_samples") >= MEASURE_BATCHES * 4
    assert _result(folder) == ("success", "ok")
    # and once more (a duplicate start): nothing is measured twice
    proc = _start(folder, _environment(tmp_path, restarts=2))
    assert proc.communicate(timeout=HANG_S)[0] is not None and proc.returncode == 0
    assert _result(folder) == ("success", "ok (already measured)")
    assert json.loads(store.path(task.study, task.cell.cell_id, 0).read_text())["finished_at"] == rec.finished_at

"""A Slurm job that died before its cell started (its srun step failed to launch, its node was lost) is reported by
`loaderbench status` as failed with Slurm's state, reason and the error its log ends with, and the next submit runs
it again; a cancelled one is lost, and resubmitted too; a running one is left alone. The first tests put a fake
squeue and sacct on PATH; the last one fails a real job's srun step on the one-node test cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loaderbench.cli import main
from loaderbench.launch import slurm
from loaderbench.launch.slurm_end import LOST, JobEnd, log_error
from loaderbench.study.cluster_profile import load_profile
from loaderbench.study.study_file import load_study
from tests.conftest import REPO
from tests.slurm_fixtures import SlurmCluster, slurm_cluster, slurm_node  # noqa: F401 - pytest fixtures, used by name

STUDY = """
[study]
name = "ended"
repetitions = {reps}
warmup_batches = 1
measure_batches = 3
timeout_s = 120
[matrix]
workload = "sleep"
sleep_ms = 1.0
batch_size = 4
cores = 1
num_workers = 0
"""

# squeue -t all: the failed job, a cancelled one, a running one
SQUEUE = "7_0|FAILED|tc20001a|NonZeroExitCode\n7_1|CANCELLED||None\n7_2|RUNNING|tc20001b|None\n"

LAUNCH_FAILED = """\
srun: error: Task launch for StepId=7.0 failed on node tc20001b: Communication connection failure
srun: error: Application launch failed: Communication connection failure
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
"""


def fake_slurm(tmp_path: Path, monkeypatch, squeue: str, sacct: str = "") -> None:
    """squeue and sacct on PATH that print `squeue` and `sacct` whatever they are asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, out in (("squeue", squeue), ("sacct", sacct)):
        (bin_dir / f"{name}.out").write_text(out)
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\ncat "{bin_dir / name}.out"\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


@pytest.fixture
def submitted(tmp_path: Path):
    """A study of three repetitions of one cell, submitted as array 7 (tasks 7_0, 7_1, 7_2), logs in tmp/logs."""
    study_path = tmp_path / "ended.toml"
    study_path.write_text(STUDY.format(reps=3))
    study = load_study(study_path)
    results, logs = tmp_path / "results", tmp_path / "logs"
    logs.mkdir()
    cell = study.cells[0].cell_id
    slurm.Ledger(results, "ended").append(
        [{"cell_id": cell, "repetition": r, "job_id": f"7_{r}", "logs": str(logs)} for r in range(3)]
    )
    return study, results, logs


def test_a_job_that_failed_to_launch_is_failed_with_slurms_reason(submitted, tmp_path, monkeypatch, capsys) -> None:
    study, results, logs = submitted
    (logs / "7_0_0_log.err").write_text(LAUNCH_FAILED)
    fake_slurm(tmp_path, monkeypatch, SQUEUE)
    [row] = slurm.status(results)
    assert (row["failed"], row["lost"], row["running"], row["ok"]) == (1, 1, 1, 0)
    failed, lost = row["problems"]
    assert failed.startswith(f"{study.cells[0].cell_id} rep 0 (job 7_0): failed before its cell recorded anything")
    assert "Slurm: FAILED (NonZeroExitCode)" in failed
    assert "srun: error: Task launch for StepId=7.0 failed on node tc20001b: Communication connection failure" in failed
    assert failed.endswith("`make submit` runs it again")
    assert "rep 1 (job 7_1): Slurm: CANCELLED;" in lost
    assert row["nodes"]["tc20001a"]["failed"] == 1 and row["nodes"]["tc20001b"]["running"] == 1

    profile = REPO / "slurm" / "test.toml"
    assert main(["status", "--cluster", str(profile), "--results", str(results)]) == 1
    out = capsys.readouterr().out
    assert "ended: done 0, running 1, pending 0, failed 1, timeout 0, lost 1" in out
    assert "Communication connection failure" in out


def test_the_next_submit_runs_the_failed_and_lost_jobs_again(submitted, tmp_path, monkeypatch) -> None:
    study, results, logs = submitted
    (logs / "7_0_0_log.err").write_text(LAUNCH_FAILED)
    fake_slurm(tmp_path, monkeypatch, SQUEUE)
    launched: list = []
    monkeypatch.setattr(slurm.SlurmLauncher, "launch", lambda self, tasks: launched.extend(tasks) or [])
    result = slurm.submit(study, load_profile(REPO / "slurm" / "test.toml"), results)
    assert sorted(t.repetition for t in launched) == [0, 1]  # not 2: it is running
    assert result.skipped_active == 1 and result.skipped_done == 0


def test_a_job_slurm_forgot_is_failed_when_its_log_says_why_else_lost(submitted, tmp_path, monkeypatch) -> None:
    _, results, logs = submitted
    (logs / "7_0_0_log.err").write_text("slurmstepd: error: execve(): python: No such file or directory\n")
    fake_slurm(tmp_path, monkeypatch, "7_2|RUNNING|tc20001b|None\n")  # 7_0 and 7_1 gone from squeue, no sacct
    [row] = slurm.status(results)
    assert (row["failed"], row["lost"]) == (1, 1)
    assert "failed before its cell recorded anything: slurmstepd: error: execve(): python" in row["problems"][0]
    assert LOST in row["problems"][1]
    (tmp_path / "acct").mkdir()
    fake_slurm(tmp_path / "acct", monkeypatch, "", sacct="7_[0-2]|NODE_FAIL\n")  # accounting: the whole array
    [row] = slurm.status(results)
    assert row["failed"] == 3 and all("Slurm: NODE_FAIL" in p for p in row["problems"])


def test_job_end_reads_the_first_slurm_error_of_the_log(tmp_path) -> None:
    (tmp_path / "9_0_log.err").write_text("warning: something\n" + LAUNCH_FAILED)
    assert log_error(tmp_path, "9").startswith("srun: error: Task launch for StepId=7.0 failed on node tc20001b")
    assert log_error(tmp_path, "10") == "" and log_error(None, "9") == ""
    (tmp_path / "11_0_log.err").write_text("RuntimeError boom\nno error here either\n")
    assert log_error(tmp_path, "11") == "no error here either"
    assert JobEnd("CANCELLED by 0", "None", "").failed is False
    assert JobEnd("OUT_OF_MEMORY", "OutOfMemory", "").describe() == "Slurm: OUT_OF_MEMORY (OutOfMemory)"
    assert JobEnd("", "", "").describe() == LOST and not JobEnd("", "", "").failed


# --- a real launch failure on the one-node test cluster ------------------------------------------------------------


def _loaderbench(cluster: SlurmCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "loaderbench", *args],
        cwd=REPO,
        env=cluster.environ(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _queued(cluster: SlurmCluster, results: Path) -> bool:
    ledger = results / "ended" / ".slurm-ledger.jsonl"
    arrays = {json.loads(ln)["job_id"].split("_")[0] for ln in ledger.read_text().splitlines()}
    return bool(cluster.run("squeue", "-h", "-o", "%i", "-j", ",".join(sorted(arrays))).strip())


def _wait_idle(cluster: SlurmCluster, results: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout  # bounds a hang only
    while _queued(cluster, results):
        assert time.monotonic() < deadline, cluster.run("squeue") + cluster.logs()
        time.sleep(0.5)


@pytest.mark.slurm
@pytest.mark.slow
def test_a_real_srun_launch_failure_is_reported_and_resubmitted(slurm_node: SlurmCluster, tmp_path: Path) -> None:  # noqa: F811
    study = tmp_path / "ended.toml"
    study.write_text(STUDY.format(reps=1))
    results = tmp_path / "results"
    good = (REPO / "slurm" / "test.toml").read_text()
    profile = tmp_path / "cluster.toml"
    # the job's srun step asks for more tasks than its allocation holds: it fails before the cell starts
    profile.write_text(good.replace("[slurm]\n", "[slurm]\nsetup = ['srun() { command srun --ntasks=64 \"$@\"; }']\n"))
    try:
        sub = _loaderbench(slurm_node, "submit", str(study), "--cluster", str(profile), "--results", str(results))
        assert sub.returncode == 0, sub.stderr
        _wait_idle(slurm_node, results)
        assert not list((results / "ended").glob("*.json"))  # no record: the cell never ran
        st = _loaderbench(slurm_node, "status", "--cluster", str(profile), "--results", str(results))
        assert st.returncode == 1, st.stdout + st.stderr
        assert "failed 1" in st.stdout and "failed before its cell recorded anything: Slurm: FAILED" in st.stdout
        assert "srun: error" in st.stdout, st.stdout

        profile.write_text(good)
        again = _loaderbench(slurm_node, "submit", str(study), "--cluster", str(profile), "--results", str(results))
        assert again.returncode == 0 and "submitted array" in again.stderr, again.stderr
        _wait_idle(slurm_node, results)
        [rec] = [json.loads(f.read_text()) for f in (results / "ended").glob("*.json")]
        assert rec["status"] == "ok", rec.get("error")
    finally:
        ledger = results / "ended" / ".slurm-ledger.jsonl"
        if ledger.exists():
            slurm_node.cancel(*{json.loads(ln)["job_id"].split("_")[0] for ln in ledger.read_text().splitlines()})

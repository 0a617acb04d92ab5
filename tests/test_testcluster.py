"""End-to-end checks of the single-node test Slurm cluster (slurm/testcluster/) through submitit.

Run alone:
    .venv/bin/python -m pytest -q tests/test_testcluster.py -n 2 -p no:cacheprovider
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

submitit = pytest.importorskip("submitit")

try:  # the repository root on sys.path (tests/conftest.py puts it there), as the other tests do
    from tests.slurm_fixtures import SlurmCluster, slurm_cluster, slurm_node
except ImportError:  # only tests/ on sys.path
    from slurm_fixtures import SlurmCluster, slurm_cluster, slurm_node  # noqa: F401 - pytest fixtures, used by name

# slurm_node: the one-node cluster to this test alone (xdist_group does not give that: see slurm_fixtures)
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.xdist_group("slurm"),
    pytest.mark.usefixtures("slurm_node"),
]

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")
#: how long a wait may take before it counts as a hang: every wait ends as soon as what it waits for happens,
#: and slurmdbd, a job's start or a cancellation can each lag by minutes on a loaded machine
HANG_S = 600


def _executor(cluster: SlurmCluster, folder: Path, monkeypatch: pytest.MonkeyPatch, **params):
    for key, value in cluster.env.items():
        monkeypatch.setenv(key, value)  # submitit's sbatch/sacct/scancel read os.environ
    ex = submitit.AutoExecutor(folder=folder)
    assert ex.cluster == "slurm"
    ex.update_parameters(
        slurm_partition=cluster.partition,
        cpus_per_task=1,
        timeout_min=5,
        # Slurm 22.05: srun inside the batch job does not inherit --cpus-per-task
        slurm_srun_args=["--cpus-per-task=1"],
        **params,
    )
    return ex


def _squeue_state(cluster: SlurmCluster, job_id: str) -> str:
    """State as squeue sees it; finished jobs stay listed for MinJobAge (1 h in our slurm.conf)."""
    out = cluster.run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T", check=False)
    return out.strip().splitlines()[0] if out.strip() else ""


def _sacct_state(cluster: SlurmCluster, job_id: str) -> str:
    out = cluster.run("sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State", check=False)
    return out.strip().splitlines()[0] if out.strip() else ""


def _debug(cluster: SlurmCluster, jobs) -> str:
    parts = [cluster.run("squeue", "-t", "all", check=False)]
    if cluster.accounting:
        parts.append(cluster.run("sacct", "-a", "-o", "JobID,JobName,State,ExitCode", check=False))
    for j in jobs:
        parts.append(f"--- {j.job_id} stdout:\n{j.stdout()}\n--- stderr:\n{j.stderr()}")
    parts.append(cluster.logs(15))
    return "\n".join(parts)


@pytest.fixture
def submitted(slurm_node: SlurmCluster):
    """Jobs the test adds here are cancelled afterwards, passed or failed: none is left to hold the node (or to
    wait for its begin time) for the next test."""
    jobs: list = []
    yield jobs
    slurm_node.cancel(*(j.job_id for j in jobs))


def _wait_until(predicate, timeout: float, what: str, debug=lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{debug()}")
        time.sleep(0.25)


def test_array_job_sees_one_cpu(slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch, submitted) -> None:
    ex = _executor(slurm_cluster, tmp_path / "submitit", monkeypatch, slurm_array_parallelism=2)

    def probe(i: int) -> dict:  # nested: cloudpickle ships it by value
        import socket

        seen = len(os.sched_getaffinity(0))
        try:  # try to widen our own mask: only cgroup (cpuset) mode stops it
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        except OSError:
            pass
        return {
            "i": i,
            "cpus": seen,
            "cpus_after_widening": len(os.sched_getaffinity(0)),
            "env": {k: os.environ.get(k) for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID")},
            "host": socket.gethostname(),
        }

    jobs = ex.map_array(probe, [0, 1])
    submitted.extend(jobs)
    assert len(jobs) == 2
    _wait_until(lambda: all(j.done() for j in jobs), HANG_S, "the array job", lambda: _debug(slurm_cluster, jobs))
    results = [j.result() for j in jobs]

    array_id = jobs[0].job_id.split("_")[0]
    for j, r in zip(jobs, results):
        assert r["cpus"] == 1, r
        env = r["env"]
        assert env["SLURM_ARRAY_JOB_ID"] == array_id, r
        assert env["SLURM_ARRAY_TASK_ID"] == str(r["i"]) == j.job_id.split("_")[1], r
        assert env["SLURM_JOB_ID"] and env["SLURM_JOB_ID"].isdigit(), r
        assert r["host"] == socket.gethostname()
        if slurm_cluster.mode == "cgroup":
            assert r["cpus_after_widening"] == 1, r  # cpuset enforces the binding
    assert results[0]["env"]["SLURM_JOB_ID"] != results[1]["env"]["SLURM_JOB_ID"]

    if slurm_cluster.accounting:  # sacct knows the array tasks (it lags by a second or two)
        _wait_until(
            lambda: all(j.get_info(mode="force").get("State") == "COMPLETED" for j in jobs),
            HANG_S,
            "sacct to report COMPLETED",
            lambda: _debug(slurm_cluster, jobs),
        )
        assert [j.state for j in jobs] == ["COMPLETED", "COMPLETED"]
    else:
        assert all(j.state == "UNKNOWN" for j in jobs)  # submitit needs sacct
    for j in jobs:
        assert _squeue_state(slurm_cluster, j.job_id) == "COMPLETED"


def test_job_states_pending_running_failed_cancelled(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch, submitted
) -> None:
    ex = _executor(slurm_cluster, tmp_path / "submitit", monkeypatch)
    cluster = slurm_cluster

    def fail() -> None:  # nested: cloudpickle ships it by value
        raise RuntimeError("expected failure")

    running = ex.submit(time.sleep, 600)
    submitted.append(running)
    failing = ex.submit(fail)
    submitted.append(failing)
    ex.update_parameters(slurm_additional_parameters={"begin": "now+1hour"})
    pending = ex.submit(time.sleep, 1)
    submitted.append(pending)
    jobs = [running, failing, pending]
    debug = lambda: _debug(cluster, jobs)

    # squeue sees pending/running jobs with or without accounting
    _wait_until(lambda: _squeue_state(cluster, running.job_id) == "RUNNING", HANG_S, "the sleeping job to run", debug)
    assert _squeue_state(cluster, pending.job_id) == "PENDING"
    if cluster.accounting:
        _wait_until(
            lambda: running.get_info(mode="force").get("State") == "RUNNING", HANG_S, "sacct to say RUNNING", debug
        )
        # slurmdbd records each job on its own schedule: the pending one may reach sacct a moment later
        _wait_until(
            lambda: pending.get_info(mode="force").get("State") == "PENDING", HANG_S, "sacct to say PENDING", debug
        )

    # a Python exception in the job: FAILED
    _wait_until(lambda: failing.done(), HANG_S, "the failing job", debug)
    with pytest.raises(submitit.core.utils.FailedJobError, match="expected failure"):
        failing.result()

    # scancel: CANCELLED
    for job in (running, pending):
        subprocess.run(["scancel", job.job_id], env=cluster.environ(), check=True, timeout=30)
    for job in (running, pending):
        _wait_until(
            lambda job=job: _squeue_state(cluster, job.job_id) == "CANCELLED",
            HANG_S,
            f"squeue to show {job.job_id} CANCELLED",
            debug,
        )

    if cluster.accounting:

        def state(job) -> str:
            return job.get_info(mode="force").get("State", "")

        _wait_until(lambda: state(failing) == "FAILED", HANG_S, "sacct FAILED", debug)
        for job in (running, pending):
            _wait_until(lambda job=job: state(job).startswith("CANCELLED"), HANG_S, "sacct CANCELLED", debug)
            assert job.state.startswith("CANCELLED")  # "CANCELLED by 0"
            assert job.done()  # terminal state: submitit stops waiting
            # result() of a job without a result file waits _results_timeout_s (15 s, for slow
            # shared filesystems) before raising; submitit's own tests set it to 0 as well
            job._results_timeout_s = 0
            with pytest.raises(submitit.core.utils.UncompletedJobError):
                job.result()
        assert _sacct_state(cluster, running.job_id).startswith("CANCELLED")
    else:
        # without slurmdbd submitit only sees UNKNOWN, and would wait forever for a cancelled job
        assert running.state == "UNKNOWN"
        assert not running.done()

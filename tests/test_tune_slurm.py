"""`make submit CLUSTER=test TUNE=1` on a real single-node Slurm cluster: ONE job with the node's cores runs
tune there; its records carry the job's ids, each cell is pinned to its own cores inside the allocation, and
tune.json lands in RESULTS with an answer."""

import json
import subprocess
import time

import pytest

from tests.conftest import REPO
from tests.slurm_fixtures import slurm_cluster, slurm_node  # noqa: F401 - pytest fixtures, used by name

# slurm_node: the one-node cluster to this test alone, whatever else the other xdist workers run
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("slurm_node")]

STUDY = """
[study]
name = "slurm-tune"
repetitions = 3
warmup_batches = 1
measure_batches = 4
timeout_s = 120
[matrix]
workload = ["sleep"]
num_workers = [0, 1, 2]
cores = [1]
batch_size = [4]
sleep_ms = [2.0]
"""


def _make(cluster, *args, timeout=300):
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO,
        env=cluster.environ(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _wait_gone(cluster, job_id: str, timeout=900):
    """Until the test's own job has left the queue; other jobs are not the test's business. A hang bound only."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not cluster.run("squeue", "-h", "-o", "%i", "-j", job_id, check=False).strip():
            return
        time.sleep(1)
    raise AssertionError("the tune job is still queued:\n" + cluster.run("squeue") + cluster.logs())


@pytest.fixture
def submitted(slurm_node):  # noqa: F811 - pytest injects the imported fixture by name
    """Job ids the test submits; cancelled afterwards, passed or failed, so none holds the node for the next."""
    ids: list[str] = []
    yield ids
    slurm_node.cancel(*ids)


def test_submit_tune_runs_one_job_on_the_node(slurm_cluster, tmp_path, submitted):  # noqa: F811 - pytest injects the imported fixture by name
    study = tmp_path / "tune.toml"
    study.write_text(STUDY)
    results = tmp_path / "results"
    out = _make(slurm_cluster, "submit", "CLUSTER=test", f"STUDY={study}", f"RESULTS={results}", "TUNE=1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "submitted job" in out.stderr and "2 cores" in out.stderr, out.stderr
    job_id = out.stderr.split("submitted job ")[1].split(":")[0]
    assert job_id.isdigit()  # one job, not an array
    submitted.append(job_id)
    _wait_gone(slurm_cluster, job_id)

    answer_file = results / "slurm-tune-tune.json"
    logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in (results / "slurm-logs").glob(f"{job_id}*"))
    assert answer_file.exists(), logs + slurm_cluster.logs()
    result = json.loads(answer_file.read_text())
    assert result["answered"] == result["scenarios_total"] == 1
    answer = result["scenarios"][0]["answer"]
    assert answer["repetitions"] == 3 and answer["median"] > 0
    records = [json.loads(p.read_text()) for p in (results / "slurm-tune-tune").glob("*.json")]
    assert len(records) == result["cost"]["measurements"] == result["cost"]["measured_now"]
    for rec in records:
        assert rec["status"] == "ok", rec.get("error")
        assert rec["launcher"]["kind"] == "slurm" and rec["launcher"]["tune"] is True
        assert rec["launcher"]["job_id"] == job_id and rec["launcher"]["job_cpus"] == 2  # the node's cores
        assert len(rec["env"]["cpus_allowed"]) == rec["config"]["cores"] == 1
    out_file = next((results / "slurm-logs").glob(f"{job_id}_0_log.out"))
    assert "DataLoader(ds, batch_size=4, num_workers=" in out_file.read_text()

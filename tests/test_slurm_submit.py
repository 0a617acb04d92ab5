"""`make submit CLUSTER=test` on a real single-node Slurm cluster: every cell measured exactly once,
pinned to its cores, with Slurm ids in the record; a second submit submits nothing; a cancelled job
is reported and resubmitted."""

import json
import subprocess
import time

import pytest

from tests.conftest import REPO
from tests.slurm_fixtures import slurm_cluster, slurm_node  # noqa: F401 - pytest fixtures, used by name

# slurm_node: the one-node cluster to this test alone, whatever else the other xdist workers run
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("slurm_node")]

TINY = """
[study]
name = "{name}"
repetitions = 2
warmup_batches = 1
measure_batches = 3
timeout_s = 120
[matrix]
workload = ["sleep"]
num_workers = {num_workers}
cores = {cores}
batch_size = [4]
sleep_ms = [{sleep_ms}]
"""


def make(cluster, *args, timeout=300):
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO,
        env=cluster.environ(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def own_arrays(results) -> list[str]:
    """The job arrays submitted into `results` (from the submit ledgers)."""
    return sorted(
        {
            json.loads(ln)["job_id"].split("_")[0]
            for ledger in results.glob("*/.slurm-ledger.jsonl")
            for ln in ledger.read_text().splitlines()
            if ln.strip()
        }
    )


@pytest.fixture
def results(slurm_node, tmp_path):  # noqa: F811 - pytest injects the imported fixture by name
    """The test's results folder. Afterwards, passed or failed, its jobs are cancelled: none is left to hold the
    node for the next test."""
    path = tmp_path / "results"
    yield path
    slurm_node.cancel(*own_arrays(path))


def wait_idle(cluster, results, timeout=900):
    """Until none of the jobs submitted into `results` is pending or running; other jobs on the cluster are not
    the test's business. The timeout bounds a hang only."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        arrays = own_arrays(results)
        if not arrays or not cluster.run("squeue", "-h", "-o", "%i", "-j", ",".join(arrays)).strip():
            return
        time.sleep(1)
    raise AssertionError("jobs still queued:\n" + cluster.run("squeue") + cluster.logs())


def test_submit_runs_every_cell_once(slurm_cluster, tmp_path, results):  # noqa: F811 - pytest injects the imported fixture by name
    study = tmp_path / "tiny.toml"
    # each array task is a fresh interpreter that imports torch before its cell (most of its time): 2 cells x 2
    # repetitions, one of them on 2 cores, are 3 rounds of tasks on the 2-CPU node. Main-process loading
    # (num_workers = 0) under Slurm: test_submit_a_custom_pipeline_from_a_folder_outside_the_project
    study.write_text(TINY.format(name="slurm-tiny", sleep_ms=1.0, num_workers="[2]", cores="[1, 2]"))
    out = make(slurm_cluster, "submit", "CLUSTER=test", f"STUDY={study}", f"RESULTS={results}")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "submitted array" in out.stderr
    wait_idle(slurm_cluster, results)

    files = sorted((results / "slurm-tiny").glob("*.json"))
    assert len(files) == 2 * 2, out.stderr + slurm_cluster.logs()  # 2 cells, 2 repetitions each
    keys = set()
    for f in files:
        rec = json.loads(f.read_text())
        assert rec["status"] == "ok", rec.get("error")
        keys.add((rec["cell_id"], rec["repetition"]))
        assert len(rec["env"]["cpus_allowed"]) == rec["config"]["cores"]
        launcher = rec["launcher"]
        assert launcher["kind"] == "slurm" and launcher["array_job_id"] and launcher["array_task_id"] is not None
        assert rec["env"]["slurm"]["array_job_id"] == launcher["array_job_id"]
    assert len(keys) == len(files)

    status = make(slurm_cluster, "status", "CLUSTER=test", f"RESULTS={results}")
    assert "slurm-tiny: done 4, running 0, pending 0, failed 0" in status.stdout, status.stdout + status.stderr

    again = make(slurm_cluster, "submit", "CLUSTER=test", f"STUDY={study}", f"RESULTS={results}")
    assert again.returncode == 0 and "nothing to submit" in again.stderr, again.stderr
    assert "4 already done" in again.stderr


def test_cancelled_job_is_reported_and_resubmitted(slurm_cluster, tmp_path, results):  # noqa: F811 - pytest injects the imported fixture by name
    study = tmp_path / "slow.toml"
    # 250 ms per sample, at least 4 batches of 4 samples per cell: each of the 2 cells (1 core each, side by side)
    # sleeps 2 s (2 workers) or 4 s (none) after its interpreter has imported torch, longer than the second submit
    # before the cancel: some are always left to cancel
    text = TINY.format(name="slurm-cancel", sleep_ms=250.0, num_workers="[0, 2]", cores="[1]")
    study.write_text(text.replace("repetitions = 2", "repetitions = 1"))
    out = make(slurm_cluster, "submit", "CLUSTER=test", f"STUDY={study}", f"RESULTS={results}")
    assert out.returncode == 0, out.stderr
    ledger = [json.loads(ln) for ln in (results / "slurm-cancel" / ".slurm-ledger.jsonl").read_text().splitlines()]
    arrays = sorted({e["job_id"].split("_")[0] for e in ledger})
    # a second submit while they are queued or running must not submit them again
    during = make(slurm_cluster, "submit", "CLUSTER=test", f"STUDY={study}", f"RESULTS={results}")
    assert "nothing to submit" in during.stderr, during.stderr
    slurm_cluster.run("scancel", *arrays)
    wait_idle(slurm_cluster, results)
    done = len(list((results / "slurm-cancel").glob("*.json")))
    assert done < 2, "every cell finished before the cancel: nothing was cancelled to check"
    st = make(slurm_cluster, "status", "CLUSTER=test", f"RESULTS={results}")
    assert f"lost {2 - done}" in st.stdout, st.stdout
    assert "CANCELLED" in st.stdout or "without a record" in st.stdout
    resubmit = make(slurm_cluster, "submit", "CLUSTER=test", f"STUDY={study}", f"RESULTS={results}")
    assert resubmit.returncode == 0, resubmit.stderr
    assert "submitted array" in resubmit.stderr, resubmit.stderr
    wait_idle(slurm_cluster, results)
    recs = [json.loads(f.read_text()) for f in (results / "slurm-cancel").glob("*.json")]
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]


CUSTOM_STUDY = """
[study]
name = "slurm-custom"
repetitions = 1
warmup_batches = 1
measure_batches = 3
timeout_s = 120
[matrix]
workload = ["custom"]
factory = ["my_pipe:make"]
num_workers = [0, 2]
cores = [1, 2]
start_method = ["fork", "spawn"]
batch_size = [4]
[[exclude]]
num_workers = 0
start_method = "spawn"
# the spawn cell on 2 cores (the profile's 512 MiB per core: two spawned workers each import torch), the other two
# on 1 core each, side by side on the node
[[exclude]]
start_method = "spawn"
cores = 1
[[exclude]]
num_workers = 0
cores = 2
[[exclude]]
num_workers = 2
start_method = "fork"
cores = 2
[factory_args]
n = 32
"""

CUSTOM_PIPE = """
import torch
from torch.utils.data import Dataset


class Ramp(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((16,), float(i)), i


def make(n):
    return Ramp(n)
"""


def test_submit_a_custom_pipeline_from_a_folder_outside_the_project(slurm_cluster, tmp_path, results):  # noqa: F811 - pytest injects the imported fixture by name
    """The factory's module lives beside the study in a folder Slurm's array tasks know nothing of: each cell
    (and its spawned workers) imports it from there, and the record names the module file and its hash."""
    from loaderbench.workloads.factory import sha256_file

    folder = tmp_path / "my_project"
    folder.mkdir()
    (folder / "my_pipe.py").write_text(CUSTOM_PIPE)
    study = folder / "study.toml"
    study.write_text(CUSTOM_STUDY)
    out = make(slurm_cluster, "submit", "CLUSTER=test", f"STUDY={study}", f"RESULTS={results}")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "submitted array" in out.stderr
    wait_idle(slurm_cluster, results)

    recs = [json.loads(f.read_text()) for f in (results / "slurm-custom").glob("*.json")]
    assert len(recs) == 3, out.stderr + slurm_cluster.logs()
    digest = sha256_file(folder / "my_pipe.py")
    for rec in recs:
        assert rec["status"] == "ok", rec.get("error")
        assert rec["launcher"]["kind"] == "slurm"
        assert rec["config"]["factory_sha256"] == digest and rec["config"]["factory_root"] == str(folder)
        assert rec["env"]["factory"]["sha256"] == digest
    assert {(r["config"]["num_workers"], r["config"]["start_method"], r["config"]["cores"]) for r in recs} == {
        (0, None, 1),
        (2, "fork", 1),
        (2, "spawn", 2),
    }

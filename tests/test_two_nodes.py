"""`make submit CLUSTER=test2` on the two-node test cluster (each slurmd in its own network namespace, one CPU
each): array tasks run on both nodes and their records name their host, `make status` counts per node, a DDP
cell runs one rank per node; a node lost mid-study is reported as failed with Slurm's state and resubmitted
exactly once."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.conftest import REPO
from tests.slurm_fixtures import SlurmCluster, slurm_two_nodes, slurm_two_nodes_alone, start  # noqa: F401 - fixtures

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("slurm_two_nodes_alone")]

STUDY = """
[study]
name = "{name}"
repetitions = {reps}
warmup_batches = 1
measure_batches = 3
timeout_s = 120
remeasure_budget = 0
[matrix]
workload = "sleep"
sleep_ms = {sleep_ms}
batch_size = 4
cores = 1
num_workers = {workers}
ranks = {ranks}
rank_mode = ["side_by_side", "ddp"]
[[exclude]]
ranks = 1
rank_mode = "ddp"
[[exclude]]
ranks = 2
rank_mode = "side_by_side"
[[exclude]]
ranks = 2
num_workers = 0
"""


def make(cluster: SlurmCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", *args, "CLUSTER=test2"],
        cwd=REPO,
        env=cluster.environ(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def nodes(cluster: SlurmCluster) -> list[str]:
    return (cluster.state / "node").read_text().split()


def arrays(results) -> list[str]:
    return sorted(
        {
            json.loads(ln)["job_id"].split("_")[0]
            for ledger in results.glob("*/.slurm-ledger.jsonl")
            for ln in ledger.read_text().splitlines()
            if ln.strip()
        }
    )


def wait_until(what: str, predicate, cluster: SlurmCluster, timeout: float = 300) -> None:
    """Poll `predicate` (the timeout bounds a hang only)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f} s\n" + cluster.run("squeue") + cluster.logs())
        time.sleep(0.5)


def idle(cluster: SlurmCluster, results) -> bool:
    own = arrays(results)
    return not own or not cluster.run("squeue", "-h", "-o", "%i", "-j", ",".join(own)).strip()


def records(results, study: str) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted((results / study).glob("*.json"))]


@pytest.fixture
def results(slurm_two_nodes, tmp_path):  # noqa: F811 - pytest injects the imported fixture by name
    path = tmp_path / "results"
    yield path
    slurm_two_nodes.cancel(*arrays(path))


def test_a_study_runs_on_both_nodes_and_a_ddp_cell_spans_them(slurm_two_nodes, tmp_path, results):  # noqa: F811
    cluster = slurm_two_nodes
    study = tmp_path / "two.toml"
    # two one-rank cells (one array task each, side by side: one per node) and one DDP cell: 2 rounds of tasks
    study.write_text(STUDY.format(name="two-nodes", reps=1, sleep_ms=200.0, workers="[0, 1]", ranks="[1, 2]"))
    out = make(cluster, "submit", f"STUDY={study}", f"RESULTS={results}")
    assert out.returncode == 0, out.stdout + out.stderr
    wait_until("the study's jobs done", lambda: idle(cluster, results), cluster)
    recs = records(results, "two-nodes")
    assert len(recs) == 3 and all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs] + [cluster.logs()]
    single = [r for r in recs if r["config"]["ranks"] == 1]
    assert {r["env"]["host"] for r in single} == set(nodes(cluster))  # the two array tasks ran on both
    for r in recs:
        assert r["launcher"]["node"] == r["env"]["host"] in nodes(cluster)
    for r in (r for r in recs if r["config"]["ranks"] == 2):
        ddp = r["metrics"]["ddp"]
        assert ddp["nodes"] == 2 and {x["host"] for x in ddp["ranks"]} == set(nodes(cluster))
        assert ddp["share_overlap"] == 0 and ddp["share_missing"] == 0 and ddp["grads_equal"]
    status = make(cluster, "status", f"RESULTS={results}")
    for node in nodes(cluster):
        assert f"node {node}: done " in status.stdout, status.stdout + status.stderr


def test_a_lost_node_is_resubmitted_exactly_once(slurm_two_nodes, tmp_path, results):  # noqa: F811
    cluster = slurm_two_nodes
    lost = nodes(cluster)[1]
    study = tmp_path / "loss.toml"
    # 1 s per batch, 5+ batches per cell: each task runs well past the moment the node is lost. Two repetitions,
    # side by side: one on each node
    study.write_text(STUDY.format(name="node-loss", reps=2, sleep_ms=250.0, workers="1", ranks="1"))
    out = make(cluster, "submit", f"STUDY={study}", f"RESULTS={results}")
    assert out.returncode == 0, out.stdout + out.stderr
    on_lost = lambda: cluster.run("squeue", "-h", "-t", "R", "-w", lost, "-o", "%i").split()
    wait_until(f"a task running on {lost}", on_lost, cluster)
    try:
        hit = on_lost()
        _kill_node(cluster, lost)
        wait_until("the study's jobs ended", lambda: idle(cluster, results), cluster)
        ledger = results / "node-loss" / ".slurm-ledger.jsonl"
        by_job = {
            e["job_id"]: (e["cell_id"], e["repetition"]) for e in map(json.loads, ledger.read_text().splitlines())
        }
        done = {(r["cell_id"], r["repetition"]): r for r in records(results, "node-loss")}
        for job in hit:  # the lost node's tasks ended without a record, or Slurm requeued them elsewhere
            rec = done.get(by_job[job])
            assert rec is None or (rec["launcher"]["restarts"] > 0 and rec["env"]["host"] != lost), rec
        missing = 2 - len(done)
        if missing:  # their jobs died with the node, before their cells wrote anything: failed, with Slurm's state
            status = make(cluster, "status", f"RESULTS={results}")
            assert f"failed {missing}, timeout 0, lost 0" in status.stdout, status.stdout
            assert status.stdout.count("failed before its cell recorded anything: Slurm: ") == missing, status.stdout
        again = make(cluster, "submit", f"STUDY={study}", f"RESULTS={results}")
        assert again.returncode == 0, again.stderr
        assert f"{len(done)} already done" in again.stderr, again.stderr
        assert ("submitted array" in again.stderr) == bool(missing), again.stderr
        wait_until("the resubmitted jobs done", lambda: idle(cluster, results), cluster)
        recs = records(results, "node-loss")
        keys = [(r["cell_id"], r["repetition"]) for r in recs]
        assert len(recs) == 2 and len(set(keys)) == 2 and all(r["status"] == "ok" for r in recs)
    finally:
        start(cluster.state, 2)  # the node back, for whatever runs next


def _kill_node(cluster: SlurmCluster, node: str) -> None:
    """The node is lost: its slurmd and everything in its network namespace (steps, the cells) killed, again until
    none is left: a process forked between one listing and its kill (a step starting its cell) would live on."""
    for _ in range(50):
        pids = subprocess.run(["ip", "netns", "pids", f"lb{node}"], capture_output=True, text=True, check=True).stdout
        if not pids.split():
            return
        subprocess.run(["kill", "-KILL", *pids.split()], check=False)
        time.sleep(0.1)
    raise AssertionError(f"node {node}: processes still in its namespace after 50 rounds of SIGKILL: {pids.split()}")

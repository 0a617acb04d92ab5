"""Storage cells through the real runner (`python -m loaderbench run`, as tests/test_faults.py runs it): the server,
its network namespaces, veth pair and qdiscs are gone after every cell, ok or failed, and after a killed
runner; server faults and a truncated shard become classified records and the next cell is ok; latency is on
the path (a request takes at least the round trip: checked as throughput that cannot exceed it); split shards
are read exactly once per pass and unsplit ones show their duplicates.

Timing checks are one-sided (load slows a cell, never speeds it up); the rest asserts what the records and the
machine show."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from loaderbench.storage import host_tools as tools
from tests.test_faults import GUARD_S, Run, assert_clean, records, tagged_processes, write_study

pytestmark = pytest.mark.slow

KERNEL = tools.kernel_shaping()[0]
DATASET = '\n[dataset]\nkind = "synthetic-jpeg"\nimages = 16\n'


@pytest.fixture(autouse=True)
def nginx_installed():
    if tools.find_program("nginx") is None:
        if os.geteuid() == 0:  # `make test` installs it (tools/install-storage-tools.sh): its absence is a failure
            pytest.fail("nginx is not installed: run tools/install-storage-tools.sh (make test does)")
        pytest.skip("nginx is not installed and installing it needs root: run tools/install-storage-tools.sh")


#: the Slurm test cluster's namespaces and links (slurm/testcluster/start.sh: `lbtc<port>s`, `lbtc<port>h`, ...),
#: which a test running beside these may start and stop: no cell makes them (its namespaces are anonymous)
TEST_CLUSTER = "lbtc"


def host_network() -> dict:
    """What the host's own network namespace holds that a cell could leak into it (the test cluster's own aside)."""

    def run(*args):
        exe = tools.find_program(args[0])
        out = subprocess.run([exe, *args[1:]], capture_output=True, text=True).stdout if exe else ""
        return "".join(line for line in out.splitlines(keepends=True) if TEST_CLUSTER not in line)

    return {
        "veth": run("ip", "-o", "link", "show", "type", "veth"),
        "netns": run("ip", "netns", "list"),
        "qdiscs": run("tc", "qdisc", "show"),
    }


def in_groups(pgids: set[int]) -> list[tuple[int, str]]:
    """Live processes of these process groups. nginx rewrites its environment for its process title, so the
    runs' environment tag cannot find it; it keeps its cell's process group (the cell's pid). A cell's network
    namespaces are anonymous and held by its processes only (never named, bind-mounted or opened elsewhere), so
    none of them alive means the namespaces, their veth pair and qdiscs are gone. (Their inode numbers cannot
    tell: the kernel hands a freed one to the next namespace made, another cell's.)"""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/comm") as fh:
                comm = fh.read().strip()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) in pgids:
            out.append((int(pid), comm))
    return out


def run_study(tmp_path, name: str, matrix: str, order_ok=None, timeout_s: float = 120, measure_batches: int = 4):
    before = host_network()
    study, order = write_study(tmp_path, name, matrix, order_ok=order_ok, timeout_s=timeout_s, extra=DATASET)
    study.write_text(study.read_text().replace("measure_batches = 4", f"measure_batches = {measure_batches}"))
    run = Run(tmp_path, study, tmp_path / "results")
    report = run.wait()
    recs = records(tmp_path / "results", name)
    assert len(recs) == len(order), run.output()
    assert_clean(report, recs, run.tag)
    cells = {pid for rec in recs.values() for pid in rec["cleanup"]["processes_seen"]}
    assert in_groups(cells) == []  # the server (nginx included) ended with its cell
    assert host_network() == before  # no veth, named namespace or qdisc of a cell in the host's namespace
    return recs, run


FAULTS = """workload = "shards"
storage = "http"
num_workers = 2
batch_size = 2
jpeg_stage = "decode"
shards = 4
shard_samples = 2
latency_ms = 5
bandwidth_mbit = 100
http_timeout_s = 2
shaping = ["auto", "proxy"]
storage_fault = ["server_stop", "server_stall", "truncated_shard", "none"]
storage_fault_at = 3

[[exclude]]
shaping = "proxy"
storage_fault = ["server_stop", "server_stall", "truncated_shard"]
"""


def test_faults_are_classified_and_no_server_or_namespace_outlives_its_cell(tmp_path):
    healthy_last = lambda order: order[-1]["storage_fault"] == "none"
    recs, run = run_study(tmp_path, "storage-faults", FAULTS, order_ok=healthy_last)
    got = {(r["config"]["storage_fault"], r["config"]["shaping"]): r for r in recs.values()}

    def failed(fault, kind, *words):
        rec = got[(fault, "auto")]
        assert rec["status"] == "failed" and rec["error"]["kind"] == kind, (fault, rec.get("error"), run.output())
        for w in words:
            assert w in rec["error"]["message"], rec["error"]["message"]

    failed("server_stop", "storage_unreachable", "stopped answering", "then run the cell again")
    failed("server_stall", "storage_timeout", "no answer within http_timeout_s = 2 s", "raise http_timeout_s")
    failed("truncated_shard", "shard_truncated", "shard-000001.tar", "is truncated", "write it again")
    for shaping in ("auto", "proxy"):
        rec = got[("none", shaping)]
        assert rec["status"] == "ok", rec.get("error")
        st = rec["metrics"]["storage"]
        assert st["server"]["left_running"] == [] and st["requests"] > 0 and st["fault"] is None
        if shaping == "proxy" or not KERNEL:
            assert st["path"]["netns"] is False and st["path"]["bandwidth"] == "proxy" and st["netns"] is None
        else:
            assert st["path"]["netns"] is True and st["path"]["bandwidth"] == "tbf"
            assert st["path"]["latency"] == ("netem" if tools.netem_available() else "proxy")
            tbf = [q for q in st["qdiscs"] if q["kind"] == "tbf"]
            assert tbf and tbf[0]["bytes"] >= st["bytes"]  # every byte served crossed the cap
            assert st["netns"]["client"] != st["netns"]["server"] != os.readlink("/proc/self/ns/net")
    for rec in recs.values():
        pids = set((rec["metrics"].get("storage") or {}).get("server", {}).get("pids", []))
        assert not pids & {pid for pid, _ in in_groups(set(rec["cleanup"]["processes_seen"]))}


LATENCY = """workload = "jpeg"
storage = "http"
num_workers = 0
batch_size = 2
jpeg_stage = "decode"
latency_ms = 40
http_client = ["pooled", "per_request"]
shaping = ["auto", "proxy"]
"""


def test_latency_is_applied_on_the_path(tmp_path):
    recs, _run = run_study(tmp_path, "storage-latency", LATENCY)
    for rec in recs.values():
        assert rec["status"] == "ok", rec.get("error")
        m, c = rec["metrics"], rec["config"]
        round_trips = 2 if c["http_client"] == "per_request" else 1  # a new connection: one more round trip
        per_sample = round_trips * 0.040
        assert m["samples_per_s"] <= 1 / per_sample, (c["http_client"], m["samples_per_s"])
        assert m["batch_wait_s"]["p50"] >= 2 * per_sample  # a batch: 2 requests in a row in the main process
        connections = m["storage"]["connections"]
        assert connections == (m["storage"]["requests"] if c["http_client"] == "per_request" else 1)


SHARDS = """workload = "shards"
storage = ["local", "http"]
num_workers = [0, 3]
batch_size = 2
jpeg_stage = "decode"
shards = 5
shard_samples = 2
sharding = ["split", "none"]

ranks = [1, 2]

[[exclude]]
num_workers = 0
sharding = "none"

[[exclude]]
ranks = 2
storage = "http"

[[exclude]]
ranks = 2
num_workers = 0

[[exclude]]
ranks = 2
sharding = "none"
"""


def test_split_shards_are_read_exactly_once_per_pass_and_unsplit_ones_repeat(tmp_path):
    recs, _run = run_study(tmp_path, "storage-shards", SHARDS, measure_batches=40)  # 2 ranks: windows must overlap
    assert len(recs) == 7
    for rec in recs.values():
        assert rec["status"] == "ok", rec.get("error")
        c, sp = rec["config"], rec["metrics"]["shard_passes"]
        workers = max(1, c["num_workers"])
        # rank 0 of 2 reads shards 0, 2 and 4 of the 5 (2 samples each); one rank reads all 10 samples
        assert sp["expected_per_pass"] == (6 if c["ranks"] == 2 else 10) and sp["passes_complete"] >= 1, sp
        complete = [p for e in sp["epochs"] for p in e if p["complete"]]
        if c["sharding"] == "split":
            assert sp["duplicates"] == 0 and sp["missing"] == 0 and sp["unexpected"] == 0, sp
            assert all(p["seen"] == p["distinct"] == sp["expected_per_pass"] for p in complete)
            assert not rec.get("warnings")
        else:  # every worker read every shard: each sample once per worker in a complete pass
            assert all(
                p["distinct"] == 10 and p["duplicates"] == (workers - 1) * 10 and p["missing"] == 0 for p in complete
            ), sp
            assert any("duplicate" in w for w in rec["warnings"])


def test_a_killed_runner_leaves_no_server_namespace_or_qdisc(tmp_path):
    before = host_network()
    study, _ = write_study(
        tmp_path,
        "storage-killed",
        """workload = "jpeg"
storage = "http"
num_workers = 2
batch_size = 2
latency_ms = 20
bandwidth_mbit = 50
""",
        timeout_s=600,
        extra=DATASET,
    )
    study.write_text(study.read_text().replace("measure_batches = 4", "measure_batches = 100000"))  # runs until killed
    run = Run(tmp_path, study, tmp_path / "results")
    runner = run.runner_pid
    runners_group = os.getpgid(runner)  # the test's own: cells each have a group of their own
    deadline = time.monotonic() + GUARD_S
    spaces: set[str] = set()
    groups: set[int] = set()
    # the namespaces held at one moment once nginx serves: before that, the cell's probes of what the kernel can
    # shape (loaderbench.storage.host_tools) run in throwaway namespaces of their own, gone by then
    while not any(comm == "nginx" for _, comm in in_groups(groups)) or len(spaces) < (3 if KERNEL else 1):
        assert time.monotonic() < deadline, f"the cell's server never came up:\n{run.output()}"
        spaces = set()
        # groups with a tagged process alive now: a group whose members all ended frees its number, which
        # the kernel may hand to another test's process (pid_max can be 32768, and the suite forks a lot)
        tagged = tagged_processes(run.tag)
        live = set()
        for pid, _ in tagged:
            try:
                if os.getpgid(pid) != runners_group:
                    live.add(os.getpgid(pid))
            except OSError:
                pass
        groups |= live
        for pid, _ in tagged + in_groups(live):
            try:
                spaces.add(os.readlink(f"/proc/{pid}/ns/net"))  # the host's, the cell's, the server's
            except OSError:
                pass
        time.sleep(0.05)
    os.kill(runner, signal.SIGKILL)  # the runner's sentinel must end the cell, its server and path
    report = run.wait()
    assert report["leftovers"] == [] and in_groups(groups) == [], (report["leftovers"], in_groups(groups))
    private = spaces - {os.readlink("/proc/self/ns/net")}
    assert len(private) == (2 if KERNEL else 0), spaces  # the cell's and the server's, held by them only
    assert host_network() == before

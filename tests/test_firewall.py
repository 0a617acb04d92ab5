"""The two-node test cluster works whatever the host's firewall says: with the iptables FORWARD policy at DROP (as a
Docker daemon leaves a host's), its nodes reach each other and a job spanning both runs; a node the firewall cuts off
is named, with what blocks it, in one sentence, before anything is submitted.

The "host" here is a network namespace of this test's own, so this machine's own firewall is never touched: the
cluster's daemons, clients and firewall all live in it, exactly as they would in the machine's namespace, and it
goes away with the test (or with its process, if the test is killed)."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm_fixtures import TESTCLUSTER, _install

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PR_SET_PDEATHSIG = 1


def _dies_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def host_forward_rules() -> str:
    """This machine's own FORWARD chain, policy and rules."""
    return subprocess.run(["iptables", "-w", "5", "-S", "FORWARD"], capture_output=True, text=True).stdout


class Host:
    """A network namespace standing in for the cluster's host (with a mount namespace of its own for its named
    namespaces): commands run in it through nsenter."""

    def __init__(self, holder: subprocess.Popen):
        self.holder = holder
        self.prefix = ["nsenter", f"--net=/proc/{holder.pid}/ns/net", f"--mount=/proc/{holder.pid}/ns/mnt"]

    def run(self, *cmd: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.prefix, *cmd], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def iptables(self, *args: str) -> None:
        res = self.run("iptables", "-w", "5", *args)
        assert res.returncode == 0, f"iptables {' '.join(args)}: {res.stderr}"


@pytest.fixture
def host() -> Iterator[Host]:
    if os.geteuid() != 0:
        pytest.skip("two test nodes need root (network namespaces)")
    _install()  # Slurm, and iptables with it
    for tool in ("ip", "iptables", "nsenter", "unshare"):
        if shutil.which(tool) is None:
            pytest.skip(f"two test nodes need {tool} behind a firewall (slurm/testcluster/install.sh installs it)")
    before = host_forward_rules()
    # its own mount namespace too, with its own /run/netns: the cluster's named namespaces stay out of this
    # machine's `ip netns list`, which other tests compare before and after
    os.makedirs("/run/netns", exist_ok=True)
    holder = subprocess.Popen(
        [
            "unshare",
            "--net",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount -t tmpfs lbfw /run/netns && ip link set lo up && echo up && exec sleep 3600",
        ],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=_dies_with_parent,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "up"
        yield Host(holder)
    finally:
        holder.kill()
        holder.wait()
        assert host_forward_rules() == before, "this machine's FORWARD chain changed"


@pytest.fixture
def own_tmp() -> Iterator[Path]:
    """A folder outside pytest's numbered temporary folders, which another pytest session on this machine (a
    test that runs pytest) may rotate away while the cluster still writes there."""
    path = Path(tempfile.mkdtemp(prefix="lb-firewall-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_two_nodes_run_a_job_across_a_firewall_that_drops_forwarding(host: Host, own_tmp: Path) -> None:
    tmp_path = own_tmp
    host.iptables("-P", "FORWARD", "DROP")
    assert "-P FORWARD DROP" in host.run("iptables", "-S", "FORWARD").stdout
    state = tmp_path / "state"
    env = {
        **os.environ,
        "SLURM_TESTCLUSTER_NODES": "2",
        "SLURM_TESTCLUSTER_ACCOUNTING": "0",
        "SLURM_TESTCLUSTER_OWNER_PID": str(os.getpid()),
    }
    env.pop("SLURM_CONF", None)
    started = host.run(str(TESTCLUSTER / "start.sh"), str(state), env=env, timeout=600)
    try:
        assert started.returncode == 0, started.stderr
        nodes = (state / "node").read_text().split()
        slurm = {**env, "SLURM_CONF": str(state / "slurm.conf")}
        assert host.run(str(TESTCLUSTER / "check.sh"), str(state)).returncode == 0

        # the batch step runs on the first node; its srun launches a task on the second one, node to node
        out = tmp_path / "job.out"
        job = host.run(
            "sbatch",
            "--wait",
            "-N2",
            "-n2",
            "-t",
            "2",
            "--mem=64",
            "-o",
            str(out),
            "--wrap",
            "srun hostname",
            env=slurm,
        )
        assert job.returncode == 0, job.stderr + (out.read_text() if out.exists() else "")
        assert sorted(out.read_text().split()) == sorted(nodes)

        # a node this host's firewall cuts off: named, with what blocks it, in one sentence
        host.iptables("-P", "INPUT", "DROP")
        try:
            quick = {**env, "SLURM_TESTCLUSTER_CHECK_WAIT": "1"}
            check = host.run(str(TESTCLUSTER / "check.sh"), str(state), env=quick)
        finally:
            host.iptables("-P", "INPUT", "ACCEPT")
        assert check.returncode == 1
        lines = check.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].endswith("."), check.stderr
        assert f"node {nodes[0]} " in lines[0] and "from this host" in lines[0]
        assert "this host's iptables INPUT policy is DROP" in lines[0], lines[0]
    finally:
        host.run(str(TESTCLUSTER / "stop.sh"), str(state), env=env)

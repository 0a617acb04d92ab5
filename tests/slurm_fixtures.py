"""Session fixture ``slurm_cluster``: a real single-node Slurm cluster for the tests.

Import it from ``tests/conftest.py``::

    from slurm_fixtures import slurm_cluster  # noqa: F401 - pytest fixtures, used by name

and ``slurm_node`` (function scope) for a test that needs the cluster's one node to itself.

It runs ``slurm/testcluster/install.sh`` (Debian's Slurm 22.05 + munge + slurmdbd/MariaDB, only
when missing), then ``start.sh`` into a state folder unique to this pytest run, and ``stop.sh``
when the last user is done.

pytest-xdist: every worker that requests the fixture shares ONE cluster. The state folder and a
lock file live in the run's shared temporary folder (the parent of each worker's basetemp,
``/tmp/pytest-of-<user>/pytest-<N>/``). Under an exclusive ``flock`` a worker installs, starts
the cluster if it is not running (start.sh is idempotent) and adds itself to a users file; at
teardown it removes itself and the last live user runs stop.sh. start.sh also gets the pytest
controller's PID as owner: a watchdog stops the daemons if pytest dies without a teardown
(killed, timed out), so no run leaves daemons behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from loaderbench.processes import pid_alive

REPO = Path(__file__).resolve().parents[1]
TESTCLUSTER = REPO / "slurm" / "testcluster"

# install.sh exit codes meaning "cannot install here" (rather than "broken")
_EX_TEMPFAIL = 75  # the package archive is unreachable
_EX_NOPERM = 77  # not root and no password-less sudo
_SLURM_BINARIES = ("slurmctld", "slurmd", "munged", "sbatch", "srun", "squeue", "scancel")


@dataclass(frozen=True)
class SlurmCluster:
    state: Path  # the state folder (slurm.conf, logs under log/)
    env: dict[str, str]  # what a Slurm client needs: {"SLURM_CONF": ...}
    mode: str  # "cgroup" (binding and --mem enforced) or "linuxproc" (affinity only)
    accounting: bool  # slurmdbd runs: sacct and submitit's job.state work
    partition: str  # "debug"

    def environ(self) -> dict[str, str]:
        """os.environ plus ``env``, for subprocesses."""
        return {**os.environ, **self.env}

    def run(self, *cmd: str, check: bool = True, timeout: float = 30) -> str:
        """Run a Slurm client command against this cluster; return its stdout."""
        res = subprocess.run(cmd, env=self.environ(), capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr}")
        return res.stdout

    def cancel(self, *job_ids: str, timeout: float = 300) -> None:
        """scancel the jobs, then wait (a bound on hangs only) until they have left the queue: a cancelled job
        holds its CPUs while it is COMPLETING."""
        if not job_ids:
            return
        self.run("scancel", *job_ids, check=False)
        deadline = time.monotonic() + timeout
        while self.run("squeue", "-h", "-o", "%i", "-j", ",".join(job_ids), check=False).strip():
            if time.monotonic() > deadline:
                print(f"slurm_cluster: jobs {job_ids} still queued {timeout:.0f} s after scancel", file=sys.stderr)
                return
            time.sleep(0.5)

    def logs(self, lines: int = 30) -> str:
        """The tail of every daemon log, for failure messages."""
        out = []
        for f in sorted((self.state / "log").glob("*.log")):
            tail = f.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"----- {f}\n" + "\n".join(tail))
        return "\n".join(out)


def _shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-<N>/popen-gw0 -> pytest-<N>/, shared by all workers
    return base


def _owner_pid() -> int:
    # xdist workers are children of the controller; its death ends the whole run
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _users(path: Path) -> list[str]:
    """Tokens "pid:uuid" of the live users (dead workers are dropped)."""
    try:
        tokens = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return []
    return [t for t in tokens if pid_alive(int(t.split(":")[0]))]


def _install() -> None:
    res = subprocess.run([str(TESTCLUSTER / "install.sh")], capture_output=True, text=True, timeout=1200)
    if res.returncode == 0:
        return
    missing = [b for b in _SLURM_BINARIES if shutil.which(b) is None]
    detail = (res.stdout + res.stderr).strip()[-2000:]
    if missing and res.returncode in (_EX_TEMPFAIL, _EX_NOPERM):
        why = (
            "apt cannot reach the package archive"
            if res.returncode == _EX_TEMPFAIL
            else ("not root and no password-less sudo")
        )
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing) and {why}: {detail}")
    if missing:
        pytest.fail(f"slurm/testcluster/install.sh failed ({res.returncode}):\n{detail}")
    # Slurm itself is there (maybe not slurmdbd): start.sh copes, without accounting
    print(f"slurm_cluster: install.sh failed ({res.returncode}), using what is installed:\n{detail}", file=sys.stderr)


def start(state: Path, nodes: int = 1) -> None:
    """start.sh into `state` (idempotent: a cluster that lost a daemon is restarted whole)."""
    env = {**os.environ, "SLURM_TESTCLUSTER_OWNER_PID": str(_owner_pid()), "SLURM_TESTCLUSTER_NODES": str(nodes)}
    if nodes > 1:  # its tests read squeue and the records, not sacct: no second MariaDB to start
        env["SLURM_TESTCLUSTER_ACCOUNTING"] = "0"
    env.pop("SLURM_CONF", None)
    res = subprocess.run(
        [str(TESTCLUSTER / "start.sh"), str(state)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if res.returncode != 0:
        pytest.fail(f"slurm/testcluster/start.sh failed ({res.returncode}):\n{res.stdout}\n{res.stderr}", pytrace=False)


def _stop(state: Path) -> None:
    daemons = [int(p.read_text()) for p in (state / "pids").glob("*") if p.read_text().strip().isdigit()]
    res = subprocess.run([str(TESTCLUSTER / "stop.sh"), str(state)], capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        print(f"slurm_cluster: stop.sh failed ({res.returncode}):\n{res.stdout}\n{res.stderr}", file=sys.stderr)
    # A test that ran cells here made this process a child subreaper (loaderbench.measure.runner): the daemons,
    # orphaned when start.sh exited, became its children. Reap those, and only those.
    for pid in daemons:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A running single-node Slurm cluster, shared by every test (and xdist worker) of the run."""
    yield from _cluster(tmp_path_factory, "slurm", 1)


@pytest.fixture(scope="session")
def slurm_two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A running two-node Slurm cluster (each node in its own network namespace, one CPU each), shared likewise."""
    yield from _cluster(tmp_path_factory, "slurm2", 2)


def _cluster(tmp_path_factory: pytest.TempPathFactory, name: str, nodes: int) -> Iterator[SlurmCluster]:
    if not sys.platform.startswith("linux"):
        pytest.skip("the Slurm test cluster needs Linux")
    shared = _shared_dir(tmp_path_factory)
    state = shared / name
    lock = shared / f"{name}.lock"
    users = shared / f"{name}.users"
    token = f"{os.getpid()}:{uuid.uuid4().hex}"

    with _locked(lock):
        _install()
        if nodes > 1 and shutil.which("ip") is None:
            pytest.skip("two test nodes need ip(8) (iproute2) for their network namespaces")
        start(state, nodes)
        users.write_text(json.dumps([*_users(users), token]))

    cluster = SlurmCluster(
        state=state,
        env={"SLURM_CONF": str(state / "slurm.conf")},
        mode=(state / "mode").read_text().strip(),
        accounting=(state / "accounting").read_text().strip() == "1",
        partition=(state / "partition").read_text().strip(),
    )
    try:
        yield cluster
    finally:
        with _locked(lock):
            left = [t for t in _users(users) if t != token]
            users.write_text(json.dumps(left))
            if not left:
                _stop(state)


@pytest.fixture
def slurm_node(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The cluster, to this test alone: tests that use it run one at a time, across xdist workers too. Side by side,
    one test's jobs queue behind another's (the node has 2 CPUs), so how long a test waits for its own jobs would
    depend on what the other workers happen to run. (``xdist_group`` cannot give this: plain ``-n auto`` ignores it,
    and with pytest 9.2 even ``--dist loadgroup`` does, pytest-dev/pytest-xdist#1386.) A test's own fixtures cancel
    its jobs before this lock is released."""
    with _locked(_shared_dir(tmp_path_factory) / "slurm.node.lock"):
        yield slurm_cluster


@pytest.fixture
def slurm_two_nodes_alone(
    slurm_two_nodes: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmCluster]:
    """The two-node cluster, to this test alone (one test loses a node on purpose), as `slurm_node`."""
    with _locked(_shared_dir(tmp_path_factory) / "slurm2.node.lock"):
        yield slurm_two_nodes

"""What a cell process wraps its measuring in: `with serve_for_cell(cell, prepared) as storage:` starts the
cell's server and network path (storage = "http"), hands the workloads its endpoint (`storage.endpoint`),
and, on the way out, whatever happened inside, stops the server, returns the cell to the network namespace it
came from and checks that the server's processes are gone. `storage.metrics(...)` is the record's `storage`
block: the mechanisms that were in force, the requests, bytes and connections, the qdiscs' own counters.

The lifecycle lives in the cell process, before the DataLoader starts and after it is gone, so it is per cell
and outside every measured window; the server runs on the CPUs the cell does not use (all of them when the
cell uses all), as a remote server would.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path

from loaderbench.schema.cell import CellConfig
from loaderbench.storage import netns
from loaderbench.storage.client import COLUMNS, Endpoint, totals
from loaderbench.storage.host_tools import PathPlan, path_plan
from loaderbench.storage.server import (
    HANDSHAKE_TIMEOUT_S,
    SERVER_FAULTS,
    STOP_TIMEOUT_S,
    Fault,
    Lines,
    StorageSetupError,
    Supervisor,
    send,
)


def server_cpus() -> list[int]:
    """The CPUs the runner may use that this (pinned) cell does not; the cell's own when it has them all."""
    mine = os.sched_getaffinity(0)
    try:
        allowed = os.sched_getaffinity(os.getppid())
    except OSError:
        allowed = mine
    return sorted(allowed - mine) or sorted(mine)


def _gone(pid: int) -> bool:
    """No such process, or only its zombie (its parent reaps it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


class ServerHandle:
    """The cell's side of the supervisor (loaderbench.storage.server): start it, then stop it exactly once."""

    def __init__(self, ctl: int, info: int, plan: PathPlan):
        self.ctl, self.lines, self.plan = ctl, Lines(info), plan
        self.client_ns = netns.ClientNamespace() if plan.netns else None
        self.supervisor: int | None = None
        self.url: str | None = None
        self.ready: dict = {}
        self.hello: dict = {}
        self.stopped: dict | None = None
        self.leftovers: list[int] = []

    @classmethod
    def start(cls, plan: PathPlan, supervisor: Supervisor, cpus: list[int]) -> ServerHandle:
        ctl_r, ctl_w = os.pipe()
        info_r, info_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the intermediate: forks the supervisor and exits, so the supervisor is not the cell's child
            code = 70
            try:
                os.close(ctl_w)
                os.close(info_r)
                if os.fork() == 0:
                    code = _supervise(supervisor, ctl_r, info_w, cpus)
                else:
                    code = 0
            finally:
                os._exit(code)
        os.close(ctl_r)
        os.close(info_w)
        os.waitpid(pid, 0)
        handle = cls(ctl_w, info_r, plan)
        try:
            handle._handshake()
        except BaseException:
            handle.stop()
            raise
        return handle

    def _read(self, what: str) -> dict:
        try:
            message = self.lines.read(HANDSHAKE_TIMEOUT_S)
        except TimeoutError:
            raise StorageSetupError(
                f"the storage server's supervisor did not {what} within {HANDSHAKE_TIMEOUT_S:g} s"
            ) from None
        if message is None:
            raise StorageSetupError(f"the storage server's supervisor exited before it could {what}")
        if "error" in message:
            raise StorageSetupError(f"the storage server could not start: {message['error']}")
        return message

    def _handshake(self) -> None:
        self.hello = self._read("start")
        self.supervisor = int(self.hello["hello"])
        if self.client_ns is not None:
            try:
                self.client_ns.enter()
                self.client_ns.link_to(self.supervisor)
            except netns.NetnsError as exc:
                raise StorageSetupError(
                    f'the cell\'s private network could not be built: {exc}; shaping = "proxy" needs none'
                ) from None
        send(self.ctl, {"go": True})
        self.ready = self._read("serve")
        self.url = self.ready["ready"]

    @property
    def served_url(self) -> str:
        """The URL the server answers at, once it has said so (the handshake)."""
        if self.url is None:
            raise StorageSetupError("the storage server has not said where it serves")
        return self.url

    def server_pids(self) -> list[int]:
        return [p for p in ([self.supervisor] + list(self.ready.get("pids", []))) if p]

    def stop(self) -> None:
        """Stop the server (SIGKILL to whatever does not stop in time), leave the private namespace, and record
        any process of the server still alive afterwards (none should be)."""
        if self.ctl < 0:
            return
        try:
            send(self.ctl, {"stop": True})
            message = self.lines.read(STOP_TIMEOUT_S + 5)
            self.stopped = (message or {}).get("stopped")
            while message is not None:  # until the supervisor has exited (its end of the pipe closes)
                message = self.lines.read(STOP_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError):
            pass
        finally:
            for pid in self.server_pids():
                if not _gone(pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            os.close(self.ctl)
            os.close(self.lines.fd)
            self.ctl = -1
            if self.client_ns is not None:
                self.client_ns.leave()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline and not all(_gone(p) for p in self.server_pids()):
            time.sleep(0.02)
        self.leftovers = [p for p in self.server_pids() if not _gone(p)]


def _supervise(supervisor: Supervisor, ctl: int, info: int, cpus: list[int]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)  # SIGPIPE stays ignored: a gone cell is an error to handle, not death
    try:
        os.sched_setaffinity(0, cpus)
        supervisor.run(ctl, info)
        return 0
    except BaseException as exc:  # noqa: BLE001 - the cell hears why in words, then the supervisor ends
        try:
            send(info, {"error": f"{type(exc).__name__}: {exc}"})
        except OSError:
            pass
        return 1


class StorageSession:
    """One cell's storage: nothing for local storage; for HTTP, the server and path (see the module's doc)."""

    def __init__(self, cell: CellConfig, prepared):
        self.cell = cell
        self.prepared = prepared
        self.handle: ServerHandle | None = None
        self.plan: PathPlan | None = None
        self.counters = None
        self.cpus: list[int] = []
        self.endpoint: Endpoint | None = None  # what the workloads read from (storage = "http"), once started

    @property
    def http(self) -> bool:
        return self.cell.storage == "http"

    def start(self) -> None:
        if not self.http:
            return
        import torch

        cell = self.cell
        if cell.http_client is None or cell.http_timeout_s is None:  # set with storage = "http" (normalize)
            raise StorageSetupError('storage = "http" needs http_client and http_timeout_s')
        self.plan = plan = path_plan(cell)
        rows_per_rank = cell.num_workers + 1
        counters = torch.zeros((rows_per_rank * cell.ranks, len(COLUMNS)), dtype=torch.int64).share_memory_()
        self.counters = counters
        fault = cell.storage_fault or "none"
        self.cpus = server_cpus()
        supervisor = Supervisor(
            plan,
            None if cell.storage_url else served_root(cell, self.prepared),
            cell.storage_url,
            counters.numpy(),
            Fault(fault if fault in SERVER_FAULTS else "none", cell.storage_fault_at or 0),
            cell.seed,
        )
        self.handle = ServerHandle.start(plan, supervisor, self.cpus)
        self.endpoint = Endpoint(self.handle.served_url, cell.http_client, cell.http_timeout_s, counters, rows_per_rank)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()

    def metrics(self, samples_per_s: float | None) -> dict:
        """The record's `storage` block (empty for local storage)."""
        if not self.http or self.handle is None or self.plan is None:
            return {}
        h, plan, counts = self.handle, self.plan, totals(self.counters)
        per_sample = counts["bytes"] / counts["samples"] if counts["samples"] else None
        stopped = h.stopped or {}
        return {
            "storage": {
                "kind": "http",
                "url": h.url,
                "client": self.cell.http_client,
                "path": plan.describe(),
                "server": {
                    "kind": plan.server,
                    "nginx": h.ready.get("nginx"),
                    "pids": h.server_pids(),
                    "cpus": self.cpus,
                    "left_running": h.leftovers,
                },
                "netns": ({"client": h.client_ns.identity, "server": h.hello.get("netns")} if h.client_ns else None),
                "qdiscs": stopped.get("qdiscs", []),
                "fault": stopped.get("fault"),
                **counts,
                "bytes_per_sample": per_sample,
                "payload_mbit_per_s": (samples_per_s * per_sample * 8 / 1e6 if samples_per_s and per_sample else None),
            }
        }


def served_root(cell: CellConfig, prepared) -> Path:
    """The folder the cell's server serves: the shard set (shards workload) or the dataset's own folder."""
    if cell.workload == "shards":
        from loaderbench.workloads.shards import shard_set

        return shard_set(cell, prepared).root
    if prepared is None:
        raise StorageSetupError('storage = "http" needs a dataset to serve; this workload reads none')
    return Path(prepared.root)


@contextmanager
def serve_for_cell(cell: CellConfig, prepared):
    """The cell's storage, started, yielded, and stopped whatever happens inside. An exception leaving it
    carries what the server said (nginx's error log, the proxy's errors) as a note, which the record's
    traceback shows."""
    session = StorageSession(cell, prepared)
    try:
        session.start()
        yield session
    except BaseException as exc:
        session.stop()
        said = (session.handle.stopped or {}).get("server_log") if session.handle is not None else None
        if said:
            exc.add_note(f"the storage server said: {said}")
        raise
    finally:
        session.stop()

"""The server side of one cell: a supervisor process that owns the server (nginx, and the delaying proxy when
the path needs one), lives in the server's private network namespace when there is one, injects the cell's
storage fault, and stops everything when the cell says so or is gone.

The supervisor is forked twice from the cell process, so it is not the cell's child: the runner's probes sum
the cell's process tree as the loader's CPU and memory, and the server is no part of the loader. It stays in
the cell's process group, so the runner's teardown (and the runner's sentinel, should the runner die) kills it
with the cell; orphaned, it is adopted and reaped by the runner (a child subreaper). It also stops its server
by itself when its control pipe closes, i.e. when the cell process is gone.

The cell talks to it in JSON lines: the supervisor says `hello` (its pid, once it is in its namespace), gets
`go` (once the veth pair exists), answers `ready` (the URL) or `error`; `stop` gets `stopped` (the qdiscs'
counters, the fault it injected) and the supervisor exits once its children have.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from loaderbench.storage import netns, nginx
from loaderbench.storage.host_tools import PathPlan, find_program, nginx_version

PORT = 8080  # inside a private namespace nothing else can hold it
UPSTREAM_PORT = 8081  # nginx behind the proxy, on the server namespace's loopback
HANDSHAKE_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
FAULT_POLL_S = 0.01
SERVER_FAULTS = ("server_stop", "server_stall")


class StorageSetupError(RuntimeError):
    """The server or the network path of a storage cell could not be set up."""


@dataclass
class Lines:
    """JSON lines from a pipe, with a timeout."""

    fd: int
    buffer: bytes = b""

    def read(self, timeout_s: float) -> dict | None:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return None
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


def send(fd: int, message: dict) -> None:
    data = (json.dumps(message, default=str) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


@dataclass
class Fault:
    kind: str  # "none" | "server_stop" | "server_stall"
    at_requests: int = 0
    fired: dict | None = None


# --- the supervisor (its own process) --------------------------------------------------------------------


@dataclass
class Supervisor:
    plan: PathPlan
    root: Path | None
    upstream_url: str | None
    counters: object  # numpy int64 [rows, 4] in shared memory (requests in column 0), or None
    fault: Fault
    seed: int
    children: list = field(default_factory=list)
    log_fd: int | None = None  # nginx's error log (an unlinked file)
    proxy_log: object = None  # the proxy's stderr (an unlinked file)

    def run(self, ctl: int, info: int) -> None:
        """The supervisor's life; its server's processes are stopped on the way out, whatever ends it."""
        try:
            self._serve(ctl, info)
        finally:
            self.stop_children()

    def _serve(self, ctl: int, info: int) -> None:
        if self.plan.netns:
            netns.unshare_net()
        send(info, {"hello": os.getpid(), "netns": netns.net_namespace()})
        lines = Lines(ctl)
        go = lines.read(HANDSHAKE_TIMEOUT_S)
        if go is None or "go" not in go:  # the cell gave up (or is gone) before the path existed
            return
        try:
            url = self.start()
        except Exception as exc:  # noqa: BLE001 - every start failure is reported to the cell in words
            self.stop_children()
            send(info, {"error": f"{type(exc).__name__}: {exc}"})
            return
        pids = [p.pid for p in self.children]
        send(
            info,
            {
                "ready": url,
                "pids": pids,
                "nginx": nginx_version(find_program("nginx")) if self.root is not None else None,
            },
        )
        self.wait_for_stop(lines)
        stats = netns.qdisc_stats() if self.plan.netns else []
        self.stop_children()
        send(info, {"stopped": {"qdiscs": stats, "fault": self.fault.fired, "server_log": self.logs()}})

    def logs(self) -> str:
        """The tails of nginx's error log and the proxy's stderr (empty when they said nothing)."""
        parts = []
        if self.log_fd is not None and (text := nginx.read_log(self.log_fd, 1000)):
            parts.append(f"nginx: {text}")
        if self.proxy_log is not None:
            self.proxy_log.seek(0)
            if text := self.proxy_log.read().decode("utf-8", "replace").strip()[-1000:]:
                parts.append(f"proxy: {text}")
        return "; ".join(parts)

    def start(self) -> str:
        plan = self.plan
        if plan.netns:
            netns.configure_server_side(
                netns.qdisc_commands(plan.latency, plan.bandwidth, plan.latency_ms, plan.jitter_ms, plan.bandwidth_mbit)
            )
        outer_host = netns.SERVER_ADDR if plan.netns else "127.0.0.1"
        if self.root is not None:
            host, port = ("127.0.0.1", UPSTREAM_PORT) if plan.proxy else (outer_host, PORT)
            upstream = self.start_nginx(host, port)
            prefix = "/"
        else:
            from urllib.parse import urlsplit

            parts = urlsplit(self.upstream_url)
            upstream = (parts.hostname, parts.port or 80)
            prefix = parts.path if parts.path.endswith("/") else parts.path + "/"
        if not plan.proxy:
            return f"http://{upstream[0]}:{upstream[1]}{prefix}"
        port = self.start_proxy(outer_host, PORT if plan.netns else 0, upstream)
        return f"http://{outer_host}:{port}{prefix}"

    def start_nginx(self, host: str, port: int) -> tuple[str, int]:
        exe = find_program("nginx")
        attempts = 1 if self.plan.netns else 3  # on a shared loopback another process may take a free port first
        for attempt in range(attempts):
            if not self.plan.netns:
                port = nginx.free_port(host)
            try:
                proc, self.log_fd = nginx.start(exe, self.root, host, port)
            except RuntimeError as exc:
                if attempt + 1 < attempts and "Address already in use" in str(exc):
                    continue
                raise
            self.children.append(proc)
            return host, port
        raise AssertionError("unreachable")

    def start_proxy(self, host: str, port: int, upstream: tuple[str, int]) -> int:
        p = self.plan
        delays = p.latency == "proxy"
        cmd = [
            sys.executable,
            "-m",
            "loaderbench.storage.proxy",
            "--listen",
            f"{host}:{port}",
            "--upstream",
            f"{upstream[0]}:{upstream[1]}",
            "--latency-ms",
            repr(p.latency_ms if delays else 0.0),
            "--jitter-ms",
            repr(p.jitter_ms if delays else 0.0),
            "--bandwidth-mbit",
            repr(p.bandwidth_mbit if p.bandwidth == "proxy" else 0.0),
            "--seed",
            str(self.seed),
        ]
        # `-m`: the proxy is found by the import system of this interpreter, as the cell found loaderbench
        errors = self.proxy_log = tempfile.TemporaryFile()  # unlinked: nothing to leak, never full like a pipe
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, close_fds=True)
        self.children.append(proc)
        ready, _, _ = select.select([proc.stdout], [], [], HANDSHAKE_TIMEOUT_S)
        line = proc.stdout.readline().decode() if ready else ""
        if not line.startswith("ready "):
            proc.kill()
            proc.wait()
            errors.seek(0)
            raise RuntimeError(f"the delaying proxy did not start: {line.strip()} {errors.read().decode()[-500:]}")
        return int(line.split()[1])

    def wait_for_stop(self, lines: Lines) -> None:
        while True:
            try:
                message = lines.read(FAULT_POLL_S)
            except TimeoutError:
                self.check_fault()
                continue
            if message is None or "stop" in message:
                return

    def check_fault(self) -> None:
        f = self.fault
        if f.kind not in SERVER_FAULTS or f.fired is not None or self.counters is None:
            return
        requests = int(self.counters[:, 0].sum())
        if requests < f.at_requests:
            return
        sig = signal.SIGKILL if f.kind == "server_stop" else signal.SIGSTOP
        victims = []
        for proc in self.children:
            victims += [proc.pid] + _descendants(proc.pid)
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        f.fired = {"kind": f.kind, "after_requests": requests, "signal": signal.Signals(sig).name, "processes": victims}

    def stop_children(self) -> None:
        """SIGKILL the server's processes, nginx's workers included (listed before their master dies, since they
        are re-parented then): a static server has nothing to flush, and SIGKILL also ends a stalled one."""
        if not self.children:
            return
        victims = []
        for proc in self.children:
            victims += [proc.pid] + _descendants(proc.pid)
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for proc in self.children:
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass
        self.children = []


def _descendants(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        q = stack.pop()
        try:
            for t in os.listdir(f"/proc/{q}/task"):
                with open(f"/proc/{q}/task/{t}/children") as fh:
                    kids = [int(c) for c in fh.read().split()]
                out += kids
                stack += kids
        except (OSError, ValueError):
            continue
    return out

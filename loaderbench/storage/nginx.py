"""nginx for one cell: a configuration that serves one folder read-only on one address, started in the
foreground (`daemon off`, so it stays in the cell's process group and dies with it), and its readiness.

The configuration and nginx's temporary folders live in a work folder that exists only while nginx starts:
once nginx has written its pid file and started its worker (its start-up is over then; before, a missing
folder makes it exit), the folder is removed (nginx reads its configuration once; a static GET server never
writes its temporary folders), so a cell killed at any later moment leaves no file behind. Its error log goes
to an unlinked file the supervisor can still read.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

WORKDIR_PREFIX = "loaderbench-nginx-"
READY_TIMEOUT_S = 20.0


def config_text(root: Path, host: str, port: int, workdir: Path, workers: int) -> str:
    user = "user root root;\n" if os.geteuid() == 0 else ""  # nginx's default worker user may not read `root`
    temp = "\n".join(
        f"  {kind}_temp_path {workdir}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""{user}daemon off;
master_process on;
worker_processes {workers};
pid {workdir}/nginx.pid;
error_log stderr error;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 600s;
  keepalive_requests 10000000;
  types {{ image/jpeg jpg jpeg; application/x-tar tar; application/json json; }}
  default_type application/octet-stream;
{temp}
  server {{
    listen {host}:{port} backlog=4096;
    server_name _;
    root {root};
    location / {{ try_files $uri =404; }}
  }}
}}
"""


def sweep_stale_workdirs(base: str | None = None) -> None:
    """Remove work folders of nginx starts that were killed before they could remove their own (the folder name
    carries the starting process's pid)."""
    base = base or tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(base) if n.startswith(WORKDIR_PREFIX)]
    except OSError:
        return
    for name in names:
        try:
            pid = int(name[len(WORKDIR_PREFIX) :].split("-")[0])
        except ValueError:
            continue
        if not os.path.exists(f"/proc/{pid}"):
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)


def start(nginx: str, root: Path, host: str, port: int, workers: int = 1) -> tuple[subprocess.Popen, int]:
    """Start nginx serving `root` on host:port; returns the process and the descriptor of its error log (an
    unlinked file). Raises RuntimeError with nginx's own words when it does not come up."""
    sweep_stale_workdirs()
    workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
    log_fd = os.open(str(workdir / "stderr.log"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        conf = workdir / "nginx.conf"
        conf.write_text(config_text(root, host, port, workdir, workers))
        proc = subprocess.Popen(
            [nginx, "-p", str(workdir), "-c", str(conf), "-e", "stderr"],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            close_fds=True,
        )
        try:
            wait_listening(proc, host, port, log_fd)
            wait_started(proc, workdir / "nginx.pid", log_fd)
        except BaseException:
            kill(proc)
            raise
    except BaseException:
        os.close(log_fd)
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return proc, log_fd


def kill(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGKILL nginx with its workers and return once they are gone. The master is stopped first so that it forks
    no worker after its children are listed; a dead master's workers are re-parented and would live on, and they
    are not our children, so their end is awaited in /proc (a zombie counts as gone)."""
    try:
        os.kill(proc.pid, signal.SIGSTOP)
    except ProcessLookupError:
        pass
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
            workers = [int(c) for c in fh.read().split()]
    except OSError:
        workers = []
    for pid in [proc.pid, *workers]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.01)


def alive(pid: int) -> bool:
    """Whether `pid` is a process that has not yet exited (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def read_log(fd: int, limit: int = 2000) -> str:
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, limit, max(0, size - limit)).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def wait_listening(
    proc: subprocess.Popen, host: str, port: int, log_fd: int, timeout_s: float = READY_TIMEOUT_S
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited with status {proc.returncode} at start: {read_log(log_fd)}")
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"nginx did not accept connections on {host}:{port} within {timeout_s:g} s: {read_log(log_fd)}"
            )
        time.sleep(0.02)


def wait_started(proc: subprocess.Popen, pidfile: Path, log_fd: int, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Until nginx's start-up is over: it has written its pid file (after opening its sockets) and forked its
    worker (after the pid file)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"nginx exited with status {proc.returncode} at start: {read_log(log_fd)}")
        try:
            written = pidfile.read_text().strip() == str(proc.pid)
            with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as fh:
                forked = bool(fh.read().split())
        except OSError:
            written = forked = False
        if written and forked:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"nginx did not finish starting within {timeout_s:g} s: {read_log(log_fd)}")
        time.sleep(0.01)


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` now (another process may still take it before nginx binds it: start retries)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]

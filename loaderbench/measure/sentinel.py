"""The sentinel: a process forked beside each cell that ends the cell's process group, sweeps its /dev/shm segments
and removes its cgroup if the runner dies before it could tear the cell down itself. The runner holds the write
end of a pipe; the sentinel reads it until it closes, and does nothing if the runner wrote SENTINEL_DONE first.
"""

from __future__ import annotations

import os
import signal
import time

from loaderbench.measure.probes import cell_processes, sweep_shm
from loaderbench.processes import kill_group

SENTINEL_DONE = b"d"


def start_sentinel(pgid: int, cgroup, shm_before: set[str]) -> tuple[int | None, int | None]:
    """Fork the sentinel; returns (its pid, the pipe end the runner holds)."""
    try:
        r, w = os.pipe()
    except OSError:
        return None, None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None, None
    if pid == 0:
        code = 0
        try:
            os.close(w)
            _sentinel(r, pgid, cgroup, shm_before)
        except BaseException:  # noqa: BLE001 - never let the sentinel run runner code
            code = 1
        finally:
            os._exit(code)
    os.close(r)
    return pid, w


def _sentinel(r: int, pgid: int, cgroup, shm_before: set[str]) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP):
        signal.signal(sig, signal.SIG_IGN)  # the runner decides; the sentinel only reacts to its death
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    data = b""
    while True:
        try:
            chunk = os.read(r, 16)
        except InterruptedError:
            continue
        if not chunk:
            break
        data += chunk
    if SENTINEL_DONE in data:
        return  # the runner tore the cell down itself
    kill_group(pgid)
    pids: set[int] = set()
    for _ in range(200):  # until the group is gone (a forkserver may still be forking): at most ~10 s
        extra = cgroup.pids() if cgroup is not None else []
        procs = cell_processes(pgid, extra)
        if not procs:
            break
        for p in procs:
            pids.add(p.pid)
            try:
                p.kill()
            except Exception:  # noqa: BLE001 - psutil raises several types for a process already gone
                pass
        time.sleep(0.05)
    sweep_shm(shm_before, pids)
    if cgroup is not None:
        cgroup.remove()


def stop_sentinel(pid: int | None, w: int | None, done: bool = True) -> None:
    """Tell the sentinel the cell is torn down (done) or, if the teardown was cut short, let it finish the job."""
    if w is not None:
        if done:
            try:
                os.write(w, SENTINEL_DONE)
            except OSError:
                pass
        os.close(w)
    if pid is not None:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass

"""A child process forked from the bench, as the runner forks a cell: its own process group, default signal
handlers, and a dict result that comes back through a `loaderbench.processes.ResultChannel`.

Contract: `forked(body)` is a context manager yielding a `Child`. In the child, `body()` runs and its dict
(or `{"error", "traceback"}` when it raised) is written to the channel; the child then leaves with
`os._exit`, so no parent clean-up runs twice. On leaving the context the child is waited for (killed with
its whole group first when `Child.wait` gave up on it), what is left of its group (DataLoader workers) is
killed, and `Child.result` holds what it wrote, or None when it wrote nothing.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from loaderbench.processes import ResultChannel, kill_group

CHILD_FAILED = 70  # EX_SOFTWARE: the child could not even report


@dataclass
class Child:
    pid: int
    channel: ResultChannel
    status: int | None = None  # exit code as os.waitstatus_to_exitcode gives it
    timed_out: bool = False
    result: dict | None = None

    def wait(self, timeout_s: float, poll_s: float = 0.05) -> bool:
        """Wait for the child to exit; False (and `timed_out`) when it is still running after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            pid, raw = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(raw)
                return True
            if time.monotonic() > deadline:
                self.timed_out = True
                return False
            time.sleep(poll_s)

    def _end(self) -> None:
        if self.status is None:
            kill_group(self.pid)
            _, raw = os.waitpid(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(raw)
        kill_group(self.pid)  # leftovers of its group (workers), if any
        self.result = self.channel.read()

    def error(self) -> str:
        """Why there is no result, in words."""
        why = "timed out" if self.timed_out else f"exit status {self.status}"
        return f"the child process left no result ({why})"


def _child_main(body: Callable[[], dict], channel: ResultChannel, close_fds: tuple[int, ...]) -> None:
    code = CHILD_FAILED
    try:
        os.setpgid(0, 0)  # the parent kills the whole group (workers included) when it is done
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for fd in close_fds:
            os.close(fd)
        try:
            result = body()
        except BaseException as exc:  # noqa: BLE001 - reported through the channel, never raised in a fork
            result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
        channel.overwrite(result)
        code = 0
    finally:
        os._exit(code)


@contextmanager
def forked(body: Callable[[], dict], close_in_child: tuple[int, ...] = ()) -> Iterator[Child]:
    """Fork a child running `body()`; `close_in_child`: the parent's pipe ends the child must not hold."""
    with ResultChannel() as channel:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child_main(body, channel, close_in_child)
        try:
            os.setpgid(pid, pid)  # also done by the child; whichever runs first wins the race harmlessly
        except (ProcessLookupError, PermissionError):
            pass
        child = Child(pid, channel)
        try:
            yield child
        finally:
            child._end()

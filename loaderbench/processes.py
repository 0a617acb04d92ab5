"""Process helpers every part of the suite needs: is a pid alive, kill a process group, the channel a forked
child writes its JSON result to, and handing freed memory back to the system."""

from __future__ import annotations

import json
import os
import signal
import tempfile


def trim_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere). After a burst of
    small allocations, such as a table unpickled from worker processes, glibc keeps the freed pages: this process
    stays that much larger, and so does every process forked from it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: its allocator returns memory its own way


def signame(num: int) -> str:
    """SIGKILL for 9; "signal N" for a number that names no signal."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    if pid <= 0:  # 0 and negatives name process groups to os.kill, never one process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group (a cell with its workers), if it still exists."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class ResultChannel:
    """Where a forked child leaves its JSON result: an anonymous in-memory file (so a killed parent leaves no
    temp file behind), else a temp file. The parent opens it before forking; the child writes to `path`
    (or, when its own file descriptors ran out, straight to the inherited `fd`); the parent reads and closes."""

    def __init__(self) -> None:
        try:
            self.fd = os.memfd_create("loaderbench-result")
            self.path, self._is_file = f"/proc/self/fd/{self.fd}", False
        except (AttributeError, OSError):
            self.fd, self.path = tempfile.mkstemp(prefix="loaderbench-result-", suffix=".json")
            self._is_file = True

    def read(self) -> dict | None:
        """The child's result, or None when it wrote nothing complete."""
        try:
            os.lseek(self.fd, 0, os.SEEK_SET)
            chunks = []
            while True:
                b = os.read(self.fd, 1 << 20)
                if not b:
                    break
                chunks.append(b)
            text = b"".join(chunks).decode("utf-8", "replace")
            result = json.loads(text) if text.strip() else None
            return result if isinstance(result, dict) else None
        except (OSError, ValueError):
            return None

    def overwrite(self, result: dict) -> None:
        """From the child, through the inherited descriptor (works with no descriptor left to open a file)."""
        data = json.dumps(result, default=str).encode()
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        while data:
            data = data[os.write(self.fd, data) :]

    def close(self) -> None:
        os.close(self.fd)
        if self._is_file:
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def __enter__(self) -> ResultChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

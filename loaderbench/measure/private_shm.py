"""A cell's own /dev/shm of a given size (`shm_size_mb`): a tmpfs mounted in a private mount namespace of the
cell's, as a container's `--shm-size` gives one.

The cell process enters a new mount namespace right after it is forked (`enter`) and mounts the tmpfs there;
its workers, torch_shm_manager and anything else it starts inherit that namespace, so the loader sees only
this /dev/shm. The runner opens the mount through /proc/<cell>/root (`PrivateShm.open`) and holds that
descriptor: it reads the use of this /dev/shm alone (no other user's segments add noise), and once every
process of the cell is gone it counts what they left in it before removing it. The namespace ends with the
cell's last process; the tmpfs ends when the runner closes its descriptor. Nothing outlives the cell.

The size a setting needs is computed from one measured batch: each worker keeps up to `prefetch_factor`
batches in shared memory, and the main process holds the batch it consumes and the one before it until the
next arrives (`needed_bytes`).
"""

from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
SHM = "/dev/shm"
#: the main process's batches beside those in flight: the one being consumed and the one it replaces
MAIN_HELD = 2
#: headroom on the computed size, for page rounding and what torch adds beside tensors
MARGIN = 1.25


class PrivateShmError(RuntimeError):
    """The private /dev/shm could not be set up (no CAP_SYS_ADMIN: unshare or mount refused)."""


def enter(size_mb: int) -> None:
    """In the cell process, before anything else runs: a private mount namespace with a tmpfs of `size_mb` MiB
    on /dev/shm. The process must have no threads (unshare(CLONE_NEWNS) refuses a threaded process)."""
    libc = ctypes.CDLL(None, use_errno=True)
    steps = (
        ("unshare(CLONE_NEWNS)", lambda: libc.unshare(CLONE_NEWNS)),
        ("making / a private mount", lambda: libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)),
        (
            f"mounting a {size_mb} MiB tmpfs on {SHM}",
            lambda: libc.mount(b"loaderbench-shm", SHM.encode(), b"tmpfs", 0, f"size={size_mb}m,mode=1777".encode()),
        ),
    )
    for what, call in steps:
        if call() != 0:
            err = ctypes.get_errno()
            raise PrivateShmError(
                f"shm_size_mb = {size_mb}: {what} failed ({os.strerror(err)}); a private /dev/shm needs root or "
                "CAP_SYS_ADMIN (a container started with --cap-add SYS_ADMIN): leave shm_size_mb unset here"
            )


@dataclass
class PrivateShm:
    """The runner's handle on a cell's private /dev/shm: a descriptor of its root directory."""

    fd: int
    size_bytes: int

    @classmethod
    def open(cls, pid: int) -> PrivateShm | None:
        """The /dev/shm cell `pid` mounted for itself; None when it is the runner's own (the mount failed)."""
        try:
            fd = os.open(f"/proc/{pid}/root{SHM}", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return None
        try:
            if os.fstat(fd).st_dev == os.stat(SHM).st_dev:
                os.close(fd)
                return None
        except OSError:
            pass
        st = os.fstatvfs(fd)
        return cls(fd, st.f_blocks * st.f_frsize)

    def used(self) -> int:
        try:
            st = os.fstatvfs(self.fd)
        except OSError:
            return 0
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def entries(self) -> dict[str, int]:
        """Every entry and its size in bytes."""
        out = {}
        for name in os.listdir(self.fd):
            try:
                out[name] = os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_size
            except OSError:
                continue
        return out

    def clear(self) -> dict:
        """Once every process of the cell is gone: what they left (counted before it is removed), then remove it
        all and let the tmpfs go."""
        left = self.entries()
        for name in left:
            try:
                os.unlink(name, dir_fd=self.fd)
            except OSError:
                pass
        os.close(self.fd)
        self.fd = -1
        return {
            "left_segments": len(left),
            "left_bytes": sum(left.values()),
            "left_names": sorted(left)[:20],
        }


def in_flight_batches(num_workers: int, prefetch_factor: int | None) -> int:
    """Batches that may sit in shared memory at once: prefetch_factor per worker, and the main process's own."""
    if num_workers == 0:
        return 0
    return num_workers * (prefetch_factor or 2) + MAIN_HELD


def needed_bytes(batch_bytes: int, num_workers: int, prefetch_factor: int | None) -> int:
    """The /dev/shm a setting needs, from one measured batch's bytes, with MARGIN, rounded up to a MiB."""
    raw = batch_bytes * in_flight_batches(num_workers, prefetch_factor) * MARGIN
    return math.ceil(raw / 2**20) * 2**20


def tensor_bytes(sample) -> int:
    """Bytes of the tensors (and arrays) one sample holds, walked through tuples, lists and dicts."""
    if hasattr(sample, "nbytes") and not isinstance(sample, (bytes, bytearray, memoryview)):
        return int(sample.nbytes)
    if isinstance(sample, dict):
        return sum(tensor_bytes(v) for v in sample.values())
    if isinstance(sample, (tuple, list)):
        return sum(tensor_bytes(v) for v in sample)
    return 0


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n / 2**10:,.1f} KiB"


def too_small_message(was: str, size_mb: int, per_batch: int | None, num_workers: int, prefetch_factor) -> str:
    """The shm_exhausted message of a cell with a private /dev/shm: the size given and, from the measured batch,
    the size that would have sufficed."""
    head = f"/dev/shm of shm_size_mb = {size_mb} MiB is too small for this setting"
    if not per_batch or num_workers == 0:
        return f"{head}: {was}"
    need = needed_bytes(per_batch, num_workers, prefetch_factor)
    n = in_flight_batches(num_workers, prefetch_factor)
    return (
        f"{head}: up to {n} batches of {mib(per_batch)} (measured) are in flight, so a /dev/shm of at least "
        f"{need // 2**20} MiB would suffice (docker run --shm-size={need // 2**20}m); {was}"
    )

"""A cell's own /dev/shm seen from both sides of the fork (loaderbench.measure.private_shm holds the mount): the
cell mounts it and tells the runner; the runner opens it to watch its use, then writes that use, and the size that
would have sufficed, into the record."""

from __future__ import annotations

import os

from loaderbench.schema.cell import CellConfig
from loaderbench.schema.record import Record


def enter_in_cell(cell: CellConfig, channel, shm_r: int, shm_w: int) -> None:
    """In the cell: its own /dev/shm (loaderbench.measure.private_shm), then tell the runner. A cell that cannot
    have one records why and ends."""
    from loaderbench.measure.private_shm import PrivateShmError, enter

    os.close(shm_r)
    try:
        enter(int(cell.shm_size_mb or 0))
    except PrivateShmError as exc:
        channel.overwrite({"status": "failed", "error": {"kind": "shm_setup", "message": str(exc)}})
        os._exit(0)
    os.write(shm_w, b"m")
    os.close(shm_w)


def open_in_runner(pid: int, shm_r: int):
    """The runner's handle on the cell's private /dev/shm once the cell has mounted it; None when it could not."""
    from loaderbench.measure.private_shm import PrivateShm

    try:
        mounted = os.read(shm_r, 1) == b"m"
    finally:
        os.close(shm_r)
    return PrivateShm.open(pid) if mounted else None


def into_record(record: Record, cell: CellConfig, left: dict, result: dict | None) -> None:
    """A cell with its own /dev/shm: its use into the metrics, and, when it was too small, the size that would
    have sufficed (from the batch the cell measured) into the failure's message."""
    from loaderbench.measure.private_shm import in_flight_batches, needed_bytes, too_small_message
    from loaderbench.measure.rank import SHM_BATCH

    batch = (result or {}).get(SHM_BATCH)
    workers, prefetch = cell.num_workers, cell.prefetch_factor
    size_mb = int(cell.shm_size_mb or 0)
    record.metrics = {
        **(record.metrics or {}),
        "shm_private": {
            "size_bytes": size_mb * 2**20,
            "batch_bytes": batch,
            "in_flight_batches": in_flight_batches(workers, prefetch),
            "needed_bytes": needed_bytes(batch, workers, prefetch) if batch else None,
            "left_segments": left["left_segments"],
            "left_bytes": left["left_bytes"],
        },
    }
    if record.error and record.error.get("kind") == "shm_exhausted":
        message = too_small_message(record.error["message"], size_mb, batch, workers, prefetch)
        record.error = {"kind": "shm_exhausted", "message": message}

"""What every workload can carry besides its per-sample cost, for the questions the claim studies ask:

- an index of per-sample entries held in one of several backings (the copy-on-write question): each
  sample reads its entry, as a dataset reading its file list would;
- a Python payload the dataset object carries (what spawn and forkserver must pickle to each worker);
- a straggler: extra wait per sample in worker 0 only, or on every N-th sample in any worker (occasional
  stragglers) (the in_order question).
"""

from __future__ import annotations

import time

import numpy as np

from loaderbench.schema.cell import CellConfig

#: one decoded image of the `decoded` backing: 3 x 224 x 224 uint8 (147 KiB)
DECODED_SHAPE = (3, 224, 224)


def build_index(backing: str | None, items: int | None):
    """An index of `items` entries: file names as a Python list of str, NumPy fixed-width bytes, NumPy object or
    Arrow (a lazy dataset, decoding on access), or decoded images (an eager one)."""
    if not backing or backing == "none":
        return None
    names = [f"n{i % 1000:05d}/n{i % 1000:05d}_{i:08d}.JPEG" for i in range(items or 0)]
    if backing == "list_str":
        return names
    if backing == "numpy_bytes":
        return np.array(names, dtype="S32")
    if backing == "numpy_object":
        return np.array(names, dtype=object)
    if backing == "arrow":
        import pyarrow as pa

        return pa.array(names, type=pa.string())
    if backing == "decoded":  # an eager dataset: every image decoded up front, held as NumPy arrays
        return [np.full(DECODED_SHAPE, i % 251, dtype=np.uint8) for i in range(items or 0)]
    if backing == "decoded_objects":  # an eager dataset holding Python objects: each image as its pixel rows
        channels, height, width = DECODED_SHAPE
        return [[bytes([i % 251]) * width for _ in range(channels * height)] for i in range(items or 0)]
    raise ValueError(f"unknown index backing {backing!r}")


def read_entry(index, i: int) -> int:
    """Read sample i's entry the way a dataset would (Arrow: .as_py(); others: plain indexing)."""
    if index is None:
        return 0
    entry = index[i % len(index)]
    if hasattr(entry, "as_py"):
        entry = entry.as_py()
    if isinstance(entry, list):  # an image held as Python objects: assembled from its rows, as a dataset would
        return len(b"".join(entry))
    return len(entry)


def build_payload(mb: float | None) -> list[str] | None:
    """About `mb` MiB of small Python strings: pickling cost grows with object count, as real metadata does."""
    if not mb:
        return None
    n = int(mb * 1024 * 1024 / 100)
    return [f"{i:012d}" + "x" * 88 for i in range(n)]


def straggle(slow_ms: float | None, indices: list[int], every: int = 0) -> None:
    """Wait `slow_ms` per sample in worker 0 (every = 0), or on each of `indices` divisible by `every` in any
    worker (occasional stragglers)."""
    if not slow_ms:
        return
    if every:
        slow = sum(1 for i in indices if i % every == 0)
        if slow:
            time.sleep(slow_ms * slow / 1000.0)
        return
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    if info is not None and info.id == 0:
        time.sleep(slow_ms * len(indices) / 1000.0)


class Extras:
    """Mixin: the index, payload and straggler of a workload dataset (set with `with_extras`)."""

    index = None
    payload = None
    slow_ms = 0.0
    slow_every = 0
    epoch_mark = 0  # the main process's epoch count where `epoch_attribute`: what a worker's copy saw

    def extras(self, i: int) -> None:
        read_entry(self.index, i)
        straggle(self.slow_ms, [i], self.slow_every)

    def extras_batch(self, indices: list[int]) -> None:
        for i in indices:
            read_entry(self.index, i)
        straggle(self.slow_ms, indices, self.slow_every)


def with_extras(dataset, cell: CellConfig):
    dataset.index = build_index(cell.index_backing, cell.index_items)
    dataset.payload = build_payload(cell.parent_payload_mb)
    dataset.slow_ms = cell.slow_worker_ms or 0.0
    dataset.slow_every = cell.slow_every or 0
    return dataset

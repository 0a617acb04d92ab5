"""CPU-bound loading that releases the GIL: each sample compresses `zlib_kb` KiB with zlib.

zlib drops the GIL while it compresses (as Pillow's decode, hashing and most tensor ops do), so thread workers
can share the cores here, unlike the pure-Python `cpu` workload. The input is fixed pseudo-random bytes, so the
work costs the same in every cell and on every machine.
"""

from __future__ import annotations

import random
import zlib

from torch.utils.data import Dataset

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource
from loaderbench.workloads.claim_axes import Extras
from loaderbench.workloads.payload import make_sample


def block(kib: float) -> bytes:
    """Compressible bytes: pseudo-random words from a small vocabulary (real text compresses about as hard)."""
    rng = random.Random(0)
    words = [bytes(rng.choices(range(97, 123), k=rng.randint(2, 9))) for _ in range(512)]
    out = bytearray()
    while len(out) < kib * 1024:
        out += rng.choice(words) + b" "
    return bytes(out[: int(kib * 1024)])


def squeeze(data: bytes, index: int) -> int:
    """Compress `data` (the GIL released while zlib works); the length keeps the result from being dropped."""
    return len(zlib.compress(data, 6)) + index % 2


class ZlibDataset(Extras, Dataset):
    def __init__(self, length: int, zlib_kb: float, sample_kb: float, tensors_per_sample: int):
        self.length, self.data = length, block(zlib_kb)
        self.sample_kb, self.tensors = sample_kb, tensors_per_sample

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.extras(index)
        squeeze(self.data, index)
        return make_sample(index, self.sample_kb, self.tensors)


class BatchedZlibDataset(ZlibDataset):
    def __getitems__(self, indices: list[int]):
        self.extras_batch(indices)
        for i in indices:
            squeeze(self.data, i)
        return [make_sample(i, self.sample_kb, self.tensors) for i in indices]


def build(cell: CellConfig, length: int, source: DataSource) -> ZlibDataset:
    cls = BatchedZlibDataset if cell.batched else ZlibDataset
    return cls(length, cell.zlib_kb or 64.0, cell.sample_kb or 0.0, cell.tensors_per_sample or 1)

"""I/O-bound loading: each sample waits (blocking, GIL released) as a remote read would.

Batched, the wait is paid once per batch, as one bulk request for N rows would (the tutorial's model).
"""

from __future__ import annotations

import time

from torch.utils.data import Dataset

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource
from loaderbench.workloads.claim_axes import Extras
from loaderbench.workloads.payload import make_sample


class SleepDataset(Extras, Dataset):
    def __init__(self, length: int, sleep_ms: float, sample_kb: float, tensors_per_sample: int):
        self.length, self.sleep_s = length, sleep_ms / 1000.0
        self.sample_kb, self.tensors = sample_kb, tensors_per_sample

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.extras(index)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return make_sample(index, self.sample_kb, self.tensors, self.epoch_mark)


class BatchedSleepDataset(SleepDataset):
    def __getitems__(self, indices: list[int]):
        self.extras_batch(indices)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return [make_sample(i, self.sample_kb, self.tensors, self.epoch_mark) for i in indices]


def build(cell: CellConfig, length: int, source: DataSource) -> SleepDataset:
    cls = BatchedSleepDataset if cell.batched else SleepDataset
    return cls(length, cell.sleep_ms or 0.0, cell.sample_kb or 0.0, cell.tensors_per_sample or 1)

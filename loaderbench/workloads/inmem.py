"""Cheap loading: samples already in memory, each after a set amount of CPU work.

The samples are built once, when the dataset is made (a pool of uint8 tensors of `sample_bytes`, handed out by
index), so a sample costs no allocation or I/O: only `work_us` microseconds of CPU, spent by the loading thread
and counted on its own CPU clock, so a worker that shares its core with others takes longer in wall time, as
real work would. What is left is what num_workers changes: collating the batch, and with workers handing it
to the main process.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource
from loaderbench.workloads.claim_axes import Extras

#: distinct samples kept in memory; index i gets sample i % POOL
POOL = 64


def spend_cpu(microseconds: float) -> None:
    """Keep the calling thread on the CPU for `microseconds` of its own CPU time."""
    if microseconds <= 0:
        return
    end = time.thread_time_ns() + int(microseconds * 1000)
    while time.thread_time_ns() < end:
        pass


class InMemoryDataset(Extras, Dataset):
    def __init__(self, length: int, work_us: float, sample_bytes: int):
        self.length, self.work_us = length, work_us
        self.samples = [torch.full((sample_bytes,), i % 251, dtype=torch.uint8) for i in range(POOL)]

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.extras(index)
        spend_cpu(self.work_us)
        return self.samples[index % POOL], index % 1000


class BatchedInMemoryDataset(InMemoryDataset):
    def __getitems__(self, indices: list[int]):
        self.extras_batch(indices)
        spend_cpu(self.work_us * len(indices))
        return [(self.samples[i % POOL], i % 1000) for i in indices]


def build(cell: CellConfig, length: int, source: DataSource) -> InMemoryDataset:
    cls = BatchedInMemoryDataset if cell.batched else InMemoryDataset
    return cls(length, cell.work_us or 0.0, cell.sample_bytes or 16)

"""CPU-bound loading: a fixed amount of pure-Python work per sample (no sleeping, no threads).

The work is counted in loop iterations, not seconds, so it costs the same everywhere and a slower
or oversubscribed CPU shows up as lower throughput.
"""

from __future__ import annotations

from torch.utils.data import Dataset

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource
from loaderbench.workloads.claim_axes import Extras
from loaderbench.workloads.payload import make_sample


def burn(kilo_iterations: int, seed: int) -> int:
    x = seed | 1
    for _ in range(kilo_iterations * 1000):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


class CpuDataset(Extras, Dataset):
    def __init__(self, length: int, cpu_work: int, sample_kb: float, tensors_per_sample: int):
        self.length, self.cpu_work = length, cpu_work
        self.sample_kb, self.tensors = sample_kb, tensors_per_sample

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.extras(index)
        burn(self.cpu_work, index)
        return make_sample(index, self.sample_kb, self.tensors, self.epoch_mark)


class BatchedCpuDataset(CpuDataset):
    def __getitems__(self, indices: list[int]):
        self.extras_batch(indices)
        burn(self.cpu_work * len(indices), indices[0] if indices else 0)
        return [make_sample(i, self.sample_kb, self.tensors, self.epoch_mark) for i in indices]


def build(cell: CellConfig, length: int, source: DataSource) -> CpuDataset:
    cls = BatchedCpuDataset if cell.batched else CpuDataset
    return cls(length, cell.cpu_work or 0, cell.sample_kb or 0.0, cell.tensors_per_sample or 1)

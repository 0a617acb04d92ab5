"""The PyTorch data-loading tutorial's own synthetic dataset: a random 3x224x224 image
and a label per sample after a blocking delay; batched, one vectorised draw and one delay per batch."""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource
from loaderbench.workloads.claim_axes import Extras


class TutorialDataset(Extras, Dataset):
    def __init__(self, length: int, sleep_ms: float, feature_dim: int = 224):
        self.length, self.sleep_s, self.dim = length, sleep_ms / 1000.0, feature_dim

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.extras(index)
        data = torch.randn(3, self.dim, self.dim)
        label = torch.randint(0, 10, (1,)).item()
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return data, label


class BatchedTutorialDataset(TutorialDataset):
    def __getitems__(self, indices: list[int]):
        self.extras_batch(indices)
        n = len(indices)
        data = torch.randn(n, 3, self.dim, self.dim)
        labels = torch.randint(0, 10, (n,))
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return [(data[i], labels[i].item()) for i in range(n)]


def build(cell: CellConfig, length: int, source: DataSource) -> TutorialDataset:
    return (BatchedTutorialDataset if cell.batched else TutorialDataset)(length, cell.sleep_ms or 0.0)

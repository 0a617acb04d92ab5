"""Random draws per sample from Python's `random`, NumPy's global generator and torch, as augmentations
would make them, so the consumer can count draws that repeat across workers or epochs."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource
from loaderbench.workloads.claim_axes import Extras


class RngDataset(Extras, Dataset):
    def __init__(self, length: int):
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.extras(index)
        info = get_worker_info()
        wid = -1 if info is None else info.id
        draws = torch.tensor([random.random(), float(np.random.random()), float(torch.rand(1))], dtype=torch.float64)
        return draws, wid


class BatchedRngDataset(RngDataset):
    def __getitems__(self, indices: list[int]):
        return [self[i] for i in indices]


def seed_all_worker_init(worker_id: int) -> None:
    """The usual fix: derive Python's and NumPy's seeds from torch's per-worker seed."""
    seed = torch.initial_seed() % 2**32
    random.seed(seed)
    np.random.seed(seed)


def duplicate_fractions(draws: list) -> dict:
    """draws: per epoch, a (samples, 3) array. Fraction of draws equal to another draw in the same epoch,
    and fraction of an epoch's draws already seen in the previous epoch, per source."""
    out = {}
    for k, name in enumerate(("python", "numpy", "torch")):
        within = []
        across = []
        prev = None
        for epoch in draws:
            col = np.asarray(epoch)[:, k]
            _, counts = np.unique(col, return_counts=True)
            within.append(float(counts[counts > 1].sum() / len(col)))
            if prev is not None:
                across.append(float(np.isin(col, prev).mean()))
            prev = col
        out[name] = {
            "within_epoch": float(np.mean(within)),
            "across_epochs": float(np.mean(across)) if across else None,
        }
    return out


def build(cell: CellConfig, length: int, source: DataSource) -> RngDataset:
    return (BatchedRngDataset if cell.batched else RngDataset)(length)

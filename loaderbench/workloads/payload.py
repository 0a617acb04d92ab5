"""The tensors a synthetic sample returns: a given size, split into a given number of tensors."""

from __future__ import annotations

import torch

#: a sample's label is its index modulo this, plus this times the dataset's epoch mark (`epoch_attribute`)
LABEL_MODULO = 1000


def make_sample(index: int, sample_kb: float, tensors: int, mark: int = 0):
    numel = max(1, int(sample_kb * 1024 / 4 / tensors))
    value = float(index % 251)
    parts = [torch.full((numel,), value, dtype=torch.float32) for _ in range(tensors)]
    return (parts[0] if tensors == 1 else parts), index % LABEL_MODULO + LABEL_MODULO * mark

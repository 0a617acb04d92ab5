"""The tensors a synthetic sample returns: a given size, split into a given number of tensors."""

from __future__ import annotations

import torch


def make_sample(index: int, sample_kb: float, tensors: int):
    numel = max(1, int(sample_kb * 1024 / 4 / tensors))
    value = float(index % 251)
    parts = [torch.full((numel,), value, dtype=torch.float32) for _ in range(tensors)]
    return (parts[0] if tensors == 1 else parts), index % 1000

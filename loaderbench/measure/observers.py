"""What a cell learns from its batches without touching the measuring loop: observers see each batch through
the step function the loop already calls (loaderbench.measure.loop.run_loop), together with its index in the epoch.

- `RngRecorder` (the rng workload) keeps each epoch's draws, to count repeats across workers and epochs.
- `TailDuplicates` (every iterable dataset) fingerprints the samples of the batches consumed after the
  measured window (the tail: loaderbench.study.window.plan_window), and counts samples seen twice in an epoch. An
  iterable dataset that does not shard its stream by `torch.utils.data.get_worker_info()` yields every
  sample once per worker; the tail is where looking costs nothing measured.

An observer has `see(batch, index)`, `next_epoch()`, `metrics()` and `warnings()`; `ObservedStep` calls them.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from typing import Any

FINGERPRINT_ELEMENTS = 4096  # evenly spaced elements of a tensor read per sample: a cost independent of its size


class ObservedStep:
    """The loop's step: every observer sees the batch (with its index in the epoch), then the consumer runs."""

    def __init__(self, consume: Callable[[Any], None], observers: list):
        self.consume, self.observers = consume, observers
        self.index = 0

    def __call__(self, batch) -> None:
        index = self.index
        self.index = index + 1
        for observer in self.observers:
            observer.see(batch, index)
        self.consume(batch)

    def next_epoch(self) -> None:
        self.index = 0
        for observer in self.observers:
            observer.next_epoch()

    def metrics(self) -> dict:
        out: dict = {}
        for observer in self.observers:
            out.update(observer.metrics())
        return out

    def warnings(self) -> list[str]:
        return [w for observer in self.observers for w in observer.warnings()]


class RngRecorder:
    """For the rng workload: keeps each epoch's first-tensor draws so duplicates across workers and epochs
    can be counted after the loop."""

    def __init__(self):
        self.epochs: list[list] = [[]]

    def see(self, batch, index: int) -> None:
        self.epochs[-1].append(batch[0].numpy().copy())

    def next_epoch(self) -> None:
        self.epochs.append([])

    def metrics(self) -> dict:
        import numpy as np

        from loaderbench.workloads.rng import duplicate_fractions

        return {"rng_duplicates": duplicate_fractions([np.concatenate(e) for e in self.epochs if e])}

    def warnings(self) -> list[str]:
        return []


class TailDuplicates:
    """Counts samples seen more than once in an epoch's tail (batches from `first_index` on).

    A sample is identified by its strings (a key or path, as WebDataset's `__key__`) when it carries any,
    else by its content: the shape, dtype and FINGERPRINT_ELEMENTS evenly spaced elements of each tensor, and
    its numbers. Random augmentations make copies of one source sample differ in content, so a pipeline with
    them is checked only when its samples carry a key."""

    def __init__(self, first_index: int, num_workers: int):
        self.first_index, self.num_workers = first_index, num_workers
        self.epoch: Counter = Counter()
        self.checked = 0
        self.duplicates = 0
        self.unsplit_batches = 0
        self.by_strings = False

    def see(self, batch, index: int) -> None:
        if index < self.first_index:
            return
        found = sample_fingerprints(batch)
        if found is None:
            self.unsplit_batches += 1
            return
        keys, self.by_strings = found
        for k in keys:
            self.duplicates += self.epoch[k] > 0
            self.epoch[k] += 1
        self.checked += len(keys)

    def next_epoch(self) -> None:
        self.epoch = Counter()

    def metrics(self) -> dict:
        return {
            "duplicate_samples": self.duplicates if self.checked else None,
            "duplicate_checked_samples": self.checked,
        }

    def warnings(self) -> list[str]:
        if not self.duplicates or self.num_workers <= 1:
            return []
        by = "their strings (a key or path)" if self.by_strings else "their content"
        return [
            f"duplicate samples: {self.duplicates} of the {self.checked} samples read after the measured "
            f"window were seen before in the same epoch (identified by {by}); with num_workers = "
            f"{self.num_workers}, an iterable dataset that does not shard its stream by "
            f"torch.utils.data.get_worker_info() yields every sample once per worker, and the throughput "
            f"counts each copy"
        ]


def sample_fingerprints(batch) -> tuple[list[bytes], bool] | None:
    """One fingerprint per sample of a collated batch, and whether they came from the samples' strings; None
    when the batch cannot be split into samples (no tensor or list leading the batch)."""
    columns = list(_columns(batch))
    if not columns or not len(columns[0]):
        return None
    size = len(columns[0])
    columns = [c for c in columns if len(c) == size]
    strings = [c for c in columns if isinstance(c, (list, tuple)) and isinstance(c[0], (str, bytes))]
    use = strings or columns
    out = []
    for i in range(size):
        h = hashlib.blake2b(digest_size=16)
        for column in use:
            h.update(_element_bytes(column[i]))
        out.append(h.digest())
    return out, bool(strings)


def _columns(batch):
    """Per-sample columns of a collated batch: tensors and arrays (rows along their first dimension), and lists
    of plain values (default_collate's strings)."""
    import numpy as np
    import torch

    if isinstance(batch, (torch.Tensor, np.ndarray)):
        if batch.ndim >= 1:
            yield batch
    elif isinstance(batch, dict):
        for value in batch.values():
            yield from _columns(value)
    elif isinstance(batch, (list, tuple)):
        if batch and all(isinstance(x, (str, bytes, int, float, bool)) for x in batch):
            yield batch
        else:
            for value in batch:
                yield from _columns(value)


def _element_bytes(x) -> bytes:
    import numpy as np
    import torch

    if isinstance(x, torch.Tensor):
        flat = x.detach().reshape(-1)
        step = max(1, flat.numel() // FINGERPRINT_ELEMENTS)
        picked = flat[::step][:FINGERPRINT_ELEMENTS].cpu().contiguous()
        return f"{x.dtype}{tuple(x.shape)}".encode() + picked.view(torch.uint8).numpy().tobytes()
    if isinstance(x, np.ndarray):
        values = x.reshape(-1)
        step = max(1, values.size // FINGERPRINT_ELEMENTS)
        return f"{x.dtype}{x.shape}".encode() + np.ascontiguousarray(values[::step][:FINGERPRINT_ELEMENTS]).tobytes()
    if isinstance(x, bytes):
        return x
    return repr(x).encode()

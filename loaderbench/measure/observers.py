"""What a cell learns from its batches without touching the measuring loop: observers see each batch through
the step function the loop already calls (loaderbench.measure.loop.run_loop), together with its index in the epoch.

- `RngRecorder` (the rng workload) keeps each epoch's draws, to count repeats across workers and epochs.
- `TailDuplicates` (every iterable dataset) fingerprints the samples of the batches consumed after the
  measured window (the tail: loaderbench.study.window.plan_window), and counts samples seen twice in an epoch. An
  iterable dataset that does not shard its stream by `torch.utils.data.get_worker_info()` yields every
  sample once per worker; the tail is where looking costs nothing measured.

- `DeliveryOrder` (map-style datasets with workers whose samples carry their index, as the suite's `sleep` and
  `cpu` workloads do) matches each delivered batch to its place in the sampler's order (`SampledOrder` keeps
  the batches the sampler drew), so the order a loader delivers in can be compared across repetitions even
  though each repetition draws its own sample order.

- `SharingSeen` (cells that switch the sharing strategy mid-run) looks, at each epoch's first batch, at how its
  first tensor's memory is mapped into the main process: a /dev/shm segment already unlinked arrived by
  file_descriptor, one still named there by file_system.

An observer has `see(batch, index)`, `next_epoch()`, `metrics()` and `warnings()`; `ObservedStep` calls them.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from typing import Any

from loaderbench.workloads.payload import LABEL_MODULO  # the suite's samples' labels: index modulo this

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


class SampledOrder:
    """A batch sampler that keeps what the wrapped one yields in this epoch (each iteration starts an epoch): the
    loader draws its indices in the main process, in this order, whatever order the batches then arrive in."""

    def __init__(self, batch_sampler):
        self.batch_sampler = batch_sampler
        self.sampled: list[list[int]] = []

    def __iter__(self):
        self.sampled = []
        for batch in self.batch_sampler:
            self.sampled.append(list(batch))
            yield batch

    def __len__(self) -> int:
        return len(self.batch_sampler)


class DeliveryOrder:
    """Where each delivered batch stood in the sampler's order, found by its samples' labels (index modulo
    LABEL_MODULO, the second element of the suite's samples). Metrics: batches delivered out of the sampler's
    order, and a fingerprint of the delivery permutation (of the displacements, so it is the same for every
    repetition that delivered in the same pattern, whatever samples were drawn)."""

    def __init__(self, order: SampledOrder):
        self.order = order
        self.epochs: list[list[int]] = [[]]
        self.waiting: dict[tuple, list[int]] = {}
        self.matched = 0
        self.unmatched = 0

    def _labels(self, batch) -> tuple | None:
        import torch

        if isinstance(batch, (list, tuple)) and len(batch) >= 2 and isinstance(batch[1], torch.Tensor):
            if not batch[1].dtype.is_floating_point and batch[1].ndim == 1:
                return tuple(int(v) % LABEL_MODULO for v in batch[1].tolist())
        return None

    def _positions_of(self, labels: tuple) -> int | None:
        while self.matched < len(self.order.sampled):  # the sampler's batches drawn since the last look
            k = self.matched
            self.waiting.setdefault(tuple(i % LABEL_MODULO for i in self.order.sampled[k]), []).append(k)
            self.matched += 1
        found = self.waiting.get(labels)
        return found.pop(0) if found else None

    def see(self, batch, index: int) -> None:
        labels = self._labels(batch)
        position = self._positions_of(labels) if labels is not None else None
        if position is None:
            self.unmatched += 1
            return
        self.epochs[-1].append(position)

    def next_epoch(self) -> None:
        self.epochs.append([])
        self.waiting, self.matched = {}, 0

    def metrics(self) -> dict:
        delivered = [p for e in self.epochs for p in e]
        if not delivered or self.unmatched:
            return {}
        shifts = [p - j for e in self.epochs for j, p in enumerate(e)]
        h = hashlib.blake2b(",".join(map(str, shifts)).encode(), digest_size=8)
        return {
            "order": {
                "batches": len(delivered),
                "out_of_order": sum(1 for d in shifts if d != 0),
                "fingerprint": h.hexdigest(),
            }
        }

    def warnings(self) -> list[str]:
        return []


class SharingSeen:
    """The sharing strategy each epoch's batches arrived by, observed rather than assumed: where the first tensor
    of the epoch's first batch is mapped in this process (/proc/self/maps). A segment of /dev/shm that is already
    unlinked ("(deleted)") came as a file descriptor; one that still has its name came by file_system."""

    def __init__(self):
        self.epochs: list[str] = []

    def see(self, batch, index: int) -> None:
        if index == 0:
            self.epochs.append(mapped_strategy(_first_tensor(batch)))

    def next_epoch(self) -> None:
        pass

    def metrics(self) -> dict:
        return {"sharing_seen": self.epochs}

    def warnings(self) -> list[str]:
        return []


def _first_tensor(batch):
    import torch

    if isinstance(batch, torch.Tensor):
        return batch
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for value in batch:
            found = _first_tensor(value)
            if found is not None:
                return found
    return None


def mapped_strategy(tensor) -> str:
    """file_descriptor, file_system, or "not shared" (no tensor, or memory not mapped from /dev/shm)."""
    if tensor is None:
        return "not shared"
    address = tensor.untyped_storage().data_ptr()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                if lo <= address < hi:
                    path = parts[5].strip() if len(parts) > 5 else ""
                    if "/dev/shm/" not in path and "torch_" not in path:
                        return "not shared"
                    return "file_descriptor" if path.endswith("(deleted)") else "file_system"
    except (OSError, ValueError):
        pass
    return "not shared"


class EpochMarks:
    """`epoch_attribute`: the main process counts epochs on an attribute of the dataset; each sample's label
    carries the count its worker's copy of the dataset held. A sample of epoch e (from the second on) that carries
    less saw the attribute as it was before the main process changed it: stale."""

    def __init__(self):
        self.epoch = 0
        self.samples = 0
        self.stale = 0

    def see(self, batch, index: int) -> None:
        if self.epoch == 0 or not isinstance(batch, (list, tuple)) or len(batch) < 2:
            return
        marks = [int(v) // LABEL_MODULO for v in batch[1].tolist()]
        self.samples += len(marks)
        self.stale += sum(1 for m in marks if m < self.epoch)

    def next_epoch(self) -> None:
        self.epoch += 1

    def metrics(self) -> dict:
        return {"epoch_attribute": {"samples": self.samples, "stale": self.stale}}

    def warnings(self) -> list[str]:
        return []

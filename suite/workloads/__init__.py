"""Workloads: what each sample costs. Each comes per-sample (`__getitem__`) and batched (`__getitems__`).

`WORKLOADS` is the one list of them: the study vocabulary (suite.axes), validation, the runner's warm
imports and the benchmarks all read it. Each workload module has `build(config, length, prepared)`, which
returns the dataset a cell's DataLoader reads. Importing this package imports no torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoaderParts:
    """What a workload hands the DataLoader: the dataset and, optionally, its collate_fn and worker_init_fn."""

    dataset: Any
    collate_fn: Any = None
    worker_init_fn: Any = None

    @property
    def iterable(self) -> bool:
        from torch.utils.data import IterableDataset

        return isinstance(self.dataset, IterableDataset)


@dataclass(frozen=True)
class Workload:
    name: str
    module: str  # under suite.workloads
    summary: str  # what each sample costs
    reads_images: bool = False  # reads the study's [dataset]: the JPEG files
    image_batches: bool = False  # batches of (images, labels): a real model step can consume them
    self_test: bool = False  # tests the harness, measures nothing about loading
    users_dataset: bool = False  # the dataset is the user's own: the suite's extras and `batched` do not apply

    def load(self):
        return importlib.import_module(f"suite.workloads.{self.module}")


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("sleep", "sleep", "sleep_ms of blocking wait per sample (I/O-bound)"),
    Workload("cpu", "cpu", "cpu_work thousand pure-Python loop iterations per sample (CPU-bound)"),
    Workload("jpeg", "jpeg", "decode (and augment) one JPEG of the [dataset] per sample", reads_images=True,
             image_batches=True),
    Workload("tutorial", "tutorial", "the PyTorch data-loading tutorial's 3x224x224 samples, sleep_ms each",
             image_batches=True),
    Workload("rng", "rng", "draws from torch, NumPy and random, to count repeats across workers and epochs"),
    Workload("fault", "faulty", "a fault at sample fault_at (worker crash, hang, OOM...): a self-test",
             self_test=True),
    Workload("shards", "shards", "stream the [dataset] as WebDataset tar shards (an IterableDataset), decode each "
             "JPEG", reads_images=True),
    Workload("custom", "custom", "your own dataset, made by the study's factory (suite/factory.py)",
             users_dataset=True),
]}


def build_dataset(config: dict[str, Any], length: int, prepared=None) -> LoaderParts:
    """What a cell's DataLoader reads, from the cell's config: a workload module's `build` returns a dataset
    (or LoaderParts), given the index, payload and straggler of suite.workloads.extras. `length` is the
    number of samples per epoch; `prepared` is the PreparedDataset (workloads that read images only)."""
    from suite.workloads.extras import with_extras

    workload = WORKLOADS.get(config["workload"])
    if workload is None:
        raise ValueError(f"unknown workload {config['workload']!r}")
    built = workload.load().build(config, length, prepared)
    parts = built if isinstance(built, LoaderParts) else LoaderParts(built)
    if not workload.users_dataset:  # the extras are attributes: on a user's object they could replace its own
        with_extras(parts.dataset, config)
    return parts


def workload_env(config: dict[str, Any]) -> dict[str, Any]:
    """What the cell's workload adds to the record's env (a module's `provenance(config)`, where it has one):
    for a custom factory, the file it was imported from and its sha256."""
    workload = WORKLOADS.get(config["workload"])
    provenance = getattr(workload.load(), "provenance", None) if workload is not None else None
    return provenance(config) if provenance is not None else {}


def import_all() -> None:
    """Import every workload module (done once in the runner, so forked cells inherit it)."""
    for w in WORKLOADS.values():
        w.load()

"""Workloads: what each sample costs. Each comes per-sample (`__getitem__`) and batched (`__getitems__`).

Which workloads exist is loaderbench.schema.workload_catalog's one list. Each workload module here has
`build(cell, length, source)`, which returns the dataset a cell's DataLoader reads, from the cell's settings
(loaderbench.schema.cell.CellConfig) and where its samples come from (`DataSource`). Importing this package
imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from loaderbench.schema.cell import CellConfig
from loaderbench.schema.workload_catalog import WORKLOADS

if TYPE_CHECKING:
    from loaderbench.datasets.types import PreparedDataset
    from loaderbench.storage.client import Endpoint


@dataclass(frozen=True)
class DataSource:
    """What one loader process (rank) of a cell reads from, besides the cell's settings: the prepared dataset
    (the workloads that read images), its rank, and with storage = "http" the endpoint of the cell's server."""

    prepared: PreparedDataset | None = None
    rank: int = 0
    endpoint: Endpoint | None = None

    def for_rank(self, rank: int) -> DataSource:
        return replace(self, rank=rank)


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


def build_dataset(cell: CellConfig, length: int, source: DataSource | None = None) -> LoaderParts:
    """What a cell's DataLoader reads: a workload module's `build` returns a dataset (or LoaderParts), given the
    index, payload and straggler of loaderbench.workloads.claim_axes. `length` is the number of samples per
    epoch; `source` what the loader process reads from (default: rank 0, no prepared dataset)."""
    from loaderbench.workloads.claim_axes import with_extras

    workload = WORKLOADS.get(cell.workload)
    if workload is None:
        raise ValueError(f"unknown workload {cell.workload!r}")
    built = workload.load().build(cell, length, source or DataSource())
    parts = built if isinstance(built, LoaderParts) else LoaderParts(built)
    if not workload.users_dataset:  # the extras are attributes: on a user's object they could replace its own
        with_extras(parts.dataset, cell)
    return parts


def workload_env(cell: CellConfig) -> dict[str, Any]:
    """What the cell's workload adds to the record's env (a module's `provenance(cell)`, where it has one):
    for a custom factory, the file it was imported from and its sha256."""
    workload = WORKLOADS.get(cell.workload)
    provenance = getattr(workload.load(), "provenance", None) if workload is not None else None
    return provenance(cell) if provenance is not None else {}


def import_all() -> None:
    """Import every workload module (done once in the runner, so forked cells inherit it)."""
    for w in WORKLOADS.values():
        w.load()

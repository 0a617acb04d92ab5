"""Your own dataset (`workload = "custom"`): the study's factory, imported from the folder it was found in
and called with [factory_args] in the cell process (loaderbench/workloads/factory.py). The suite sizes the epoch: a
map-style
dataset by a seeded sampler of the epoch's length, an iterable one by taking the batches the epoch needs."""

from __future__ import annotations

from typing import Any

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource


def build(cell: CellConfig, length: int, source: DataSource):
    from loaderbench.workloads.factory import build_parts

    return build_parts(cell)


def provenance(cell: CellConfig) -> dict[str, Any]:
    """The record's env["factory"]: what the cell imported, and the module file's sha256 as read now (equal to
    the cell's factory_sha256, or the cell refused to run)."""
    from loaderbench.workloads.factory import sha256_file

    file = cell.factory_file
    try:
        digest = sha256_file(file) if file else None
    except OSError:
        digest = None
    return {
        "factory": {
            "spec": cell.factory,
            "module_file": file,
            "root": cell.factory_root,
            "sha256": digest,
        }
    }

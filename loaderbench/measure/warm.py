"""What a process that forks cells imports before it forks them, so that no cell pays an import.

Every cell imports numpy, torch, torch.utils.data, the measuring modules and the workload modules; those are
imported for every cell. The slow imports only some cells use come on top, for the cells this process will run:
- torchvision (4-5 s: its package imports torchvision.ops, which imports torch._dynamo) for cells that decode
  JPEGs (the workloads that read the [dataset]), run a user's factory (whose pipeline often uses it), or step a
  torchvision model;
- scipy.special (the adaptive stopping rule's t quantile) for cells with a `target_precision`.
What a study's cells need is imported for every cell of that study, in every process that runs any of them (a local
run, a settle round, each Slurm array task): a cell's memory (RSS, PSS) is read with the same modules mapped
whichever launcher ran it and whichever of the study's cells ran beside it.
A cell imports what its own set-up needs before its first batch as well (the stopping rule reads its quantile
once when it is made), so a cell forked without them pays the import before its window, never inside it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from loaderbench.schema.cell import CellConfig
from loaderbench.schema.workload_catalog import WORKLOADS

TORCHVISION = "torchvision.transforms.v2"
SCIPY = "scipy.special"
TORCHVISION_MODELS = ("resnet50",)  # the `model` values loaderbench.measure.consumers builds with torchvision


def cell_imports(cell: CellConfig) -> set[str]:
    """The slow imports a cell needs beyond every cell's."""
    workload = WORKLOADS[cell.workload]
    needs: set[str] = set()
    if workload.reads_images or workload.users_dataset or cell.model in TORCHVISION_MODELS:
        needs.add(TORCHVISION)
    if cell.target_precision is not None:
        needs.add(SCIPY)
    return needs


def study_imports(cells: Iterable[CellConfig]) -> list[str]:
    """The slow imports any of a study's `cells` needs: what every process that runs one of them imports."""
    return sorted(set().union(*(cell_imports(c) for c in cells)))


def warm_imports(needs: Iterable[str] | None = None) -> None:
    """Import what the cells forked from here would import, once, so they inherit it: what every cell needs and
    `needs` (`study_imports` of the study; None: what any cell of any workload and setting needs)."""
    import numpy  # noqa: F401 - imported once here, inherited by every forked cell
    import torch
    import torch.utils.data  # noqa: F401 - imported once here, inherited by every forked cell

    import loaderbench.measure.cell_process
    import loaderbench.measure.consumers
    import loaderbench.measure.limits
    import loaderbench.measure.loop
    import loaderbench.workloads.claim_axes  # noqa: F401 - imported once here, inherited by every forked cell
    from loaderbench.measure.machine_speed import reference_jpeg
    from loaderbench.workloads import import_all

    import_all()
    reference_jpeg()  # encoded once here: every cell's reference decodes the same bytes, made before it forked
    for module in sorted({TORCHVISION, SCIPY} if needs is None else set(needs)):
        importlib.import_module(module)

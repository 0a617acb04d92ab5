"""A cell: one point of a study's matrix, with the measuring settings it runs under; a task: one repetition
of a cell to measure."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from suite.axes import AXES


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Cell:
    """Axis values (every axis, defaults filled, meaningless ones set to None) plus the measuring settings."""

    axes: tuple[tuple[str, Any], ...]
    measure: tuple[tuple[str, Any], ...]  # warmup_batches, measure_batches, seed, dataset...
    # where this machine keeps what the cell reads (a custom factory's folder): it travels with the cell into
    # its process and its Slurm job, but is no part of the id, so moving the folder does not make new cells
    context: tuple[tuple[str, Any], ...] = field(default=(), compare=False)
    cell_id: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cell_id", cell_id_of(dict(self.axes), dict(self.measure)))

    def __getitem__(self, key: str) -> Any:
        return dict(self.axes)[key]

    @property
    def config(self) -> dict[str, Any]:
        """Flat config as stored in records: axis values, then measuring settings, then the context."""
        return {**dict(self.axes), **dict(self.measure), **dict(self.context)}


def cell_id_of(axes: dict[str, Any], measure: dict[str, Any]) -> str:
    """Stable hash of what the cell measures.

    Axes left at their default or not applicable (None) are omitted, so adding a new axis later does not
    change the id of cells measured before it existed. (None-ness follows from the other axes' values, so
    omitting it cannot make two different cells collide.)
    """
    significant = {k: v for k, v in axes.items() if k not in AXES or (v is not None and v != AXES[k].default)}
    digest = hashlib.sha256(_canonical({"axes": significant, "measure": measure}).encode()).hexdigest()
    return "c" + digest[:15]


@dataclass(frozen=True)
class Task:
    """One cell repetition to measure."""

    study: str
    cell: Cell
    repetition: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.study, self.cell.cell_id, self.repetition)

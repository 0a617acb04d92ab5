"""A cell: one point of a study's matrix, with the measuring settings it runs under; `CellConfig`: its settings,
typed; a task: one repetition of a cell to measure."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from loaderbench.schema.axes import AXES, AxisValues


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

    @property
    def typed(self) -> CellConfig:
        """The same config, typed: what the cell process and its helpers read."""
        return CellConfig.of(self.config)


@dataclass(frozen=True, kw_only=True)
class CellConfig(AxisValues):
    """A cell's settings, typed: one attribute per axis (AxisValues, the axis table: None where the axis means
    nothing for the cell) and one per measuring setting. The cell process, its helpers and the planning model
    read these; the record keeps the flat dict it was made from (Cell.config), unchanged."""

    warmup_batches: int
    measure_batches: int
    seed: int
    window: str = "steady"  # "epoch": whole epochs from iter(); a config holds the key only then
    pipeline_batches: int | None = None  # steady windows: the study's largest pipeline (loaderbench.study.window)
    target_precision: float | None = None  # adaptive measuring (loaderbench.stats.stopping), with the next three
    min_windows: int | None = None
    max_windows: int | None = None
    max_measure_s: float | None = None
    dataset: dict[str, Any] | None = None  # the study's [dataset], for the workloads that read images
    factory_args: dict[str, Any] | None = None  # the custom workload: the factory's keyword arguments,
    factory_sha256: str | None = None  # the hash of its module file (both part of the cell id),
    factory_root: str | None = None  # the folder the module was found in and its file (the cell's context)
    factory_file: str | None = None
    question: str | None = None  # the study's `question` (loaderbench.schema.questions): context, no part of the id

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> CellConfig:
        """From a flat config (Cell.config, or a record's); ValueError naming any key that is no setting."""
        unknown = [key for key in config if key not in CELL_SETTINGS]
        if unknown:
            raise ValueError(f"not settings of a cell: {', '.join(map(str, unknown))}")
        try:
            return cls(**config)
        except TypeError as exc:  # a measuring setting missing
            raise ValueError(f"not a cell's config: {exc}") from None


CELL_SETTINGS = frozenset(f.name for f in fields(CellConfig))  # every key a cell's config may hold


def cell_id_of(axes: dict[str, Any], measure: dict[str, Any]) -> str:
    """Stable hash of what the cell measures.

    Axes left at their default or not applicable (None) are omitted, so adding a new axis later does not
    change the id of cells measured before it existed. (None-ness follows from the other axes' values, so
    omitting it cannot make two different cells collide.)
    """
    significant = {k: v for k, v in axes.items() if k not in AXES or (v is not None and v != AXES[k].default)}
    digest = hashlib.sha256(_canonical({"axes": significant, "measure": measure}).encode()).hexdigest()
    return "c" + digest[:15]


def describe(config: dict) -> str:
    """A cell in one line: workload, workers, cores, then every other axis that has a value away from its default
    (loaderbench.schema.axes)."""
    parts = [config["workload"], f"w={config['num_workers']}", f"c={config['cores']}"]
    for key, axis in AXES.items():
        value = config.get(key)
        if key not in ("workload", "num_workers", "cores") and value is not None and value != axis.default:
            parts.append(f"{key}={value}")
    return " ".join(parts)


@dataclass(frozen=True)
class Task:
    """One cell repetition to measure."""

    study: str
    cell: Cell
    repetition: int

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.study, self.cell.cell_id, self.repetition)

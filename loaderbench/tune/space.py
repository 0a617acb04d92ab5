"""The search space of a tune run: a study's cells, split into scenarios, each with the settings to choose from.

An axis of the matrix is either a *setting* (a DataLoader knob or a loader-side choice a training script
makes: `SETTING_AXES`) or part of the *scenario* (the work and the node: workload, cores, batch_size,
sleep_ms, dataset...). Tuning across scenarios would compare unlike work, so every combination of the
scenario axes' values is tuned on its own, over the cells that share it.

A candidate is one cell of the study, unchanged: its id is the cell id the full grid would use, so tune's
records and the grid's are the same cells. Axes that mean nothing for a cell are None in it (prefetch_factor
at num_workers = 0, loaderbench.study.study_file.normalize); `Scenario.find` treats such a None as "any value", so the
candidate for {num_workers: 0, prefetch_factor: 4} is the num_workers = 0 cell.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from loaderbench.schema.axes import AXES
from loaderbench.schema.cell import Cell

#: Axes tune chooses: the settings a training script sets (the rest of the matrix is the scenario), in the
#: order the search tries them after num_workers.
SETTING_AXES = (
    "num_workers",
    "prefetch_factor",
    "persistent_workers",
    "pin_memory",
    "start_method",
    "sharing_strategy",
    "in_order",
    "batched",
    "forkserver_preload",
    "non_blocking",
    "prefetcher",
    "loader",
    "worker_method",
)
_UNKNOWN = set(SETTING_AXES) - set(AXES)
if _UNKNOWN:  # the axis table is the one vocabulary: a setting tune names must be an axis
    raise ImportError(f"loaderbench.tune.space: setting axes not in loaderbench.schema.axes.AXES: {sorted(_UNKNOWN)}")


@dataclass(frozen=True)
class Candidate:
    """One setting of one scenario: a cell of the study, and its setting axes' values (None: not applicable)."""

    cell: Cell
    settings: tuple[tuple[str, Any], ...]

    @property
    def key(self) -> str:
        return self.cell.cell_id

    def __getitem__(self, axis: str) -> Any:
        return dict(self.settings)[axis]

    @property
    def num_workers(self) -> int:
        return int(self["num_workers"])

    def non_default(self) -> int:
        """How many settings differ from their axis default (the fewer, the less there is to carry)."""
        return sum(1 for a, v in self.settings if v is not None and v != AXES[a].default)

    def label(self, varying: Iterable[str] | None = None) -> str:
        """e.g. "num_workers=4 prefetch_factor=4": the axes in `varying` (default: every set one)."""
        names = set(varying) if varying is not None else None
        return " ".join(
            f"{a}={_text(v)}"
            for a, v in self.settings
            if v is not None and (names is None or a in names or a == "num_workers")
        )


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


@dataclass(frozen=True)
class Scenario:
    """The cells that share every scenario axis value. `values` lists, per setting axis that varies here,
    its values in the study's order (num_workers ascending); `base` is where the search starts on each:
    the axis default when it is listed, else the first value listed."""

    context: tuple[tuple[str, Any], ...]  # every scenario axis of the cells (None: not applicable)
    varying_context: tuple[str, ...]  # scenario axes with more than one value in the study
    candidates: tuple[Candidate, ...]
    values: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        ctx = dict(self.context)
        shown = [a for a in self.varying_context if ctx.get(a) is not None] or ["workload"]
        return " ".join(f"{a}={_text(ctx[a])}" for a in shown)

    @property
    def workers(self) -> tuple[int, ...]:
        return tuple(self.values.get("num_workers", (self.candidates[0].num_workers,)))

    @property
    def main_process_is_a_worker(self) -> bool:
        """With no training step in the loop, the main process at num_workers = 0 does what one worker does and
        no more, so its rate bounds one worker's; a consumer step (step_ms, a model) slows it down instead."""
        ctx = dict(self.context)
        return not ctx.get("step_ms") and ctx.get("model") in (None, "none")

    @property
    def base(self) -> dict[str, Any]:
        out = {}
        for axis, vals in self.values.items():
            default = AXES[axis].default
            out[axis] = default if default in vals else vals[0]
        return out

    def find(self, assignment: dict[str, Any]) -> Candidate | None:
        """The candidate with these setting values (an axis missing from `assignment`, or None in the
        candidate, matches anything); None when the study has no such cell (an [[exclude]])."""
        for c in self.candidates:
            if all(v is None or assignment.get(a) is None or assignment[a] == v for a, v in c.settings):
                return c
        return None


def scenarios(cells: Iterable[Cell]) -> list[Scenario]:
    """Group a study's cells into scenarios, in the order their first cell appears."""
    cells = list(cells)
    contexts: dict[tuple, None] = {}
    for cell in cells:
        contexts.setdefault(_context(cell))
    # a scenario axis may be None only because of num_workers (slow_worker_ms at num_workers = 0): such a
    # cell belongs to every scenario its other values match, and its None-holding context is not one
    keys = [k for k in contexts if not any(o != k and _matches(k, o) for o in contexts)]
    groups: dict[tuple, list[Cell]] = {k: [c for c in cells if _matches(_context(c), k)] for k in keys}
    varying = tuple(
        a for a in AXES if a not in SETTING_AXES and len({repr(c[a]) for c in cells if c[a] is not None}) > 1
    )
    out = []
    for ctx, group in groups.items():
        candidates = tuple(Candidate(c, tuple((a, c[a]) for a in SETTING_AXES)) for c in group)
        values: dict[str, tuple[Any, ...]] = {}
        for axis in SETTING_AXES:
            seen: list[Any] = []
            for c in candidates:
                v = c[axis]
                if v is not None and v not in seen:
                    seen.append(v)
            if len(seen) > 1:
                values[axis] = tuple(sorted(seen)) if axis == "num_workers" else tuple(seen)
        out.append(Scenario(ctx, varying, candidates, values))
    return out


def _context(cell: Cell) -> tuple[tuple[str, Any], ...]:
    return tuple((a, v) for a, v in cell.axes if a not in SETTING_AXES)


def _matches(ctx: tuple, key: tuple) -> bool:
    """`ctx` (a cell's scenario values) fits `key`: equal wherever `ctx` is not None."""
    return all(v is None or v == kv for (_, v), (_, kv) in zip(ctx, key))


def cheapness(candidate: Candidate, memory_bytes: float | None) -> tuple:
    """Sort key of "cheaper": fewer workers, then less memory (unknown memory last), then fewer settings away
    from their defaults, then the cell id (a stable order)."""
    mem = memory_bytes if memory_bytes is not None and math.isfinite(memory_bytes) else math.inf
    return (candidate.num_workers, mem, candidate.non_default(), candidate.key)

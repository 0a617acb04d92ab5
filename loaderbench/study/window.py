"""The measuring window: how many batches each epoch has, and which of them are measured.

A DataLoader with workers keeps `num_workers x prefetch_factor` batches in flight: it hands out one new
index for every batch consumed, so the pipeline stays full until the sampler runs dry, then drains. A
window that opens on a full pipeline (batches made before it) and closes on a drained one (the last batch
of an epoch) is credited with work it never paid for: with 12-batch windows, 8 workers on one core read
30% above what the core can do. So a window must open and close with the pipeline equally full.

Two such windows:
- "steady" (the default): each epoch is warm-up + window + tail. The warm-up (at least one batch, and one
  pipeline's worth)
  drains what was made during start-up; the tail (at least one pipeline's worth) is consumed but not
  measured, so the window closes on a full pipeline, as it opened. The window is at least two pipelines
  long. Start-up is reported apart (time to first batch, end-to-end).
- "epoch": each whole epoch, from `iter(loader)` to its last batch: empty at both ends, start-up included.
  For studies whose question is the epoch itself (epoch gaps, a tutorial's fixed-length epochs).

Every cell of a study gets the same batch counts, sized from the study's largest pipeline, so every cell
processes the same number of batches per epoch and end-to-end figures spread start-up over the same work.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from loaderbench.schema.cell import CellConfig

MODES = ("steady", "epoch")


def pipeline_batches(num_workers: int | None, prefetch_factor: int | None) -> int:
    """Batches a loader keeps in flight (per rank): none without workers."""
    return (num_workers or 0) * (prefetch_factor or 0)


def study_pipeline(cells_axes: Iterable[dict[str, Any]]) -> int:
    """The largest pipeline of a study's cells (their axis values): every cell's window is sized from it."""
    return max((pipeline_batches(a.get("num_workers"), a.get("prefetch_factor")) for a in cells_axes), default=0)


@dataclass(frozen=True)
class WindowPlan:
    """Batch counts of one epoch: `warmup` unmeasured, then `measure` measured (in windows of `window_batches`
    when adaptive: up to `windows` of them), then `tail` unmeasured."""

    mode: str
    warmup: int
    measure: int
    tail: int
    window_batches: int
    windows: int = 1

    @property
    def epoch_batches(self) -> int:
        return self.warmup + self.measure + self.tail

    def measured(self, consumed: int) -> range:
        """Indices (within an epoch) of the measured batches, given how many the epoch consumed."""
        return range(self.warmup, min(self.warmup + self.measure, consumed))

    def describe(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "warmup_batches": self.warmup,
            "measure_batches": self.measure,
            "tail_batches": self.tail,
            "epoch_batches": self.epoch_batches,
            "window_batches": self.window_batches,
            "max_windows": self.windows,
        }


def plan_window(cell: CellConfig) -> WindowPlan:
    """The window of a cell, from its settings (the study's and its `pipeline_batches` included)."""
    if cell.window == "epoch":
        return WindowPlan("epoch", 0, cell.measure_batches, 0, cell.measure_batches)
    pipe = max(cell.pipeline_batches or 0, pipeline_batches(cell.num_workers, cell.prefetch_factor))
    warmup = max(cell.warmup_batches, pipe, 1)  # the first batch carries start-up, always
    window = max(cell.measure_batches, 2 * pipe)
    windows = int(cell.max_windows or 1) if cell.target_precision is not None else 1
    return WindowPlan("steady", warmup, window * windows, pipe, window, windows)

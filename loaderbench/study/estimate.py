"""How long a study will take, before anything runs: a model of each cell repetition, calibrated from records
already measured when there are any.

A repetition costs its process start and teardown, its workers' start-up (once, or every epoch unless
persistent), and its batches: epochs x the window plan's epoch batches x batch_size samples at the rate the
cell can load them. That rate comes from a per-sample cost prior of the workload (CPU-seconds and waiting),
spread over min(workers, cores) cores for the CPU part and over the workers for the waiting part.

Records make it honest: for every workload with records, the ratio of measured to modelled wall time
(median over records) scales the model; a cell with records of its own takes their median wall time.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from loaderbench.schema.cell import Cell, CellConfig
from loaderbench.schema.record import Record
from loaderbench.study.window import plan_window

PROCESS_S = 0.6  # fork of the cell, probe start, teardown and record
SERVER_S = 0.8  # storage = "http": the cell's server and network path, started and stopped
FORK_WORKER_S = 0.05  # per worker, fork start method
SPAWN_S = 3.5  # a spawned (or forkserver without preload) worker pool's start-up: imports torch again
SPAWN_WORKER_S = 0.5  # per spawned worker
UNKNOWN_SAMPLE_S = 0.002  # a workload whose cost the model cannot know (custom pipelines, remote data)


def sample_cost(cell: CellConfig) -> tuple[float, float]:
    """(CPU-seconds, waiting seconds) one sample costs, before calibration."""
    w = cell.workload
    if w == "sleep":
        return 0.00005, (cell.sleep_ms or 0) / 1000
    if w == "cpu":
        return 0.00012 * (cell.cpu_work or 0), 0.0
    if w == "zlib":
        return 0.00002 * (cell.zlib_kb or 0), 0.0
    if w in ("jpeg", "shards"):
        cpu = {"decode": 0.001, "read": 0.0003}.get(str(cell.jpeg_stage), 0.0033)
        if cell.storage != "http":
            return cpu, 0.0
        trips = 2 if cell.http_client == "per_request" else 1  # a new connection: one more round trip
        per_request = (cell.shard_samples or 1) if w == "shards" else 1  # shards: one GET per shard
        return cpu, trips * (cell.latency_ms or 0) / 1000 / per_request
    if w == "tutorial":
        return 0.001, (cell.sleep_ms or 0) / 1000
    if w == "inmem":  # the work, and a collate and hand-over that grow with the sample
        return (cell.work_us or 0) / 1e6 + 0.00002 + (cell.sample_bytes or 0) * 1e-10, 0.0
    if w in ("rng", "fault"):
        return 0.0001, 0.0
    return UNKNOWN_SAMPLE_S, 0.0


def modelled_seconds(cell: CellConfig) -> float:
    """Modelled wall seconds of one repetition of a cell."""
    plan = plan_window(cell)
    epochs = cell.epochs or 1
    if cell.target_precision is not None:
        batches = plan.warmup + plan.window_batches * max(cell.min_windows or 10, plan.windows // 2)
    else:
        batches = epochs * plan.epoch_batches
    samples = batches * cell.batch_size * (cell.ranks or 1)
    cpu, wait = sample_cost(cell)
    workers, cores = cell.num_workers, cell.cores
    if cell.worker_method == "thread" and cell.workload in ("cpu", "rng", "inmem"):
        cores = 1  # pure-Python work under one GIL
    procs = max(workers, 1) * (cell.ranks or 1)
    rate = min(min(procs, cores) / cpu if cpu else float("inf"), procs / (cpu + wait))
    step = (cell.step_ms or 0) / 1000
    if step:
        rate = min(rate, cell.batch_size / step)
    seconds = samples / rate
    if cell.target_precision is not None:
        seconds = min(seconds, cell.max_measure_s or seconds)
    if workers:
        slow = cell.start_method in ("spawn", "forkserver") and not cell.forkserver_preload
        start = SPAWN_S + SPAWN_WORKER_S * workers if slow else FORK_WORKER_S * workers
        seconds += start * (1 if cell.persistent_workers else epochs)
    return PROCESS_S + seconds + (SERVER_S if cell.storage == "http" else 0.0)


@dataclass
class Estimator:
    """Modelled seconds per repetition, calibrated per workload (and per cell) from measured records."""

    per_cell: dict[str, float]
    per_workload: dict[str, float]

    @classmethod
    def from_records(cls, records: Iterable[Record | None]) -> Estimator:
        """Calibrated on the ok records among `records` (None: a file that is not a record, skipped)."""
        walls: dict[str, list[float]] = {}
        ratios: dict[str, list[float]] = {}
        for rec in records:
            wall = rec.wall_s if rec is not None else None
            if rec is None or not rec.ok or wall is None or wall <= 0:
                continue
            try:
                cell = rec.cell
            except ValueError:  # a config this version does not know: no model to calibrate
                continue
            walls.setdefault(rec.cell_id, []).append(wall)
            try:
                ratios.setdefault(cell.workload, []).append(wall / modelled_seconds(cell))
            except (TypeError, ZeroDivisionError):
                continue
        return cls(
            {k: statistics.median(v) for k, v in walls.items()}, {k: statistics.median(v) for k, v in ratios.items()}
        )

    def seconds(self, cell: Cell) -> float:
        if cell.cell_id in self.per_cell:
            return self.per_cell[cell.cell_id]
        return modelled_seconds(cell.typed) * self.per_workload.get(cell["workload"], 1.0)

    def calibrated(self, cell: Cell) -> bool:
        return cell.cell_id in self.per_cell or cell["workload"] in self.per_workload


@dataclass
class StudyEstimate:
    cells: int
    repetitions: int
    pending: int
    pending_s: float  # one after another, here
    longest_s: float  # the longest single repetition
    core_hours: float  # pending repetitions x their cores
    calibrated: int  # pending repetitions whose estimate rests on records

    def slurm(self, node_cores: int, parallel: int) -> dict[str, float]:
        """Node-hours and an optimistic wall time with `parallel` array tasks at once."""
        return {
            "node_hours": self.core_hours / node_cores,
            "wall_s": max(self.longest_s, self.pending_s / max(1, parallel)),
        }


def estimate_study(study, tasks: list, estimator: Estimator) -> StudyEstimate:
    """`tasks`: the study's pending tasks (loaderbench.study.plan.pending_tasks)."""
    secs = [estimator.seconds(t.cell) for t in tasks]
    return StudyEstimate(
        cells=len(study.cells),
        repetitions=study.settings.repetitions,
        pending=len(tasks),
        pending_s=sum(secs),
        longest_s=max(secs, default=0.0),
        core_hours=sum(s * t.cell["cores"] for s, t in zip(secs, tasks)) / 3600,
        calibrated=sum(estimator.calibrated(t.cell) for t in tasks),
    )


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"

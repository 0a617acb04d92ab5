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

import datetime as dt
import statistics
from dataclasses import dataclass
from typing import Any, Iterable

from suite.window import plan_window

PROCESS_S = 0.6  # fork of the cell, probe start, teardown and record
SERVER_S = 0.8  # storage = "http": the cell's server and network path, started and stopped
FORK_WORKER_S = 0.05  # per worker, fork start method
SPAWN_S = 3.5  # a spawned (or forkserver without preload) worker pool's start-up: imports torch again
SPAWN_WORKER_S = 0.5  # per spawned worker
UNKNOWN_SAMPLE_S = 0.002  # a workload whose cost the model cannot know (custom pipelines, remote data)


def sample_cost(config: dict[str, Any]) -> tuple[float, float]:
    """(CPU-seconds, waiting seconds) one sample costs, before calibration."""
    w = config["workload"]
    if w == "sleep":
        return 0.00005, (config.get("sleep_ms") or 0) / 1000
    if w == "cpu":
        return 0.00012 * (config.get("cpu_work") or 0), 0.0
    if w in ("jpeg", "shards"):
        cpu = {"decode": 0.001, "read": 0.0003}.get(config.get("jpeg_stage"), 0.0033)
        if config.get("storage") != "http":
            return cpu, 0.0
        trips = 2 if config.get("http_client") == "per_request" else 1  # a new connection: one more round trip
        per_request = (config.get("shard_samples") or 1) if w == "shards" else 1  # shards: one GET per shard
        return cpu, trips * (config.get("latency_ms") or 0) / 1000 / per_request
    if w == "tutorial":
        return 0.001, (config.get("sleep_ms") or 0) / 1000
    if w in ("rng", "fault"):
        return 0.0001, 0.0
    return UNKNOWN_SAMPLE_S, 0.0


def modelled_seconds(config: dict[str, Any]) -> float:
    """Modelled wall seconds of one repetition of a cell."""
    plan = plan_window(config)
    epochs = config.get("epochs") or 1
    if config.get("target_precision") is not None:
        batches = plan.warmup + plan.window_batches * max(config.get("min_windows") or 10, plan.windows // 2)
    else:
        batches = epochs * plan.epoch_batches
    samples = batches * config["batch_size"] * (config.get("ranks") or 1)
    cpu, wait = sample_cost(config)
    workers, cores = config["num_workers"], config["cores"]
    procs = max(workers, 1) * (config.get("ranks") or 1)
    rate = min(min(procs, cores) / cpu if cpu else float("inf"), procs / (cpu + wait))
    step = (config.get("step_ms") or 0) / 1000
    if step:
        rate = min(rate, config["batch_size"] / step)
    seconds = samples / rate
    if config.get("target_precision") is not None:
        seconds = min(seconds, config.get("max_measure_s") or seconds)
    if workers:
        slow = config.get("start_method") in ("spawn", "forkserver") and not config.get("forkserver_preload")
        start = SPAWN_S + SPAWN_WORKER_S * workers if slow else FORK_WORKER_S * workers
        seconds += start * (1 if config.get("persistent_workers") else epochs)
    return PROCESS_S + seconds + (SERVER_S if config.get("storage") == "http" else 0.0)


def _wall_s(record: dict) -> float | None:
    try:
        a = dt.datetime.fromisoformat(record["started_at"])
        b = dt.datetime.fromisoformat(record["finished_at"])
    except (KeyError, TypeError, ValueError):
        return None
    s = (b - a).total_seconds()
    return s if s > 0 else None


@dataclass
class Estimator:
    """Modelled seconds per repetition, calibrated per workload (and per cell) from measured records."""

    per_cell: dict[str, float]
    per_workload: dict[str, float]

    @classmethod
    def from_records(cls, records: Iterable[dict]) -> "Estimator":
        walls: dict[str, list[float]] = {}
        ratios: dict[str, list[float]] = {}
        for rec in records:
            if not isinstance(rec, dict):
                continue
            wall = _wall_s(rec)
            config = rec.get("config") or {}
            if wall is None or rec.get("status") != "ok" or "workload" not in config:
                continue
            walls.setdefault(rec["cell_id"], []).append(wall)
            try:
                ratios.setdefault(config["workload"], []).append(wall / modelled_seconds(config))
            except (KeyError, TypeError, ZeroDivisionError):
                continue
        return cls({k: statistics.median(v) for k, v in walls.items()},
                   {k: statistics.median(v) for k, v in ratios.items()})

    def seconds(self, cell) -> float:
        if cell.cell_id in self.per_cell:
            return self.per_cell[cell.cell_id]
        return modelled_seconds(cell.config) * self.per_workload.get(cell.config["workload"], 1.0)

    def calibrated(self, cell) -> bool:
        return cell.cell_id in self.per_cell or cell.config["workload"] in self.per_workload


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
        return {"node_hours": self.core_hours / node_cores,
                "wall_s": max(self.longest_s, self.pending_s / max(1, parallel))}


def estimate_study(study, tasks: list, estimator: Estimator) -> StudyEstimate:
    """`tasks`: the study's pending tasks (suite.plan.pending_tasks)."""
    secs = [estimator.seconds(t.cell) for t in tasks]
    return StudyEstimate(cells=len(study.cells), repetitions=study.settings.repetitions, pending=len(tasks),
                         pending_s=sum(secs), longest_s=max(secs, default=0.0),
                         core_hours=sum(s * t.cell["cores"] for s, t in zip(secs, tasks)) / 3600,
                         calibrated=sum(estimator.calibrated(t.cell) for t in tasks))


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"

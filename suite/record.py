"""The result record: one JSON file per cell repetition, the contract between measuring and analysis.

This module is its one definition: `Record` (built by the runner, the Slurm launcher and the synthetic
generator through `Record.for_task` / `Record(...)`), the shape of its metrics and errors, and the format's
version. Pure Python: analysis reads it without importing torch.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, TypedDict

# The record format's versions:
#   record/1  first format.
#   record/2  pipeline-neutral measuring window (suite/window.py): config gains `pipeline_batches` (or
#             `window = "epoch"`), metrics gain `window` and, with several ranks, `ranks_common_window`;
#             `drain_prefetch` is gone. record/1 steady throughput read high with many workers and short
#             windows, so the two are never mixed.
#             Optional keys a record/2 reader must allow to be absent: `warnings` (a list of sentences about
#             an ok cell's soundness), metrics `duplicate_samples` / `duplicate_checked_samples` (iterable
#             datasets), env `factory` and config `factory`, `factory_args`, `factory_sha256`,
#             `factory_root`, `factory_file` (the custom workload), metrics `storage` (storage = "http") and
#             `shard_passes` (the shards workload), config axes `storage` ... `shard_samples` (suite.axes).
SCHEMA = "loaderbench.record/2"
STATUSES = ("ok", "failed", "timeout")
OK, FAILED, TIMEOUT = STATUSES


class ErrorInfo(TypedDict):
    kind: str  # one of suite.errors.KINDS
    message: str  # what happened and what to do


class BatchWait(TypedDict):
    p50: float
    p95: float
    p99: float
    max: float
    mean: float


class CpuSeconds(TypedDict):
    main: float  # the loader process(es): the training loop, collation of num_workers = 0
    workers: float  # every worker process (and their children)
    pin_memory_thread: float


class Window(TypedDict):
    mode: str  # "steady" | "epoch"
    warmup_batches: int
    measure_batches: int
    tail_batches: int
    epoch_batches: int
    window_batches: int
    max_windows: int


class Metrics(TypedDict, total=False):
    """Every key a record's metrics may carry. Failed and timed-out records carry only the probe's keys."""

    samples_per_s: float | None  # steady state: samples / seconds of the measured windows
    measured_samples: int
    measured_s: float
    end_to_end_samples_per_s: float | None  # every batch of every epoch over the whole run, start-up included
    total_s: float
    time_to_first_batch_s: float
    batch_wait_s: BatchWait  # the loop's wait for each measured batch
    data_stall_fraction: float | None  # waiting time over window time
    epoch_s: list[float]
    epoch_gap_s: float | None  # mean gap between an epoch's last batch and the next epoch's first
    epoch_gaps_s: list[float]
    window: Window
    consumer: str  # "simulated" | "cpu" | "gpu"
    accelerator_busy_fraction: float | None
    compute_s: float
    cpu_s: CpuSeconds
    ctx_switches: dict[str, int]  # voluntary, involuntary
    pin_memory_effective: bool
    warmup_batches_effective: int
    precision: dict[str, Any]  # the adaptive rule's summary (suite.precision.StoppingRule.summary)
    rng_duplicates: dict[str, Any]
    duplicate_samples: int | None  # iterable datasets: tail samples seen before in their epoch (suite.observers)
    storage: dict[str, Any]  # storage = "http": mechanisms in force, server, requests, bytes (suite.storage.session)
    shard_passes: dict[str, Any]  # the shards workload: per pass seen, distinct, duplicates, missing (suite.storage)
    duplicate_checked_samples: int  # tail samples fingerprinted (0: no tail, e.g. window = "epoch")
    ranks: list[dict[str, Any]]
    ranks_common_window: dict[str, float]
    memory_bytes: dict[str, int]  # rss_peak, pss_peak, uss_peak of the cell's process tree
    shm_peak_bytes: int
    open_fds_peak: int
    processes_peak: int
    probe: dict[str, Any]  # the probe's own cost and sample count


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Record:
    """One cell repetition's outcome. `to_json()` is what the store writes."""

    study: str
    cell_id: str
    repetition: int
    config: dict[str, Any]
    status: str
    launcher: dict[str, Any]
    started_at: str
    finished_at: str
    env: dict[str, Any] = field(default_factory=dict)
    metrics: Metrics | None = None
    error: ErrorInfo | None = None
    traceback: str | None = None
    raw: dict[str, Any] | None = None  # per-batch times: t_iter, got, done (seconds from the first iter())
    cleanup: dict[str, Any] | None = None  # what the runner killed and removed after the cell
    warnings: list[str] | None = None  # what makes an ok measurement doubtful (duplicate samples across workers)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"record status {self.status!r}: allowed {STATUSES}")
        if (self.status == OK) == (self.error is not None):
            raise ValueError("an ok record carries no error; a failed or timed-out one carries one")

    @classmethod
    def for_task(cls, task, status: str, launcher: dict[str, Any] | None = None, started_at: str | None = None,
                 **fields: Any) -> "Record":
        """A record for a suite.cell.Task."""
        return cls(study=task.study, cell_id=task.cell.cell_id, repetition=task.repetition,
                   config=task.cell.config, status=status, launcher=launcher or {"kind": "local"},
                   started_at=started_at or now(), finished_at=now(), **fields)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA}
        for key in ("study", "cell_id", "repetition", "config", "launcher", "started_at", "finished_at", "status",
                    "error", "traceback", "metrics", "raw", "env", "cleanup", "warnings"):
            value = getattr(self, key)
            if value is not None or key in ("metrics", "env"):
                out[key] = value
        if out.get("metrics") is None:
            out.pop("metrics")
        return out

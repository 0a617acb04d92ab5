"""The result record: one JSON file per cell repetition, the contract between measuring and analysis.

This module is its one definition: `Record`, which writes a record (`to_json`, `dump`; built by the runner, the
Slurm launcher and the synthetic generator) and reads one back (`Record.load`, refusing other schemas), the
shape of its errors, and the format's version. Its metrics are declared in loaderbench.schema.metrics. Pure
Python: analysis reads it without importing torch.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from loaderbench.errors import LoaderbenchError
from loaderbench.schema.cell import CELL_SETTINGS, CellConfig, Task
from loaderbench.schema.disturbance import KEPT_METRICS, is_disturbed
from loaderbench.schema.metrics import METRIC_NAMES, Metrics

# The record format's versions:
#   record/1  first format.
#   record/2  pipeline-neutral measuring window (loaderbench/study/window.py): config gains `pipeline_batches` (or
#             `window = "epoch"`), metrics gain `window` and, with several ranks, `ranks_common_window`;
#             `drain_prefetch` is gone. record/1 steady throughput read high with many workers and short
#             windows, so the two are never mixed.
#             Optional keys a record/2 reader must allow to be absent: `warnings` (a list of sentences about
#             an ok cell's soundness), metrics `duplicate_samples` / `duplicate_checked_samples` (iterable
#             datasets), env `factory` and config `factory`, `factory_args`, `factory_sha256`,
#             `factory_root`, `factory_file` (the custom workload), metrics `storage` (storage = "http") and
#             `shard_passes` (the shards workload), config axes `storage` ... `shard_samples` (loaderbench.schema.axes),
#             metrics `machine` (the machine's speed beside the window) and, in `previous_attempts`, an ok attempt
#             that was disturbed and measured again, with its `metrics` (throughput and machine speed).
#             Config axes `snapshot_every_n_steps` and `resume_at` and metrics `resume` (resume_at > 0) too, and
#             config `question` (the study's `[study] question`, no part of the cell id).
SCHEMA = "loaderbench.record/2"
SCHEMA_FAMILY = "loaderbench.record/"
STATUSES = ("ok", "failed", "timeout")
OK, FAILED, TIMEOUT = STATUSES


class RecordError(LoaderbenchError):
    """A file that is not a record this version can read: another schema, or the wrong shape."""


class RecordVersionError(RecordError):
    """A record of another schema (another loaderbench version): never read as this one, never overwritten."""


class ErrorInfo(TypedDict):
    kind: str  # one of loaderbench.measure.failures.KINDS
    message: str  # what happened and what to do


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


#: The top-level keys of a record, in the order it is written (`schema` first).
KEYS = (
    "study",
    "cell_id",
    "repetition",
    "config",
    "launcher",
    "started_at",
    "finished_at",
    "status",
    "error",
    "traceback",
    "metrics",
    "raw",
    "env",
    "cleanup",
    "warnings",
    "previous_attempts",
    "attempt",
)
_ALWAYS = ("env",)  # written even when empty


def record_problem(obj: Any) -> str | None:
    """Why `obj` (a parsed JSON file) is not a record this version reads, or None. The checks are the shape a
    reader relies on (tests/test_fuzz_results.py): a corrupt record is refused whole, never half-read."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    schema = obj.get("schema")
    if schema != SCHEMA:
        if isinstance(schema, str) and schema.startswith(SCHEMA_FAMILY):
            if schema == "loaderbench.record/1":
                return (
                    f"schema {schema!r}: measured with a window that read high with many workers; "
                    f"measure it again with this version"
                )
            return f"schema {schema!r} is not {SCHEMA!r} (written by another version of loaderbench)"
        return "not a loaderbench record (no schema)"
    for key in ("study", "cell_id", "repetition", "status", "config"):
        if key not in obj:
            return f"missing key {key!r}"
    for key, types in _SHAPE:
        if key in obj and (not isinstance(obj[key], types) or isinstance(obj[key], bool)):
            return f"malformed record ({key} is a {type(obj[key]).__name__})"
    return None


_SHAPE: tuple[tuple[str, Any], ...] = (
    ("study", str),
    ("cell_id", str),
    ("status", str),
    ("repetition", int),
    ("config", dict),
    ("metrics", (dict, type(None))),
    ("env", (dict, type(None))),
    ("error", (dict, type(None))),
)


@dataclass
class Record:
    """One cell repetition's outcome. `to_json()` is what the store writes; `Record.load` reads it back."""

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
    previous_attempts: list[dict[str, Any]] | None = None  # the store: earlier attempts that did not succeed
    attempt: int | None = None  # the store: which attempt at this cell repetition this is (1, 2, ...)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"record status {self.status!r}: allowed {STATUSES}")
        if (self.status == OK) == (self.error is not None):
            raise ValueError("an ok record carries no error; a failed or timed-out one carries one")

    @classmethod
    def for_task(
        cls,
        task: Task,
        status: str,
        launcher: dict[str, Any] | None = None,
        started_at: str | None = None,
        **fields: Any,
    ) -> Record:
        """A record for a loaderbench.schema.cell.Task."""
        return cls(
            study=task.study,
            cell_id=task.cell.cell_id,
            repetition=task.repetition,
            config=task.cell.config,
            status=status,
            launcher=launcher or {"kind": "local"},
            started_at=started_at or now(),
            finished_at=now(),
            **fields,
        )

    # --- reading and writing --------------------------------------------------------------------------------

    @classmethod
    def load(cls, source: str | os.PathLike | Mapping[str, Any]) -> Record:
        """A record from its file or its parsed JSON. RecordError (naming the file) when it is not valid JSON,
        another schema (RecordVersionError), or not shaped as a record; OSError when the file cannot be read.
        Top-level keys this version does not know are left out."""
        where = "record"
        obj: Any = source
        if not isinstance(source, Mapping):
            where = str(source)
            try:
                obj = json.loads(Path(source).read_text())
            except (ValueError, UnicodeDecodeError) as exc:
                raise RecordError(f"{where}: unreadable or truncated JSON ({type(exc).__name__})") from None
        why = record_problem(obj)
        if why is None:
            try:
                return cls(**{key: obj[key] for key in KEYS if key in obj})
            except (TypeError, ValueError) as exc:
                why = f"malformed record ({exc})"
        schema = obj.get("schema") if isinstance(obj, Mapping) else None
        other = isinstance(schema, str) and schema.startswith(SCHEMA_FAMILY) and schema != SCHEMA
        raise (RecordVersionError if other else RecordError)(f"{where}: {why}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA}
        for key in KEYS:
            value = getattr(self, key)
            if value is not None or key in _ALWAYS:
                out[key] = value
        return out

    def dump(self, path: str | os.PathLike) -> None:
        """Write the record as the store does (indent 1), here not atomically (loaderbench.schema.store is)."""
        Path(path).write_text(json.dumps(self.to_json(), indent=1, default=str))

    def next_attempt(self, previous: Record | None) -> Record:
        """This record as the attempt after `previous` (None: the first): the earlier attempts' status, error,
        times and launcher are kept under `previous_attempts`, and, of an ok attempt measured again because it was
        disturbed, its throughput and machine speed."""
        if previous is None:
            return replace(self, previous_attempts=None, attempt=1)
        history = list(previous.previous_attempts or [])
        entry = {key: getattr(previous, key) for key in _ATTEMPT_KEYS}
        if previous.ok:  # a disturbed measurement measured again: what it read stays beside the new one
            metrics: dict[str, Any] = dict(previous.metrics or {})
            entry["metrics"] = {k: metrics[k] for k in KEPT_METRICS if k in metrics}
        history.append(entry)
        return replace(self, previous_attempts=history, attempt=len(history) + 1)

    # --- what readers need ----------------------------------------------------------------------------------

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def cell(self) -> CellConfig:
        """The cell's settings, typed (ValueError when the config holds keys this version does not know)."""
        return CellConfig.of(self.config)

    def setting(self, name: str) -> Any:
        """One value of the cell's config by name (an axis or a measuring setting), None when the record lacks it."""
        if name not in CELL_SETTINGS:
            raise KeyError(f"{name!r} is not a setting of a cell")
        return self.config.get(name)

    def metric(self, name: str) -> Any:
        """A top-level metric by name (a declared key of `Metrics`), or None when the record lacks it."""
        if name not in METRIC_NAMES:
            raise KeyError(f"{name!r} is not a metric of a record; metrics: {', '.join(METRIC_NAMES)}")
        return (self.metrics or {}).get(name)

    @property
    def disturbed(self) -> bool:
        """Whether a local run judged this repetition disturbed (loaderbench.schema.disturbance)."""
        return self.ok and is_disturbed(self.metrics)

    @property
    def samples_per_s(self) -> float | None:
        return (self.metrics or {}).get("samples_per_s")

    @property
    def end_to_end_samples_per_s(self) -> float | None:
        return (self.metrics or {}).get("end_to_end_samples_per_s")

    @property
    def time_to_first_batch_s(self) -> float | None:
        return (self.metrics or {}).get("time_to_first_batch_s")

    @property
    def uss_peak_bytes(self) -> int | None:
        """Peak USS of the cell's process tree (what its processes alone held)."""
        memory = (self.metrics or {}).get("memory_bytes")
        return memory.get("uss_peak") if isinstance(memory, dict) else None

    @property
    def cpu_busy(self) -> float | None:
        """CPU seconds of the loading processes (main, workers, pin-memory thread) per second of the loop: how many
        cores the cell kept busy; None when the record lacks them."""
        metrics = self.metrics or {}
        cpu, total = metrics.get("cpu_s"), metrics.get("total_s")
        try:
            if not cpu or not total or float(total) <= 0:
                return None
            spent = sum(float(v or 0.0) for v in (cpu.get("main"), cpu.get("workers"), cpu.get("pin_memory_thread")))
            return spent / float(total)
        except (TypeError, ValueError, AttributeError):
            return None

    @property
    def wall_s(self) -> float | None:
        """Seconds from the repetition's start to its end; None when the times cannot be read."""
        try:
            span = dt.datetime.fromisoformat(self.finished_at) - dt.datetime.fromisoformat(self.started_at)
        except (TypeError, ValueError):
            return None
        return span.total_seconds()

    @property
    def error_kind(self) -> str | None:
        return self.error.get("kind") if self.error else None

    @property
    def error_message(self) -> str:
        return str(self.error.get("message", "")) if self.error else ""

    def error_line(self, width: int | None = None) -> str:
        """`kind: message`, the message cut to `width` characters."""
        return f"{self.error_kind or 'error'}: {self.error_message[:width]}"

    @property
    def gpus(self) -> int | None:
        """GPUs the cell saw (env.gpus), when the record says."""
        gpus = self.env.get("gpus") if isinstance(self.env, dict) else None
        return len(gpus) if isinstance(gpus, list) else None


_ATTEMPT_KEYS = ("status", "error", "started_at", "finished_at", "launcher")

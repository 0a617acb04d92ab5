"""A record as one row of the analysis's tidy table: `flatten`, and the columns it writes.

The metric columns come from the record's one declaration: every metric marked `Column` on
loaderbench.schema.metrics.Metrics (or on a block inside it) is a column, so the table cannot name a metric the
record does not declare. `flatten` works on the parsed JSON, not on a `Record`: it runs once per record, 100,000
times at scale (`python -m loaderbench.analysis.stage_costs`), where building a dataclass per record would cost.
"""

from __future__ import annotations

import json
from itertools import groupby
from typing import Any, get_type_hints, is_typeddict

from loaderbench.schema.axes import WORKER_ONLY_AXES
from loaderbench.schema.disturbance import machine_of, normalized, remeasures_of
from loaderbench.schema.metrics import Column, Metrics


def metric_columns() -> dict[str, tuple[str, ...]]:
    """Tidy column -> where the record keeps it under `metrics`, from the `Column` marks on `Metrics`."""
    out: dict[str, tuple[str, ...]] = {}

    def walk(block: Any, path: tuple[str, ...]) -> None:
        for key, hint in get_type_hints(block, include_extras=True).items():
            marks = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Column)]
            if marks:
                name = (marks[0].name or key).format(path[-1] if path else "")
                if name in out:
                    raise TypeError(f"two metrics are declared as the tidy column {name!r}")
                out[name] = (*path, key)
            elif is_typeddict(hint):
                walk(hint, (*path, key))

    walk(Metrics, ())
    return out


#: Tidy column -> where the record keeps it under `metrics`. Nested lists (epoch_s, memory_timeline...) are kept
#: as their JSON text, one type per Parquet column.
METRIC_PATHS = metric_columns()
ENV_KEYS = (
    "host",
    "cpu_model",
    "logical_cpus",
    "physical_cores",
    "mem_total",
    "shm_size",
    "kernel",
    "os",
    "python",
    "torch",
    "torchvision",
    "numpy",
    "pillow",
    "pillow_simd",
    "libjpeg_turbo",
    "libjpeg_turbo_version",
    "cuda_available",
    "cuda_device",
    "cuda_runtime",
    "cudnn",
    "git_commit",
    "load_1m_at_start",
    "container_runtime",
    "container_image",
    "container_digest",
    "lock_sha256",
    "loaderbench",
    "torch_threads",
    "omp_num_threads",
    "default_start_method",
)
SLURM_KEYS = ("job_id", "array_job_id", "array_task_id", "node", "partition", "cpus_per_task")


def _dig(d: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


#: Parquet needs one type per column: nested values are kept as their JSON text (`_DUMPS`, json.dumps(v,
#: sort_keys=True, default=str) without building an encoder per call, as json.dumps does given options).
_NESTED = frozenset((list, dict, tuple))
_DUMPS = json.JSONEncoder(sort_keys=True, default=str).encode


def _blocks(paths: list[tuple[str, tuple[str, ...]]]) -> list[tuple[str, list[tuple[str, tuple[str, ...]]], dict]]:
    """`paths` (column, path under `metrics`, two keys or more) in runs of the same block (their first key), in
    their order: (block, [(column, path within the block)], every column of the run None)."""
    out: list[tuple[str, list[tuple[str, tuple[str, ...]]], dict]] = []
    for block, run in groupby(paths, key=lambda cp: cp[1][0]):
        cols = [(c, p[1:]) for c, p in run]
        out.append((block, cols, dict.fromkeys(c for c, _ in cols)))
    return out


# METRIC_PATHS split by depth once, the nested ones by block (two keys deep first, then deeper:
# rng_duplicates.numpy.within_epoch, the order of the columns): flatten runs once per record, 100,000
# times at scale, and most blocks are absent from most records (one dict update then, not a lookup per column)
_METRICS_TOP = [(col, p[0]) for col, p in METRIC_PATHS.items() if len(p) == 1]
_METRICS_BLOCKS = _blocks([(col, p) for col, p in METRIC_PATHS.items() if len(p) == 2])
_METRICS_BLOCKS += _blocks([(col, p) for col, p in METRIC_PATHS.items() if len(p) > 2])
_ENV_COLS = [(f"env_{k}", k) for k in ENV_KEYS]


def flatten(record: dict[str, Any], path: str) -> dict[str, Any]:
    """One tidy row of a record that loaderbench.schema.record.record_problem accepts. In a num_workers = 0 row the
    worker-only axes are None, as in the cells made now, whatever version wrote the record. Two columns are derived:
    `samples_per_ref`, the throughput at the machine's own speed (loaderbench.schema.disturbance.normalized), and
    `remeasured`, how many disturbed attempts this repetition replaced."""
    nested, dumps = _NESTED, _DUMPS
    error = record.get("error")
    error = error if type(error) is dict else {}
    launcher = record.get("launcher")
    frames = error.get("frames")
    row: dict[str, Any] = {
        "study": record["study"],
        "cell_id": record["cell_id"],
        "repetition": int(record["repetition"]),
        "status": record["status"],
        "attempt": record.get("attempt", 1),
        "previous_attempts_n": len(record.get("previous_attempts") or ()),
        "error_kind": error.get("kind"),
        "error_message": error.get("message"),
        "error_frames": dumps(frames) if type(frames) in nested else frames,
        "started_at": record.get("started_at"),
        "finished_at": record.get("finished_at"),
        "launcher": launcher.get("kind") if type(launcher) is dict else None,
        "path": path,
    }
    config = record.get("config") or {}
    for key, value in config.items():
        if key == "dataset" and isinstance(value, dict):
            for k, v in value.items():
                row[f"dataset_{k}"] = dumps(v) if type(v) in nested else v
        else:
            row[key] = dumps(value) if type(value) in nested else value
    if config.get("num_workers") == 0:
        for key in WORKER_ONLY_AXES:
            if key in row:
                row[key] = None
    metrics = record.get("metrics") or {}
    get = metrics.get
    for col, key in _METRICS_TOP:
        v = get(key)
        row[col] = dumps(v) if type(v) in nested else v
    for block, cols, absent in _METRICS_BLOCKS:
        sub = get(block)
        if type(sub) is not dict:
            row.update(absent)
            continue
        for col, mpath in cols:
            v = sub.get(mpath[0]) if len(mpath) == 1 else _dig(sub, mpath)
            row[col] = dumps(v) if type(v) in nested else v
    row["samples_per_ref"] = normalized(metrics.get("samples_per_s"), config, machine_of(metrics))
    row["remeasured"] = remeasures_of(record.get("previous_attempts"))
    env = record.get("env") or {}
    for col, key in _ENV_COLS:
        v = env.get(key)
        row[col] = dumps(v) if type(v) in nested else v
    allowed = env.get("cpus_allowed")
    row["env_cpus_allowed_n"] = len(allowed) if isinstance(allowed, list) else None
    nofile = env.get("ulimit_nofile_cell", env.get("ulimit_nofile"))
    row["env_ulimit_nofile"] = nofile[0] if isinstance(nofile, list) and nofile else nofile
    slurm = env.get("slurm") or {}
    row["env_slurm_job_id"] = slurm.get("array_job_id") or slurm.get("job_id")
    for key in SLURM_KEYS[2:]:
        row[f"env_slurm_{key}"] = slurm.get(key)
    return row

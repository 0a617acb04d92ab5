"""Load result records into one tidy table (one row per cell repetition), cached as Parquet.

Records that cannot be used (truncated or corrupt JSON, a schema this code does not know, a stray
file) are skipped and reported with their path; they never crash the analysis or mix schemas.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

SCHEMA = "loaderbench.record/1"
CACHE_NAME = ".records-cache.parquet"

METRIC_PATHS = {
    "samples_per_s": ("samples_per_s",),
    "end_to_end_samples_per_s": ("end_to_end_samples_per_s",),
    "measured_s": ("measured_s",),
    "total_s": ("total_s",),
    "time_to_first_batch_s": ("time_to_first_batch_s",),
    "batch_wait_p50_s": ("batch_wait_s", "p50"),
    "batch_wait_p95_s": ("batch_wait_s", "p95"),
    "batch_wait_p99_s": ("batch_wait_s", "p99"),
    "batch_wait_max_s": ("batch_wait_s", "max"),
    "data_stall_fraction": ("data_stall_fraction",),
    "epoch_gap_s": ("epoch_gap_s",),
    "cpu_main_s": ("cpu_s", "main"),
    "cpu_workers_s": ("cpu_s", "workers"),
    "ctx_voluntary": ("ctx_switches", "voluntary"),
    "ctx_involuntary": ("ctx_switches", "involuntary"),
    "rss_peak_bytes": ("memory_bytes", "rss_peak"),
    "pss_peak_bytes": ("memory_bytes", "pss_peak"),
    "uss_peak_bytes": ("memory_bytes", "uss_peak"),
    "main_uss_peak_bytes": ("memory_bytes", "main_uss_peak"),
    "workers_uss_peak_bytes": ("memory_bytes", "workers_uss_peak"),
    "shm_peak_bytes": ("shm_peak_bytes",),
    "open_fds_peak": ("open_fds_peak",),
    "processes_peak": ("processes_peak",),
    "accelerator_busy_fraction": ("accelerator_busy_fraction",),
}
ENV_KEYS = ("host", "cpu_model", "logical_cpus", "physical_cores", "mem_total", "shm_size", "kernel", "python",
            "torch", "torchvision", "pillow", "pillow_simd", "libjpeg_turbo", "git_commit", "container_image",
            "container_digest", "lock_sha256", "loaderbench")


@dataclass
class LoadReport:
    loaded: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)


def _dig(d: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def flatten(record: dict[str, Any], path: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "study": record["study"], "cell_id": record["cell_id"], "repetition": int(record["repetition"]),
        "status": record["status"], "attempt": record.get("attempt", 1),
        "error_kind": _dig(record, ("error", "kind")), "error_message": _dig(record, ("error", "message")),
        "started_at": record.get("started_at"), "launcher": _dig(record, ("launcher", "kind")), "path": path,
    }
    for key, value in (record.get("config") or {}).items():
        if key == "dataset" and isinstance(value, dict):
            for k, v in value.items():
                row[f"dataset_{k}"] = v
        else:
            row[key] = value
    metrics = record.get("metrics") or {}
    for col, mpath in METRIC_PATHS.items():
        row[col] = _dig(metrics, mpath)
    env = record.get("env") or {}
    for key in ENV_KEYS:
        row[f"env_{key}"] = env.get(key)
    allowed = env.get("cpus_allowed")
    row["env_cpus_allowed_n"] = len(allowed) if isinstance(allowed, list) else None
    slurm = env.get("slurm") or {}
    row["env_slurm_job_id"] = slurm.get("array_job_id") or slurm.get("job_id")
    return row


def _check(record: Any) -> str | None:
    if not isinstance(record, dict):
        return "not a JSON object"
    schema = record.get("schema")
    if schema != SCHEMA:
        if isinstance(schema, str) and schema.startswith("loaderbench.record/"):
            return f"schema {schema!r} is not {SCHEMA!r} (written by another version of loaderbench)"
        return "not a loaderbench record (no schema)"
    for key in ("study", "cell_id", "repetition", "status", "config"):
        if key not in record:
            return f"missing key {key!r}"
    return None


def record_files(results: Path) -> list[Path]:
    """Every candidate record: <results>/<study>/*.json, skipping temp files of writes in progress."""
    return sorted(p for p in results.glob("*/*.json") if not p.name.startswith("."))


def load_records(results: str | os.PathLike, use_cache: bool = True) -> tuple[pd.DataFrame, LoadReport]:
    """All usable records under `results` as a tidy table; the cache is keyed by each file's size and mtime."""
    results = Path(results)
    report = LoadReport()
    cache_path = results / CACHE_NAME
    cached: dict[str, dict] = {}
    if use_cache and cache_path.exists():
        try:
            old = pd.read_parquet(cache_path)
            cached = {r["path"]: r for r in old.to_dict("records")}
        except Exception:  # a broken cache is rebuilt, never trusted
            cached = {}
    rows = []
    dirty = False
    for p in record_files(results):
        st = p.stat()
        key = str(p)
        hit = cached.get(key)
        if hit is not None and hit.get("_size") == st.st_size and hit.get("_mtime_ns") == st.st_mtime_ns:
            rows.append(hit)
            continue
        dirty = True
        try:
            record = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            report.skipped.append((key, f"unreadable or truncated JSON ({type(exc).__name__})"))
            continue
        why = _check(record)
        if why:
            report.skipped.append((key, why))
            continue
        row = flatten(record, key)
        row["_size"], row["_mtime_ns"] = st.st_size, st.st_mtime_ns
        rows.append(row)
    if len(rows) != len(cached):
        dirty = True
    df = pd.DataFrame(rows)
    report.loaded = len(df)
    if use_cache and dirty and not df.empty:
        try:
            tmp = cache_path.with_suffix(".tmp")
            df.to_parquet(tmp, index=False)
            os.replace(tmp, cache_path)
        except Exception:
            pass  # the cache is an optimisation; analysis goes on without it
    if not df.empty:
        df = df.drop(columns=[c for c in ("_size", "_mtime_ns") if c in df.columns])
    return df, report


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["status"] == "ok"] if not df.empty else df

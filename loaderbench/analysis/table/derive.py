"""Columns derived from the tidy table that the claims (loaderbench.analysis.claims) and their figures
(loaderbench.analysis.figures.questions) both read, so that a rule and the figure showing it see the same numbers.

Each function takes rows of the tidy table (loaderbench.analysis.table.records) and returns a Series aligned with
them, a
filtered copy with the derived columns added, or a value; none reads files or draws. Rows are taken as
given: callers pick the ok ones (loaderbench.analysis.table.records.ok_rows) where a function says it needs them.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from loaderbench.analysis.table.records import col, is_true, ok_mask, ok_rows

MIB = 2**20

#: The tutorial's optimization ladder, top to bottom: each rung adds one change to the one above.
RUNGS = ("baseline", "+workers", "+pin_memory", "+persistent", "+prefetcher", "+batched")


def start_method_label(rows: pd.DataFrame) -> pd.Series:
    """fork | spawn | forkserver | forkserver+preload (forkserver with `forkserver_preload` set)."""
    lab = col(rows, "start_method").astype(object).copy()
    pre = col(rows, "forkserver_preload").map(is_true)
    lab[(lab == "forkserver") & pre] = "forkserver+preload"
    return lab


def payload_mb(rows: pd.DataFrame) -> pd.Series:
    """The dataset payload the parent process carried (parent_payload_mb), 0 where it carried none."""
    return pd.to_numeric(col(rows, "parent_payload_mb", 0.0), errors="coerce").fillna(0.0)


def ranks(rows: pd.DataFrame) -> pd.Series:
    """Loader processes side by side (the ranks axis), 1 where the axis is not set."""
    return pd.to_numeric(col(rows, "ranks", 1), errors="coerce").fillna(1)


def copies_non_blocking(rows: pd.DataFrame) -> pd.Series:
    """Whether each row's host-to-device copies were issued with non_blocking=True (the default; the cells with
    blocking copies are the non_blocking question's control, not part of the feeding curves)."""
    return col(rows, "non_blocking", True).map(lambda v: True if v is None or v != v else is_true(v)).astype(bool)


def straggler_ms(rows: pd.DataFrame) -> pd.Series:
    """The extra wait per sample of the straggling worker (slow_worker_ms), 0 where there is none."""
    return pd.to_numeric(col(rows, "slow_worker_ms", 0.0), errors="coerce").fillna(0.0)


def ladder_rung(rows: pd.DataFrame) -> pd.Series:
    """The rung of RUNGS each row's configuration stands on: the highest change it has switched on."""

    def one(r) -> str:
        if not r.get("num_workers"):
            return "baseline"
        for name, key in (
            ("+batched", "batched"),
            ("+prefetcher", "prefetcher"),
            ("+persistent", "persistent_workers"),
            ("+pin_memory", "pin_memory"),
        ):
            if is_true(r.get(key)):
                return name
        return "+workers"

    return rows.apply(one, axis=1) if len(rows) else pd.Series(dtype=object)


def on_gpu(rows: pd.DataFrame) -> bool:
    """Whether the consumer step of these rows ran on a GPU (consumer "gpu" or a CUDA device)."""
    return bool(
        (col(rows, "consumer") == "gpu").any() or col(rows, "consumer_device").astype(str).str.startswith("cuda").any()
    )


def open_file_limit(rows: pd.DataFrame) -> pd.Series:
    """The open-file limit each cell ran under: the ulimit_nofile axis when set, else what the record saw."""
    axis = pd.to_numeric(col(rows, "ulimit_nofile"), errors="coerce")
    seen = pd.to_numeric(col(rows, "env_ulimit_nofile"), errors="coerce")
    return axis.fillna(seen)


def fd_exhausted(rows: pd.DataFrame) -> pd.Series:
    """Repetitions that failed for lack of file descriptors (classified as such, or "Too many open files" /
    "ancdata" in the error message)."""
    kind = col(rows, "error_kind").fillna("").astype(str)
    msg = col(rows, "error_message").fillna("").astype(str).str.lower()
    said = (kind == "too_many_open_files") | msg.str.contains("too many open files") | msg.str.contains("ancdata")
    return said & ~ok_mask(rows)


# ----------------------------------------------------------------------------------------------
# the workers' memory over a run (memory_timeline: the runner's probe samples)


def alive_samples(timeline, num_workers: int) -> list[list]:
    """The probe samples [t_s, n_procs, main_pss, workers_pss, main_uss, workers_uss] taken while every worker
    was alive (the main process and `num_workers` workers), from a timeline as recorded or as its JSON text;
    [] for anything else."""
    if isinstance(timeline, str):
        try:
            timeline = json.loads(timeline)
        except ValueError:
            return []
    if not isinstance(timeline, list):
        return []
    return [s for s in timeline if isinstance(s, list) and len(s) >= 6 and s[1] >= 1 + num_workers]


def timeline_growth(timeline, num_workers: int) -> tuple[float, float]:
    """(growth, peak) of the workers' summed USS in bytes, over the probe samples in which all workers were
    alive: the highest such sample minus the first, and the highest. (The highest, not the last: the last
    may catch a worker unmapping its memory on the way out.) NaN with fewer than 3 such samples."""
    alive = alive_samples(timeline, num_workers)
    if len(alive) < 3:
        return math.nan, math.nan
    peak = max(s[5] for s in alive)
    return float(peak - alive[0][5]), float(peak)


def peak_pss_mib_per_worker(timeline, num_workers: int) -> float:
    """The workers' highest summed PSS while all were alive, per worker, in MiB (NaN without such a sample)."""
    alive = alive_samples(timeline, int(num_workers))
    return max(s[3] for s in alive) / MIB / int(num_workers) if alive else math.nan


def with_growth(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows with workers, with `growth_mib_per_worker` and `end_mib_per_worker` (workers' USS growth and
    peak over the run, per worker, from memory_timeline)."""
    ok = ok_rows(rows)
    ok = ok[ok["num_workers"] > 0].copy()
    gr = [timeline_growth(t, int(n)) for t, n in zip(col(ok, "memory_timeline"), ok["num_workers"])]
    ok["growth_mib_per_worker"] = [a / MIB / n for (a, _), n in zip(gr, ok["num_workers"])]
    ok["end_mib_per_worker"] = [b / MIB / n for (_, b), n in zip(gr, ok["num_workers"])]
    return ok

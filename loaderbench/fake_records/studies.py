"""Realistic fake result records in the real schema, for tests and for the scale benchmark.

The records look like what `loaderbench/measure/runner.py` writes (same keys, same nesting, the same `indent=1`
JSON, per-batch raw times included), so loading them costs what loading real ones costs. The
throughput follows a simple physical model, so figures, fits and recommendations drawn from them
look like real ones:

* `sleep` (I/O-bound): every worker adds one blocking stream; scaling goes far past the cores
  until the main process (collate + IPC) saturates;
* `cpu` and `jpeg` (CPU-bound): Gunther-style scaling up to the cores, a slow loss past them
  (time-slicing), and for `jpeg` a decode-only reference cell (`jpeg_stage = "decode"`) that
  bounds the full pipeline;
* repetitions scatter by about 1.5 %; a few cells are noisy (unstable); too many workers under
  `spawn` run out of file descriptors; a few repetitions fail or time out at random.

Every record is made by `loaderbench.schema.record.Record` (the record's one definition, pure Python) and written
as the results store writes a first attempt; nothing here imports torch or the harness.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from loaderbench.schema.record import FAILED, OK, TIMEOUT, Record
from loaderbench.schema.store import Store

#: num_workers swept per study (as loaderbench/studies/scaling.toml), capped at 4 x cores.
N_SWEEP = (0, 1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
CORES = (1, 2, 4, 8, 16, 32, 64)
START_METHODS = ("fork", "spawn", "forkserver")
#: (workload, decoder): the curves of one study.
WORKLOADS = (("sleep", None), ("cpu", None), ("jpeg", "pil"), ("jpeg", "torchvision"))

MACHINES = (
    {
        "host": "node-a01",
        "cpu_model": "AMD EPYC 7763 64-Core Processor",
        "logical_cpus": 128,
        "physical_cores": 64,
        "mem_total": 512 * 2**30,
        "shm_size": 256 * 2**30,
        "speed": 1.0,
    },
    {
        "host": "node-b07",
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "logical_cpus": 112,
        "physical_cores": 56,
        "mem_total": 1024 * 2**30,
        "shm_size": 64 * 2**30,
        "speed": 1.15,
    },
)

# Per-sample cost in one worker (s) and the model's contention / crosstalk per workload.
_COST = {("sleep", None): 0.0052, ("cpu", None): 0.0021, ("jpeg", "pil"): 0.0042, ("jpeg", "torchvision"): 0.0036}
_SIGMA = {"sleep": 0.002, "cpu": 0.015, "jpeg": 0.03}
_KAPPA = {"sleep": 2e-6, "cpu": 1e-4, "jpeg": 2e-4}
_MAIN_CAP = 25_000.0  # samples/s the main process can collate and unpickle
_DECODE_SHARE = 0.62  # fraction of the jpeg pipeline's time spent decoding


def _axes(workload: str, decoder: str | None, n: int, cores: int, start: str, jpeg_stage: str | None) -> dict:
    return {
        "workload": workload,
        "num_workers": n,
        "cores": cores,
        "start_method": start if n > 0 else "fork",
        "sharing_strategy": "file_descriptor",
        "batch_size": 64,
        "prefetch_factor": 2 if n > 0 else None,
        "pin_memory": False,
        "persistent_workers": False if n > 0 else None,
        "in_order": True if n > 0 else None,
        "batched": False,
        "epochs": 1,
        "step_ms": 0.0,
        "step_kind": None,
        "sleep_ms": 5.0 if workload == "sleep" else None,
        "cpu_work": 15 if workload == "cpu" else None,
        "decoder": decoder,
        "jpeg_stage": jpeg_stage,
        "sample_kb": 12.0 if workload != "jpeg" else None,
        "tensors_per_sample": 1 if workload != "jpeg" else None,
    }


def _cell_id(study: str, config: dict) -> str:
    canon = json.dumps({"study": study, **config}, sort_keys=True, separators=(",", ":"), default=str)
    return "c" + hashlib.sha256(canon.encode()).hexdigest()[:15]


def model_throughput(
    workload: str, decoder: str | None, n: int, cores: int, speed: float = 1.0, jpeg_stage: str | None = None
) -> float:
    """Noise-free steady-state samples/s of the synthetic model."""
    cost = _COST[(workload, decoder)] / speed
    if jpeg_stage == "decode":
        cost *= _DECODE_SHARE
    lam = 1.0 / cost
    if n == 0:
        return lam * (1.04 if workload != "sleep" else 1.0)  # no IPC, but nothing overlaps either
    sigma, kappa = _SIGMA[workload], _KAPPA[workload]
    if workload == "sleep":  # blocked workers need no CPU: scaling continues past the cores
        x = lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))
        return min(x, _MAIN_CAP * min(cores, 4) / 4 * 0.9)
    busy = min(n, cores)
    x = lam * busy / (1 + sigma * (busy - 1) + kappa * busy * (busy - 1))
    if n > cores:  # time-slicing: cache misses and context switches, a few % per extra worker per core
        x /= 1 + 0.025 * (n / cores - 1)
    if n < cores:  # the main process shares a core with the workers only when there are spare ones
        x *= 0.97
    return x


def _machine_env(machine: dict, study_index: int, cores: int) -> dict:
    return {
        "loaderbench": "0.1.0",
        "host": machine["host"],
        "cpu_model": machine["cpu_model"],
        "logical_cpus": machine["logical_cpus"],
        "physical_cores": machine["physical_cores"],
        "mem_total": machine["mem_total"],
        "shm_size": machine["shm_size"],
        "ulimit_nofile": [65536, 65536],
        "kernel": "5.14.0-427.el9.x86_64",
        "os": "Linux-5.14.0-427.el9.x86_64-x86_64-with-glibc2.34",
        "git_commit": "4cc8ae254921c71a3aa147a65f38c6c4394a40d9",
        "python": "3.11.7",
        "torch": "2.14.1+cu130",
        "torchvision": "0.29.1+cu130",
        "numpy": "2.4.6",
        "pillow": "13.0.0",
        "pillow_simd": False,
        "libjpeg_turbo": True,
        "libjpeg_turbo_version": "3.2.0",
        "cuda_available": False,
        "cuda_device": None,
        "cuda_runtime": None,
        "container_runtime": "apptainer",
        "container_image": "/scratch/images/loaderbench-0.1.0.sif",
        "container_digest": "sha256:" + hashlib.sha256(b"loaderbench-0.1.0").hexdigest(),
        "lock_sha256": hashlib.sha256(b"lock").hexdigest(),
        "slurm": {
            "job_id": str(4_100_000 + study_index * 1000),
            "array_job_id": str(4_100_000 + study_index * 1000),
            "node": machine["host"],
            "cpus_per_task": str(cores),
            "partition": "cpu",
        },
        "cpus_allowed": list(range(cores)),
        "torch_threads": cores,
        "omp_num_threads": str(cores),
        "ulimit_nofile_cell": 65536,
        "sharing_strategy": "file_descriptor",
    }


def study_cells(
    workloads=WORKLOADS,
    cores=CORES,
    n_sweep=N_SWEEP,
    start_methods=START_METHODS,
    decode_reference: bool = True,
    max_workers_per_core: int = 4,
) -> list[dict]:
    """Axis values of every cell of a synthetic study (as `suite` expands a matrix)."""
    cells = []
    for workload, decoder in workloads:
        for c in cores:
            for n in n_sweep:
                if n > max_workers_per_core * c:
                    continue
                for start in start_methods if n > 0 else ("fork",):
                    cells.append(_axes(workload, decoder, n, c, start, "full" if workload == "jpeg" else None))
    if decode_reference:  # the decode-only ceiling: one core, main process
        for decoder in sorted({d for w, d in workloads if w == "jpeg"}):
            cells.append(_axes("jpeg", decoder, 0, 1, "fork", "decode"))
    return cells


def study_records(
    study: str,
    cells: list[dict],
    repetitions: int = 3,
    seed: int = 0,
    *,
    study_index: int = 0,
    noisy_share: float = 0.04,
    fail: dict | None = None,
    warmup_batches: int = 8,
    measure_batches: int = 100,
    raw: bool = True,
    random_failures: bool = True,
):
    """Yield the records of one synthetic study, repetitions interleaved across cells.

    `fail` maps a cell index to an error kind: every repetition of that cell fails with it.
    """
    rng = np.random.default_rng(seed)
    machine = MACHINES[study_index % len(MACHINES)]
    noisy = rng.random(len(cells)) < noisy_share
    for rep in range(repetitions):
        for ci, axes in enumerate(cells):
            rec = _record(
                study,
                study_index,
                machine,
                axes,
                rep,
                rng,
                bool(noisy[ci]),
                warmup_batches,
                measure_batches,
                raw,
                random_failures,
            )
            if fail and ci in fail:
                rec = _failed(rec, fail[ci])
            yield rec.to_json()


def _failed(rec: Record, kind: str) -> Record:
    """`rec` made to fail with error `kind` (a timeout when `kind` is "timeout")."""
    return dataclasses.replace(
        rec,
        status=TIMEOUT if kind == "timeout" else FAILED,
        raw=None,
        error={"kind": kind, "message": f"synthetic {kind}: the cell was made to fail"},
        metrics={"processes_peak": rec.config["num_workers"] + 1},
    )


def write_records(folder: str | os.PathLike, records: Iterable[Record | Mapping[str, Any]]) -> list[Path]:
    """Write records (a Record, or its JSON as `study_records` yields it, read back through `Record.load`) as the
    results store writes a cell's first attempt: <folder>/<study>/<cell_id>-r<repetition>.json, `"attempt": 1`."""
    store = Store(folder)
    paths = []
    for rec in records:
        record = rec if isinstance(rec, Record) else Record.load(rec)
        p = store.path(record.study, record.cell_id, record.repetition)
        p.parent.mkdir(parents=True, exist_ok=True)
        record.next_attempt(None).dump(p)
        paths.append(p)
    return paths


def _record(
    study: str,
    si: int,
    machine: dict,
    axes: dict,
    rep: int,
    rng: np.random.Generator,
    noisy: bool,
    warmup: int,
    measure: int,
    raw: bool,
    random_failures: bool = True,
) -> Record:
    """One repetition of one cell: failed or timed out at random (when `random_failures`), else ok with metrics
    from the model. The draws from `rng` come in a fixed order, so a seed gives the same records."""
    config = {
        **axes,
        "warmup_batches": warmup,
        "measure_batches": measure,
        "seed": 0,
        "dataset": {"kind": "synthetic-jpeg", "images": 8192},
    }
    cell_id = _cell_id(study, config)
    t0 = 1_790_000_000 + si * 86_400 + rep * 3600 + (int(cell_id[1:8], 16) % 3000)
    head = dict(
        study=study,
        cell_id=cell_id,
        repetition=rep,
        config=config,
        launcher={"kind": "slurm"},
        started_at=_iso(t0),
        env=_machine_env(machine, si, axes["cores"]),
    )
    failed = _random_failure(axes, rng, t0) if random_failures else None
    if failed is not None:
        return Record(**head, **failed)
    metrics, total_s, ttfb, batch_s = _metrics(axes, machine, rng, noisy, warmup, measure)
    return Record(
        **head,
        status=OK,
        finished_at=_iso(t0 + total_s + 1),
        metrics=metrics,
        raw=_raw_times(rng, ttfb, batch_s, warmup + measure) if raw else None,
    )


def _random_failure(axes: dict, rng: np.random.Generator, t0: float) -> dict | None:
    """The failure fields of a repetition that fails (too many workers under spawn run out of descriptors; a
    few die at random; some oversubscribed cells on many cores time out), or None."""
    n, cores = axes["num_workers"], axes["cores"]
    fd_fail = axes["start_method"] == "spawn" and n >= 128 and rng.random() < 0.7
    if fd_fail or rng.random() < 0.004:
        kind, msg = (
            (
                "too_many_open_files",
                f"too many open files with {n} workers (ulimit -n 65536); "
                "raise the limit or use sharing_strategy = file_system",
            )
            if fd_fail
            else ("worker_killed", "DataLoader worker (pid 81234) exited unexpectedly")
        )
        return dict(
            status=FAILED,
            error={"kind": kind, "message": msg},
            finished_at=_iso(t0 + 5),
            metrics={"processes_peak": n + 1, "open_fds_peak": 65536 if fd_fail else 200},
        )
    if n >= 4 * cores and cores >= 32 and rng.random() < 0.05:
        return dict(
            status=TIMEOUT,
            error={"kind": "timeout", "message": "the cell did not finish within timeout_s = 1800 s and was killed"},
            finished_at=_iso(t0 + 1800),
            metrics={"processes_peak": n + 1},
        )
    return None


def _metrics(
    axes: dict, machine: dict, rng: np.random.Generator, noisy: bool, warmup: int, measure: int
) -> tuple[dict[str, Any], float, float, float]:
    """(metrics, total_s, time to first batch, seconds per batch) of an ok repetition, from the model."""
    n, cores, bs = axes["num_workers"], axes["cores"], axes["batch_size"]
    x0 = model_throughput(axes["workload"], axes["decoder"], n, cores, machine["speed"], axes["jpeg_stage"])
    spread = 0.12 if noisy else (0.04 if n > 2 * cores else 0.015)
    x = x0 * math.exp(rng.normal(0.0, spread))
    batch_s = bs / x
    ttfb = (0.05 + 0.01 * n) if axes["start_method"] == "fork" else (1.1 + 0.25 * n / cores)
    measured_s = measure * batch_s
    total_s = ttfb + (warmup + measure - 1) * batch_s
    uss_worker = 38 * 2**20 if axes["workload"] != "jpeg" else 55 * 2**20
    main_uss = 310 * 2**20 + int(rng.normal(0, 2**20))
    workers_uss = n * uss_worker
    ctx_inv = int(max(0, n - cores) * (warmup + measure) * 3 + rng.integers(0, 40))
    metrics: dict[str, Any] = {
        "samples_per_s": x,
        "measured_samples": measure * bs,
        "measured_s": measured_s,
        "end_to_end_samples_per_s": (warmup + measure) * bs / total_s,
        "total_s": total_s,
        "time_to_first_batch_s": ttfb * math.exp(rng.normal(0, 0.05)),
        "batch_wait_s": {
            "p50": batch_s * 0.9,
            "p95": batch_s * 1.6,
            "p99": batch_s * 2.1,
            "max": batch_s * 3,
            "mean": batch_s,
        },
        "data_stall_fraction": 0.98,
        "epoch_s": [total_s],
        "epoch_gap_s": None,
        "epoch_gaps_s": [],
        "cpu_s": {"main": measured_s * 0.2, "workers": measured_s * min(n, cores) * 0.9},
        "ctx_switches": {"voluntary": int((warmup + measure) * (n + 2) * 8), "involuntary": ctx_inv},
        "pin_memory_effective": False,
        "warmup_batches_effective": max(warmup, n * 2),
        "memory_bytes": {
            "rss_peak": main_uss * 4 + n * 260 * 2**20,
            "pss_peak": main_uss * 2 + workers_uss * 2,
            "uss_peak": main_uss + workers_uss,
            "main_uss_peak": main_uss,
            "workers_uss_peak": workers_uss,
        },
        "shm_peak_bytes": int(n * 2 * bs * 150_528 * 4) if n else 0,
        "open_fds_peak": 40 + 6 * n,
        "processes_peak": n + 1,
        "probe": {"samples": 12, "cost_s": 0.02, "workers_cpu_s_sampled": 0.1},
        "memory_timeline": [
            [round(0.2 * i, 4), n + 1, main_uss * 3, workers_uss * 2, main_uss, workers_uss] for i in range(6)
        ],
    }
    return metrics, total_s, ttfb, batch_s


def _raw_times(rng: np.random.Generator, ttfb: float, batch_s: float, batches: int) -> dict[str, list]:
    """Per-batch times as the harness records them (seconds from the first iter()): one iterator, `batches`
    batches arriving about `batch_s` apart after the first one at `ttfb`."""
    gaps = rng.gamma(8.0, batch_s / 8.0, batches)
    got = np.round(ttfb + np.concatenate([[0.0], np.cumsum(gaps[1:])]), 6)
    return {"t_iter": [0.0], "got": [got.tolist()], "done": [np.round(got + 2e-6, 6).tolist()]}


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds")


def write_synthetic_records(
    folder: str | os.PathLike,
    n: int = 1000,
    seed: int = 0,
    *,
    repetitions: int = 10,
    warmup_batches: int = 8,
    measure_batches: int = 100,
    raw: bool = True,
    study_prefix: str = "synth",
) -> list[Path]:
    """Write `n` records (cell repetitions) under `folder/<study>/`, as the results store lays them out.

    Studies are scaling sweeps (`num_workers` 0..4x cores, cores 1..64, 4 workloads, 3 start methods,
    `repetitions` each) on alternating machine types, named `<study_prefix>-00`, `-01`, ...; the last
    one is cut short so exactly `n` records are written. Deterministic for a given `seed`.
    Returns the paths written.
    """
    folder = Path(folder)
    paths: list[Path] = []
    si = 0
    while len(paths) < n:
        study = f"{study_prefix}-{si:02d}"
        records = study_records(
            study,
            study_cells(),
            repetitions,
            seed=seed * 1000 + si,
            study_index=si,
            warmup_batches=warmup_batches,
            measure_batches=measure_batches,
            raw=raw,
        )
        for rec in records:
            if len(paths) >= n:
                break
            paths += write_records(folder, [rec])
        si += 1
    return paths


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m loaderbench.fake_records.studies", description=write_synthetic_records.__doc__
    )
    ap.add_argument("folder")
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    paths = write_synthetic_records(args.folder, args.records, args.seed)
    print(f"wrote {len(paths)} records under {args.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

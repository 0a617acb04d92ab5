"""The body of one cell repetition's process: pin cores, set threads, start method and sharing strategy, then
measure its rank(s) (loaderbench.measure.rank: one rank, loader ranks side by side; loaderbench.measure.ddp: DDP
ranks), write the result file.

Runs in a fresh process forked from the runner (which imported torch once but never touched CUDA or
started a DataLoader), so every process-global setting starts clean.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from loaderbench.measure.rank import SHM_BATCH, combine_ranks, measure_rank
from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource


def pin_cores(cores: int) -> list[int]:
    """Use the first `cores` CPUs of those this process may use; workers inherit the mask."""
    allowed = sorted(os.sched_getaffinity(0))
    if cores > len(allowed):
        raise RuntimeError(f"cores = {cores} but only {len(allowed)} CPUs are allowed here ({allowed})")
    chosen = allowed[:cores]
    os.sched_setaffinity(0, chosen)
    return chosen


def cell_main(cell: CellConfig, repetition: int, prepared, result_path: str, in_cgroup: bool = False) -> int:
    """Returns the process exit code. The result file holds either metrics or a classified error."""
    os.setpgid(0, 0)  # the runner kills the whole group (workers, forkserver) on timeout or interrupt
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    result: dict[str, Any]
    try:
        result = {"status": "ok", **measure_cell(cell, repetition, prepared, in_cgroup=in_cgroup)}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a record
        from loaderbench.measure.failures import classify_exception
        from loaderbench.measure.traceback_frames import frames_of

        result = {
            "status": "failed",
            "error": {**classify_exception(exc, cell.sharing_strategy), "frames": frames_of(exc)},
            "traceback": traceback.format_exc()[-4000:],
            SHM_BATCH: getattr(exc, SHM_BATCH, None),
        }
    with open(result_path, "w") as fh:
        json.dump(result, fh, default=str)
    return 0


def measure_cell(
    cell: CellConfig, repetition: int, prepared, loop: Callable | None = None, in_cgroup: bool = False
) -> dict[str, Any]:
    """Set the cell's process-global state, then measure its rank(s). `loop` replaces the measuring loop
    (loaderbench.measure.loop.run_loop's signature): the suite's own benchmarks drive the same cell with their own."""
    cores = cell.cores
    if cell.rank_mode == "ddp":
        from loaderbench.measure.ddp import launched_rank

        launched = launched_rank()
        if launched is not None:  # one rank of several tasks (Slurm): the cell's cores are split among them
            cores = max(1, cores // launched[1])
    cpus = pin_cores(cores)
    from loaderbench.measure.limits import apply_cell_limits

    apply_cell_limits(cell, in_cgroup)  # ulimit_nofile, memory_limit_mb (RLIMIT_AS where no cgroup)
    os.environ["OMP_NUM_THREADS"] = str(cores)  # spawned workers read it at start-up
    import torch
    import torch.multiprocessing as tmp

    from loaderbench.measure.fingerprint import cell_fingerprint
    from loaderbench.measure.machine_speed import MachineWatch

    # oversubscription is what some cells measure on purpose; torch's warning about it would only be noise
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    torch.set_num_threads(cores)
    if cell.sharing_strategy is not None:  # None without workers: nothing is shared, torch's default stays
        tmp.set_sharing_strategy(cell.sharing_strategy)
    from loaderbench.measure.storage_session import serve_for_cell

    with serve_for_cell(cell, prepared) as storage:  # storage = "http": the cell's server and network path
        source = DataSource(prepared, endpoint=storage.endpoint)
        watch = MachineWatch(cpus)
        if cell.rank_mode == "ddp":
            from loaderbench.measure.ddp import measure_ddp

            watch.start()
            metrics, raw = measure_ddp(cell, repetition, source, loop=loop)
            metrics["machine"] = watch.stop()
            shm_batch = metrics.pop(SHM_BATCH, None)
        elif cell.ranks == 1:
            metrics, raw = measure_rank(cell, repetition, source, loop=loop, machine=watch)
            shm_batch = metrics.pop(SHM_BATCH, None)
        else:
            watch.start()
            metrics, raw = measure_ranks(cell, repetition, source, loop=loop)
            metrics["machine"] = watch.stop()
            shm_batch = metrics.pop(SHM_BATCH, None)
    metrics.update(storage.metrics(metrics.get("samples_per_s")))
    from loaderbench.workloads import workload_env

    warnings_seen = metrics.pop("warnings", None) or []
    return {
        "metrics": metrics,
        "raw": raw,
        "cell_env": {**cell_fingerprint(), **workload_env(cell)},
        "warnings": warnings_seen,
        SHM_BATCH: shm_batch,
    }


def measure_ranks(
    cell: CellConfig, repetition: int, source: DataSource, loop: Callable | None = None
) -> tuple[dict, dict]:
    """R loader processes side by side (as DDP ranks on one node share its cores), started together.
    Throughput: samples of all ranks over the interval in which all were measuring; time to first batch and
    tail waits are the worst rank's."""
    ranks = cell.ranks
    pipes, pids = [], []
    go_r, go_w = os.pipe()
    for rank in range(1, ranks):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.read(go_r, 1)
            code = 1
            try:
                m, raw = measure_rank(cell, repetition, source.for_rank(rank), loop)
                with os.fdopen(w, "w") as fh:
                    json.dump({"metrics": m, "raw": raw}, fh, default=str)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        pipes.append(r)
        pids.append(pid)
    os.write(go_w, b"x" * (ranks - 1))
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    m0, raw0 = measure_rank(cell, repetition, source, loop)
    per_rank, raws = [m0], [raw0]
    for r, pid in zip(pipes, pids):
        with os.fdopen(r) as fh:
            text = fh.read()
        _, status = os.waitpid(pid, 0)
        if not text:
            raise RuntimeError(f"loader rank process {pid} failed (exit status {os.waitstatus_to_exitcode(status)})")
        got = json.loads(text)
        per_rank.append(got["metrics"])
        raws.append(got["raw"])
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    agg = combine_ranks(cell, per_rank, raws)
    ranks_main = sum(m["cpu_s"]["main"] for m in per_rank[1:])
    agg["cpu_s"] = {
        "main": (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime) + ranks_main,
        "workers": children.ru_utime + children.ru_stime - ranks_main,
        "pin_memory_thread": sum(m["cpu_s"]["pin_memory_thread"] for m in per_rank),
    }
    return agg, raw0

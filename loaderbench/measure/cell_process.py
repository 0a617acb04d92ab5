"""The body of one cell repetition's process: pin cores, set threads, start method and sharing strategy,
build the workload and its DataLoader, run the measuring loop, write the result file.

Runs in a fresh process forked from the runner (which imported torch once but never touched CUDA or
started a DataLoader), so every process-global setting starts clean.
"""

from __future__ import annotations

import functools
import gc
import inspect
import json
import os
import resource
import signal
import time
import traceback
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource

if TYPE_CHECKING:
    from loaderbench.measure.machine_speed import MachineWatch


#: the result's key for one batch's tensor bytes, measured in a cell with its own /dev/shm (the runner computes
#: the size that setting needs from it: loaderbench.measure.private_shm); a failure carries it on its exception
SHM_BATCH = "shm_batch_bytes"
#: batches the second (validation) loader of `second_loader` reads after every epoch
VALIDATION_BATCHES = 4
#: workloads whose samples carry their index (loaderbench.workloads.payload.make_sample): their delivery order is
#: matched to the sampler's
ORDERED_WORKLOADS = ("sleep", "cpu")


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


def _batch_bytes(cell: CellConfig, parts) -> int | None:
    """A batch's tensor bytes, from one sample read in this process (a cell with its own /dev/shm only). The fault
    workload's faulty sample is not the one read."""
    if not cell.shm_size_mb or parts.iterable or len(parts.dataset) < 2:
        return None
    from loaderbench.measure.private_shm import tensor_bytes

    return tensor_bytes(parts.dataset[1 if cell.fault_at == 0 else 0]) * cell.batch_size


def _pin_thread_cpu_s(seen: dict[int, float]) -> None:
    """Update `seen` (thread id -> CPU seconds) for the DataLoader's pin-memory thread(s) alive now; read
    before the iterator is dropped, since the thread ends with it (one thread per epoch unless persistent)."""
    import threading

    for t in threading.enumerate():
        target = getattr(t, "_target", None)
        if target is not None and getattr(target, "__name__", "") == "_pin_memory_loop" and t.ident:
            try:
                seen[t.ident] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            except (OSError, AttributeError):
                pass


def observers_for(cell: CellConfig, parts, plan, loader=None) -> list:
    """What watches this cell's batches (loaderbench.measure.observers): the rng workload's draws; the order the
    sleep and cpu workloads' batches arrive in, against the sampler's; an iterable dataset's tail,
    for samples its workers all yield; the shards workload's passes, each checked for exactly-once (its stream
    repeats the shards within an epoch by design, so the tail check does not apply to it)."""
    from loaderbench.measure.observers import (
        DeliveryOrder,
        EpochMarks,
        RngRecorder,
        SampledOrder,
        SharingSeen,
        TailDuplicates,
    )

    out: list = []
    if cell.workload == "rng":
        out.append(RngRecorder())
    if cell.epoch_attribute:
        out.append(EpochMarks())
    if cell.sharing_switch not in (None, "none"):
        out.append(SharingSeen())
    order = getattr(loader, "batch_sampler", None)
    if cell.workload in ORDERED_WORKLOADS and isinstance(order, SampledOrder):
        out.append(DeliveryOrder(order))
    if cell.workload == "shards":
        from loaderbench.storage.exactly_once import shard_observer

        out.append(shard_observer(parts, cell.num_workers))
    elif parts.iterable and plan.tail:
        out.append(TailDuplicates(plan.warmup + plan.measure, cell.num_workers))
    return out


def _loader(cell: CellConfig, parts, samples: int, rank: int, repetition: int, sampler=None):
    """The cell's loader over `parts` (loaderbench.workloads.LoaderParts): a DataLoader, with process or (where
    torch offers them) thread workers, or a torchdata.nodes pipeline (loaderbench.measure.nodes_loader). A
    map-style dataset is read in a seeded random order, sized to `samples` per epoch (with replacement when it
    is smaller), or by `sampler` (a DDP rank's share); an iterable one is read as it yields."""
    import torch
    import torch.multiprocessing as tmp
    from torch.utils.data import DataLoader, RandomSampler

    workers = cell.num_workers
    dataset = parts.dataset
    generator = torch.Generator().manual_seed(cell.seed * 1000 + repetition * 64 + rank)
    pin = cell.pin_memory and torch.cuda.is_available()
    if workers > 0 and cell.forkserver_preload:
        # Python <= 3.13's forkserver imports nothing of the parent unless told to
        tmp.get_context("forkserver").set_forkserver_preload(["torch", "torchvision", type(dataset).__module__])
    if cell.loader == "nodes":
        from loaderbench.measure.nodes_loader import nodes_loader

        sampler = RandomSampler(dataset, replacement=len(dataset) < samples, num_samples=samples, generator=generator)
        return nodes_loader(cell, parts, sampler, pin), pin
    kwargs: dict[str, Any] = {}
    batching: dict[str, Any] = {"batch_size": cell.batch_size, "drop_last": True}
    if cell.worker_method == "thread":
        from loaderbench.study.loader_rules import THREAD_ARGUMENT, torch_version

        if THREAD_ARGUMENT not in inspect.signature(DataLoader).parameters:
            raise ValueError(f"thread workers are not available in torch {torch_version()}'s DataLoader")
        kwargs[THREAD_ARGUMENT] = "thread"
    if sampler is not None:
        kwargs["sampler"] = sampler
    elif not parts.iterable:
        if len(dataset) == samples:
            kwargs.update(shuffle=True, generator=generator)
        else:
            kwargs["sampler"] = RandomSampler(
                dataset, replacement=len(dataset) < samples, num_samples=samples, generator=generator
            )
        if workers > 0:  # the same batches, drawn through SampledOrder, which keeps their order (DeliveryOrder)
            from torch.utils.data import BatchSampler

            from loaderbench.measure.observers import SampledOrder

            sampler = kwargs.pop("sampler", None)
            if sampler is None:  # shuffle=True's own sampler; the loader still draws its base seed from the generator
                kwargs.pop("shuffle")
                sampler = RandomSampler(dataset, generator=generator)
            batching = {"batch_sampler": SampledOrder(BatchSampler(sampler, cell.batch_size, drop_last=True))}
    if parts.collate_fn is not None:
        kwargs["collate_fn"] = parts.collate_fn
    if workers > 0:
        if cell.start_method is not None:  # None: thread workers
            kwargs["multiprocessing_context"] = tmp.get_context(cell.start_method)
        kwargs.update(
            prefetch_factor=cell.prefetch_factor,
            persistent_workers=cell.persistent_workers,
            in_order=cell.in_order,
        )
        init = parts.worker_init_fn
        if cell.worker_init == "seed_all":
            from loaderbench.workloads.rng import seed_all_worker_init

            init = _chain_inits(seed_all_worker_init, init)
        if init is not None:
            kwargs["worker_init_fn"] = init
    loader_class: Any = DataLoader
    if cell.snapshot_every_n_steps:  # checkpointable loading: torchdata's drop-in, its workers' state every n steps
        from torchdata.stateful_dataloader import StatefulDataLoader

        loader_class = StatefulDataLoader
        kwargs["snapshot_every_n_steps"] = cell.snapshot_every_n_steps
    loader = loader_class(dataset, num_workers=workers, pin_memory=pin, **batching, **kwargs)
    return loader, pin


def _chain_inits(first, second):
    if second is None:
        return first
    return functools.partial(_run_inits, first, second)


def _run_inits(first, second, worker_id: int) -> None:
    first(worker_id)
    second(worker_id)


def measure_rank(
    cell: CellConfig,
    repetition: int,
    source: DataSource,
    loop: Callable | None = None,
    machine: MachineWatch | None = None,
    group=None,
) -> tuple[dict, dict]:
    """One loader process (`source.rank`): build the dataset, DataLoader and consumer, run the loop, summarise.
    `machine` times the machine's speed right before the loop and right after its workers are gone. `group`
    (loaderbench.measure.ddp.RankGroup) makes it a DDP rank: its share of a dataset of all ranks' samples,
    read through its sampler, consumed by a model step whose gradients are all-reduced."""
    from loaderbench.measure.consumers import make_consumer
    from loaderbench.measure.loop import measured_steps, run_loop, summarize_loop
    from loaderbench.measure.observers import ObservedStep
    from loaderbench.stats.stopping import StoppingRule
    from loaderbench.study.window import plan_window
    from loaderbench.workloads import build_dataset

    plan = plan_window(cell)
    bs = cell.batch_size
    world = group.world if group is not None else 1
    samples = plan.epoch_batches * bs
    parts = build_dataset(cell, samples * world, source)
    tagged = None
    if cell.resume_at:  # every sample carries its index: the first epoch is the resume's reference
        from loaderbench.measure.resume import Untagged, tag

        parts, _ = tag(parts, cell.num_workers)
    sampler = group.sampler(parts, cell.seed * 1000 + repetition * 64) if group is not None else None
    loader, pin = _loader(cell, parts, samples, source.rank, repetition, sampler)
    if cell.resume_at:
        loader = tagged = Untagged(loader)
    consumer = group.consumer(cell) if group is not None else make_consumer(cell)
    observers = observers_for(cell, parts, plan, loader)
    observed = ObservedStep(consumer, observers) if observers else None
    stop = None
    if cell.target_precision is not None:
        if cell.max_measure_s is None or cell.min_windows is None:
            raise ValueError("adaptive measuring (target_precision) needs min_windows and max_measure_s")
        stop = StoppingRule(
            plan.warmup,
            plan.window_batches,
            plan.windows,
            cell.target_precision,
            cell.max_measure_s,
            cell.min_windows,
        )
    pin_cpu: dict[int, float] = {}

    shm_batch = _batch_bytes(cell, parts)  # read before the machine's speed is timed
    validation = None
    if cell.second_loader:  # its own sample order: the rank after this one's
        validation = _loader(cell, parts, VALIDATION_BATCHES * bs, source.rank + 1, repetition)[0]

    def on_epoch():
        _pin_thread_cpu_s(pin_cpu)
        if observed is not None:
            observed.next_epoch()
        if cell.epoch_attribute:  # what a dataset's set_epoch() would do, in the main process's copy only
            parts.dataset.epoch_mark += 1
        if validation is not None:  # a validation pass after each epoch
            for _ in zip(range(VALIDATION_BATCHES), validation):
                pass
        if cell.sharing_switch not in (None, "none"):  # the first epoch's workers have started
            import torch.multiprocessing as tmp

            tmp.set_sharing_strategy(cell.sharing_switch)
        if group is not None:
            group.next_epoch()

    _pin_thread_cpu_s(pin_cpu)
    if cell.gc_freeze:  # what Python's docs advise before fork: everything made so far is left alone
        gc.collect()
        gc.freeze()
    if machine is not None:
        machine.start()
    ru0_self = resource.getrusage(resource.RUSAGE_SELF)
    try:
        times = (loop or run_loop)(
            consumer.wrap(loader),
            cell.epochs,
            plan.epoch_batches,
            observed or consumer,
            on_epoch_end=on_epoch,
            stop=stop,
        )
    except Exception as exc:
        setattr(exc, SHM_BATCH, shm_batch)  # the runner's message names the /dev/shm that would have sufficed
        raise
    close = getattr(loader, "close", None)  # a torchdata.nodes pipeline: its workers stopped and joined
    if close is not None:
        close()
    del loader  # persistent workers shut down: their rusage lands in RUSAGE_CHILDREN below
    validation = None  # and the second loader's
    if tagged is not None:
        del tagged.loader
    ru_self = resource.getrusage(resource.RUSAGE_SELF)
    ru_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    machine_block = machine.stop() if machine is not None else None

    metrics = summarize_loop(times, plan, bs)
    if machine_block is not None:
        metrics["machine"] = machine_block
    metrics.update(consumer.metrics(measured_steps(times, plan), metrics["measured_s"]))
    metrics["cpu_s"] = {
        "main": (ru_self.ru_utime + ru_self.ru_stime) - (ru0_self.ru_utime + ru0_self.ru_stime),
        "workers": ru_children.ru_utime + ru_children.ru_stime,
        "pin_memory_thread": sum(pin_cpu.values()),
    }
    metrics["ctx_switches"] = {
        "voluntary": ru_self.ru_nvcsw + ru_children.ru_nvcsw,
        "involuntary": ru_self.ru_nivcsw + ru_children.ru_nivcsw,
    }
    metrics["pin_memory_effective"] = pin
    metrics["warmup_batches_effective"] = plan.warmup
    if shm_batch is not None:
        metrics[SHM_BATCH] = shm_batch  # lifted out of the metrics by measure_cell
    if stop is not None:
        metrics["precision"] = stop.summary()
    if observed is not None:
        metrics.update(observed.metrics())
        metrics["warnings"] = observed.warnings()  # measure_cell lifts them into the record's warnings
    if tagged is not None:  # after the measuring: its forks and kills touch no window and no CPU count above
        from loaderbench.measure.resume import measure_resume

        metrics["resume"] = measure_resume(
            cell,
            tagged.epochs[0],
            lambda: build_dataset(cell, samples, source),
            lambda p: _loader(cell, p, samples, source.rank, repetition)[0],
        )
    raw = {"t_iter": times.t_iter, "got": times.got, "done": times.done}
    return metrics, raw


def common_window(per_rank_raw: list[dict], plan, batch_size: int) -> tuple[float, float, int]:
    """(seconds, samples, epochs used) of the intervals in which every rank was measuring: per epoch, from the
    last rank's window opening to the first rank's window closing, counting each rank's batches done inside.
    Ranks' own windows do not line up in time, so summing their own-window rates would count moments when
    some ranks were still starting or already done."""
    from loaderbench.measure.loop import window_bounds

    seconds, samples, used = 0.0, 0, 0
    for e in range(min(len(r["done"]) for r in per_rank_raw)):
        bounds = [window_bounds(r["t_iter"][e], r["done"][e], plan) for r in per_rank_raw]
        start, end = max(b[0] for b in bounds), min(b[1] for b in bounds)
        if end <= start:
            continue
        seconds += end - start
        samples += batch_size * sum(
            sum(1 for b in m if start < r["done"][e][b] <= end) for r, (_, _, m) in zip(per_rank_raw, bounds)
        )
        used += 1
    return seconds, samples, used


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


def combine_ranks(cell: CellConfig, per_rank: list[dict], raws: list[dict]) -> dict:
    """One cell's metrics from its ranks' (rank 0 first), their clocks one: throughput of all ranks over the
    interval in which all were measuring; time to first batch and tail waits the worst rank's."""
    import numpy as np

    from loaderbench.study.window import plan_window

    m0 = per_rank[0]
    seconds, samples, epochs_used = common_window(raws, plan_window(cell), cell.batch_size)
    if seconds <= 0:
        raise RuntimeError(
            f"the {len(per_rank)} loader ranks were never measuring at the same time (their windows did "
            f"not overlap): lengthen measure_batches"
        )
    agg = dict(m0)
    agg["samples_per_s"] = samples / seconds
    agg["measured_samples"] = samples
    agg["measured_s"] = seconds
    span = max(r["done"][-1][-1] for r in raws) - min(r["t_iter"][0] for r in raws)
    total = sum(len(g) for r in raws for g in r["got"]) * cell.batch_size
    agg["end_to_end_samples_per_s"] = total / span if span > 0 else None
    agg["total_s"] = span
    agg["time_to_first_batch_s"] = max(m["time_to_first_batch_s"] for m in per_rank)
    agg["batch_wait_s"] = {k: float(np.max([m["batch_wait_s"][k] for m in per_rank])) for k in m0["batch_wait_s"]}
    agg["batch_wait_s"]["p50"] = float(np.median([m["batch_wait_s"]["p50"] for m in per_rank]))
    agg["ranks"] = [{k: m[k] for k in ("samples_per_s", "time_to_first_batch_s", "batch_wait_s")} for m in per_rank]
    agg["ranks_common_window"] = {"seconds": seconds, "epochs": epochs_used}
    return agg

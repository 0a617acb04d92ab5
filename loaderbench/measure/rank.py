"""Measuring one rank: build its dataset, DataLoader and consumer, run the measuring loop, summarise (`measure_rank`);
and combining ranks measured side by side into one cell's metrics (`common_window`, `combine_ranks`).

Both the cell process (loaderbench.measure.cell_process: one rank, or loader ranks side by side) and a DDP rank
(loaderbench.measure.ddp) measure through this module; it imports neither of them.
"""

from __future__ import annotations

import functools
import gc
import inspect
import resource
import sys
import time
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


def build_loader(cell: CellConfig, parts, samples: int, rank: int, repetition: int, sampler=None):
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
        # Python <= 3.13's forkserver imports nothing of the parent unless told to: it preloads what a forked
        # worker would inherit of the slow imports (torchvision where the study's cells need it,
        # loaderbench.measure.warm), and the dataset's module
        parents = [m for m in ("torch", "torchvision") if m in sys.modules]
        tmp.get_context("forkserver").set_forkserver_preload([*parents, type(dataset).__module__])
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
    read through its sampler, consumed by a model step whose gradients are all-reduced; every sample of a map-style
    dataset then carries its index, and the group keeps the indices this rank's loop received, epoch by epoch."""
    from loaderbench.measure.consumers import make_consumer
    from loaderbench.measure.loop import measured_steps, run_loop, summarize_loop
    from loaderbench.measure.observers import ObservedStep
    from loaderbench.measure.window_mark import window_ended
    from loaderbench.stats.stopping import StoppingRule
    from loaderbench.study.window import plan_window
    from loaderbench.workloads import build_dataset

    plan = plan_window(cell)
    bs = cell.batch_size
    world = group.world if group is not None else 1
    samples = plan.epoch_batches * bs
    parts = build_dataset(cell, samples * world, source)
    tagged = None
    # every sample carries its index: the first epoch is the resume's reference; a DDP rank's are its share as
    # received (the counted shares: loaderbench.measure.ddp.count_shares)
    indexed = bool(cell.resume_at) or (group is not None and not parts.iterable)
    if indexed:
        from loaderbench.measure.resume import Untagged, tag

        parts, _ = tag(parts, cell.num_workers)
    sampler = group.sampler(parts, cell.seed * 1000 + repetition * 64) if group is not None else None
    loader, pin = build_loader(cell, parts, samples, source.rank, repetition, sampler)
    if indexed:
        loader = tagged = Untagged(loader)
        if group is not None:
            group.received = tagged.epochs
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
        validation = build_loader(cell, parts, VALIDATION_BATCHES * bs, source.rank + 1, repetition)[0]

    epochs_done = 0

    def on_epoch():
        nonlocal epochs_done
        epochs_done += 1
        if epochs_done == cell.epochs:  # the runner reads PSS and USS once more with the workers alive
            window_ended()
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
    if tagged is not None and cell.resume_at:  # after the measuring: its forks and kills touch no window above
        from loaderbench.measure.resume import measure_resume

        metrics["resume"] = measure_resume(
            cell,
            tagged.epochs[0],
            lambda: build_dataset(cell, samples, source),
            lambda p: build_loader(cell, p, samples, source.rank, repetition)[0],
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

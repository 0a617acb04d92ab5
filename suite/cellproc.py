"""The body of one cell repetition's process: pin cores, set threads, start method and sharing strategy,
build the workload and its DataLoader, run the measuring loop, write the result file.

Runs in a fresh process forked from the runner (which imported torch once but never touched CUDA or
started a DataLoader), so every process-global setting starts clean.
"""

from __future__ import annotations

import json
import os
import time
import resource
import signal
import traceback
import warnings
from typing import Any


def pin_cores(cores: int) -> list[int]:
    """Use the first `cores` CPUs of those this process may use; workers inherit the mask."""
    allowed = sorted(os.sched_getaffinity(0))
    if cores > len(allowed):
        raise RuntimeError(f"cores = {cores} but only {len(allowed)} CPUs are allowed here ({allowed})")
    chosen = allowed[:cores]
    os.sched_setaffinity(0, chosen)
    return chosen


def cell_main(config: dict[str, Any], repetition: int, prepared, result_path: str) -> int:
    """Returns the process exit code. The result file holds either metrics or a classified error."""
    os.setpgid(0, 0)  # the runner kills the whole group (workers, forkserver) on timeout or interrupt
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    result: dict[str, Any]
    try:
        result = {"status": "ok", **measure_cell(config, repetition, prepared)}
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a record
        from suite.errors import classify_exception

        result = {"status": "failed", "error": classify_exception(exc, config.get("sharing_strategy")),
                  "traceback": traceback.format_exc()[-4000:]}
    with open(result_path, "w") as fh:
        json.dump(result, fh, default=str)
    return 0


def measure_cell(config: dict[str, Any], repetition: int, prepared) -> dict[str, Any]:
    cores = config["cores"]
    pin_cores(cores)
    from suite.limits import apply_cell_limits

    apply_cell_limits(config)  # ulimit_nofile, memory_limit_mb (RLIMIT_AS where the runner made no cgroup)
    os.environ["OMP_NUM_THREADS"] = str(cores)  # spawned workers read it at start-up
    import torch
    import torch.multiprocessing as tmp

    from suite.fingerprint import cell_fingerprint

    # oversubscription is what some cells measure on purpose; torch's warning about it would only be noise
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    torch.set_num_threads(cores)
    tmp.set_sharing_strategy(config["sharing_strategy"])
    ranks = config.get("ranks") or 1
    if ranks == 1:
        metrics, raw = measure_rank(config, repetition, prepared, rank=0)
    else:
        metrics, raw = measure_ranks(config, repetition, prepared, ranks)
    return {"metrics": metrics, "raw": raw, "cell_env": cell_fingerprint()}


def _warmup(config: dict[str, Any]) -> int:
    if config.get("drain_prefetch") is False:
        return config["warmup_batches"]
    # The window opens only once the prefetch pipeline (num_workers x prefetch_factor batches) has been
    # drained: those batches are made while the workers start and the first batch is awaited, and would
    # otherwise be counted as steady-state throughput (a 2x overestimate on one core, seen in test_physics).
    return max(config["warmup_batches"], config["num_workers"] * (config["prefetch_factor"] or 0))


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


def measure_rank(config: dict[str, Any], repetition: int, prepared, rank: int) -> tuple[dict, dict]:
    """One loader process: build the dataset, DataLoader and consumer, run the loop, summarise."""
    import torch
    import torch.multiprocessing as tmp
    from torch.utils.data import DataLoader

    from suite.consumers import make_consumer
    from suite.harness import run_loop, run_loop_adaptive, summarize_loop
    from suite.workloads import build_dataset

    warmup = _warmup(config)
    measure = config["measure_batches"]
    adaptive = config.get("target_precision") is not None
    batches = warmup + measure * (config["max_windows"] if adaptive else 1)
    bs = config["batch_size"]
    dataset = build_dataset(config, batches * bs, prepared)
    workers = config["num_workers"]
    generator = torch.Generator().manual_seed(config["seed"] * 1000 + repetition * 64 + rank)
    kwargs: dict[str, Any] = {}
    if workers > 0:
        ctx = tmp.get_context(config["start_method"])
        if config.get("forkserver_preload"):
            # Python <= 3.13's forkserver imports nothing of the parent unless told (FACTS.md)
            ctx.set_forkserver_preload(["torch", "torchvision", type(dataset).__module__])
        kwargs = {"multiprocessing_context": ctx, "prefetch_factor": config["prefetch_factor"],
                  "persistent_workers": config["persistent_workers"], "in_order": config["in_order"]}
        if config.get("worker_init") == "seed_all":
            from suite.workloads.rng import seed_all_worker_init

            kwargs["worker_init_fn"] = seed_all_worker_init
    pin = bool(config["pin_memory"]) and torch.cuda.is_available()
    loader = DataLoader(dataset, batch_size=bs, shuffle=True, drop_last=True, num_workers=workers,
                        pin_memory=pin, generator=generator, **kwargs)
    consumer = make_consumer(config)
    step = consumer
    draws: list[list] = []
    if config["workload"] == "rng":
        def step(batch, _consume=consumer):
            draws[-1].append(batch[0].numpy().copy())
            _consume(batch)

    pin_cpu: dict[int, float] = {}

    def on_epoch():
        _pin_thread_cpu_s(pin_cpu)
        if config["workload"] == "rng":
            draws.append([])

    on_epoch()
    ru0_self = resource.getrusage(resource.RUSAGE_SELF)
    precision = None
    if adaptive:
        times, precision = run_loop_adaptive(consumer.wrap(loader), warmup, measure, config["min_windows"],
                                             config["max_windows"], config["target_precision"],
                                             config["max_measure_s"], step)
    else:
        times = run_loop(consumer.wrap(loader), config["epochs"], batches, step, on_epoch_end=on_epoch)
    del loader  # persistent workers shut down: their rusage lands in RUSAGE_CHILDREN below
    ru_self = resource.getrusage(resource.RUSAGE_SELF)
    ru_children = resource.getrusage(resource.RUSAGE_CHILDREN)

    metrics = summarize_loop(times, warmup, bs)
    window_s = metrics["measured_s"]
    consumed = [len(g) for g in times.got]
    window = _window_slice(consumed, warmup)
    metrics.update(consumer.metrics(window, window_s))
    metrics["cpu_s"] = {"main": (ru_self.ru_utime + ru_self.ru_stime) - (ru0_self.ru_utime + ru0_self.ru_stime),
                        "workers": ru_children.ru_utime + ru_children.ru_stime, "pin_memory_thread": sum(pin_cpu.values())}
    metrics["ctx_switches"] = {"voluntary": ru_self.ru_nvcsw + ru_children.ru_nvcsw,
                               "involuntary": ru_self.ru_nivcsw + ru_children.ru_nivcsw}
    metrics["pin_memory_effective"] = pin
    metrics["warmup_batches_effective"] = warmup
    if precision is not None:
        metrics["precision"] = precision
    if config["workload"] == "rng":
        import numpy as np

        from suite.workloads.rng import duplicate_fractions

        metrics["rng_duplicates"] = duplicate_fractions([np.concatenate(e) for e in draws if e])
    raw = {"t_iter": times.t_iter, "got": times.got, "done": times.done}
    return metrics, raw


def _window_slice(consumed: list[int], warmup: int) -> slice:
    """Steps of the measured window when all epochs' steps are concatenated; for several epochs, every step
    after the first epoch's warm-up (epoch boundaries included, as a training run has them)."""
    return slice(warmup, sum(consumed))


def measure_ranks(config: dict[str, Any], repetition: int, prepared, ranks: int) -> tuple[dict, dict]:
    """R loader processes side by side (as DDP ranks on one node share its cores), started together.
    Throughput is their sum; time to first batch and tail waits are the worst rank's."""
    import numpy as np

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
                m, _ = measure_rank(config, repetition, prepared, rank)
                with os.fdopen(w, "w") as fh:
                    json.dump(m, fh, default=str)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        pipes.append(r)
        pids.append(pid)
    os.write(go_w, b"x" * (ranks - 1))
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    m0, raw0 = measure_rank(config, repetition, prepared, 0)
    per_rank = [m0]
    for r, pid in zip(pipes, pids):
        with os.fdopen(r) as fh:
            text = fh.read()
        _, status = os.waitpid(pid, 0)
        if not text:
            raise RuntimeError(f"loader rank process {pid} failed (exit status {os.waitstatus_to_exitcode(status)})")
        per_rank.append(json.loads(text))
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    ranks_main = sum(m["cpu_s"]["main"] for m in per_rank[1:])
    agg = dict(m0)
    agg["samples_per_s"] = float(sum(m["samples_per_s"] for m in per_rank))
    agg["end_to_end_samples_per_s"] = float(sum(m["end_to_end_samples_per_s"] for m in per_rank))
    agg["measured_samples"] = sum(m["measured_samples"] for m in per_rank)
    agg["time_to_first_batch_s"] = max(m["time_to_first_batch_s"] for m in per_rank)
    agg["batch_wait_s"] = {k: float(np.max([m["batch_wait_s"][k] for m in per_rank])) for k in m0["batch_wait_s"]}
    agg["batch_wait_s"]["p50"] = float(np.median([m["batch_wait_s"]["p50"] for m in per_rank]))
    agg["cpu_s"] = {"main": (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime) + ranks_main,
                    "workers": children.ru_utime + children.ru_stime - ranks_main,
                    "pin_memory_thread": sum(m["cpu_s"]["pin_memory_thread"] for m in per_rank)}
    agg["ranks"] = [{k: m[k] for k in ("samples_per_s", "time_to_first_batch_s", "batch_wait_s")} for m in per_rank]
    return agg, raw0

"""The body of one cell repetition's process: pin cores, set threads, start method and sharing strategy,
build the workload and its DataLoader, run the measuring loop, write the result file.

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
    os.environ["OMP_NUM_THREADS"] = str(cores)  # spawned workers read it at start-up
    import torch
    import torch.multiprocessing as tmp
    from torch.utils.data import DataLoader

    from suite.fingerprint import cell_fingerprint
    from suite.harness import make_step, run_loop, summarize_loop
    from suite.workloads import build_dataset

    # oversubscription is what some cells measure on purpose; torch's warning about it would only be noise
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    torch.set_num_threads(cores)
    tmp.set_sharing_strategy(config["sharing_strategy"])

    # The window opens only once the prefetch pipeline (num_workers x prefetch_factor batches) has been
    # drained: those batches are made while the workers start and the first batch is awaited, and would
    # otherwise be counted as steady-state throughput (a 2x overestimate on one core, seen in test_physics).
    warmup = max(config["warmup_batches"], config["num_workers"] * (config["prefetch_factor"] or 0))
    measure = config["measure_batches"]
    batches = warmup + measure
    bs = config["batch_size"]
    dataset = build_dataset(config, batches * bs, prepared)
    workers = config["num_workers"]
    generator = torch.Generator().manual_seed(config["seed"] * 1000 + repetition)
    kwargs: dict[str, Any] = {}
    if workers > 0:
        kwargs = {
            "multiprocessing_context": tmp.get_context(config["start_method"]),
            "prefetch_factor": config["prefetch_factor"],
            "persistent_workers": config["persistent_workers"],
            "in_order": config["in_order"],
        }
    pin = bool(config["pin_memory"]) and torch.cuda.is_available()
    loader = DataLoader(dataset, batch_size=bs, shuffle=True, drop_last=True, num_workers=workers,
                        pin_memory=pin, generator=generator, **kwargs)

    ru0_self = resource.getrusage(resource.RUSAGE_SELF)
    times = run_loop(loader, config["epochs"], batches, make_step(config["step_ms"], config["step_kind"]))
    del loader  # persistent workers shut down: their rusage lands in RUSAGE_CHILDREN below
    ru_self = resource.getrusage(resource.RUSAGE_SELF)
    ru_children = resource.getrusage(resource.RUSAGE_CHILDREN)

    metrics = summarize_loop(times, warmup, bs)
    metrics["cpu_s"] = {"main": (ru_self.ru_utime + ru_self.ru_stime) - (ru0_self.ru_utime + ru0_self.ru_stime),
                        "workers": ru_children.ru_utime + ru_children.ru_stime}
    metrics["ctx_switches"] = {"voluntary": ru_self.ru_nvcsw + ru_children.ru_nvcsw,
                               "involuntary": ru_self.ru_nivcsw + ru_children.ru_nivcsw}
    metrics["pin_memory_effective"] = pin
    metrics["warmup_batches_effective"] = warmup
    raw = {"t_iter": times.t_iter, "got": times.got, "done": times.done}
    return {"metrics": metrics, "raw": raw, "cell_env": cell_fingerprint()}

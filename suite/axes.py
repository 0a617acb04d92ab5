"""The study matrix's vocabulary: every axis a study may vary, its type, its allowed values and default.

An axis is declared once here; validation, expansion, records and figures all read this table.
"""

from __future__ import annotations

import multiprocessing
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from suite.workloads import WORKLOADS as _REGISTRY

WORKLOADS = tuple(_REGISTRY)
SHARING_STRATEGIES = ("file_descriptor", "file_system") if sys.platform.startswith("linux") else ("file_system",)
START_METHODS = tuple(multiprocessing.get_all_start_methods())
ALL_START_METHODS = ("fork", "spawn", "forkserver")
FAULTS = ("none", "raise", "segfault", "abort", "exit", "kill_self", "hang", "wait_kill", "oom")  # suite/workloads/faulty.py


@dataclass(frozen=True)
class Axis:
    name: str
    type_: Any  # a pydantic-validatable type (strict)
    default: Any
    help: str
    allowed: str  # what is allowed, in words, for error messages
    applies_to: tuple[str, ...] | None = None  # workloads this axis means something for (None: all)
    needs_workers: bool = False  # meaningless when num_workers == 0

    def validate(self, value: Any) -> Any:
        return _adapter(self.type_).validate_python(value, strict=True)


_ADAPTERS: dict[int, TypeAdapter] = {}


def _adapter(type_: Any) -> TypeAdapter:
    key = id(type_)
    if key not in _ADAPTERS:
        _ADAPTERS[key] = TypeAdapter(type_)
    return _ADAPTERS[key]


def _int(lo: int, hi: int):
    return Annotated[int, Field(ge=lo, le=hi)]


def _float(lo: float, hi: float):
    # strict floats refuse ints in pydantic; a study author writing `step_ms = 5` means 5.0
    return Annotated[float | int, Field(ge=lo, le=hi)]


def _choice(values: tuple[str, ...]):
    return Literal[values]  # type: ignore[valid-type]


AXES: dict[str, Axis] = {
    a.name: a
    for a in [
        Axis("workload", _choice(WORKLOADS), "sleep", "what each sample costs", f"one of {', '.join(WORKLOADS)}"),
        Axis("num_workers", _int(0, 1024), 0, "DataLoader worker processes (0: load in the main process)",
             "an integer from 0 to 1024"),
        Axis("cores", _int(1, 4096), 1, "CPUs the cell may use (affinity here, cpus-per-task on Slurm)",
             "an integer from 1 to the CPUs this machine allows"),
        Axis("start_method", _choice(ALL_START_METHODS), "fork", "multiprocessing start method of the workers",
             f"one of {', '.join(START_METHODS)} on this platform"),
        Axis("sharing_strategy", _choice(SHARING_STRATEGIES), "file_descriptor",
             "torch.multiprocessing sharing strategy", f"one of {', '.join(SHARING_STRATEGIES)}"),
        Axis("batch_size", _int(1, 65536), 32, "samples per batch", "an integer from 1 to 65536"),
        Axis("prefetch_factor", _int(1, 1024), 2, "batches loaded ahead per worker", "an integer from 1 to 1024",
             needs_workers=True),
        Axis("pin_memory", bool, False, "copy batches into page-locked memory (needs an accelerator)", "true or false"),
        Axis("persistent_workers", bool, False, "keep workers alive across epochs", "true or false",
             needs_workers=True),
        Axis("in_order", bool, True, "deliver batches in sampler order", "true or false", needs_workers=True),
        Axis("batched", bool, False, "fetch a batch with one __getitems__ call instead of per-sample __getitem__",
             "true or false"),
        Axis("epochs", _int(1, 10000), 1, "passes over the measured window", "an integer from 1 to 10000"),
        Axis("step_ms", _float(0, 600_000), 0.0, "simulated training step per batch, in ms",
             "a number of milliseconds from 0 to 600000"),
        Axis("step_kind", _choice(("sleep", "busy")), "sleep", "how the simulated step spends its time",
             "sleep or busy"),
        Axis("sleep_ms", _float(0, 60_000), 5.0, "blocking wait per sample, in ms",
             "a number of milliseconds from 0 to 60000", applies_to=("sleep", "tutorial")),
        Axis("cpu_work", _int(1, 1_000_000), 20, "pure-Python CPU work per sample, in thousands of loop iterations",
             "an integer from 1 to 1000000", applies_to=("cpu",)),
        Axis("decoder", _choice(("pil", "torchvision")), "pil", "JPEG decoder", "pil or torchvision",
             applies_to=("jpeg",)),
        Axis("sample_kb", _float(0.001, 1_048_576), 12.0, "size of each sample's tensor(s), in KiB",
             "a number of KiB from 0.001 to 1048576", applies_to=("sleep", "cpu")),
        Axis("tensors_per_sample", _int(1, 100_000), 1, "tensors each sample returns",
             "an integer from 1 to 100000", applies_to=("sleep", "cpu")),
        # --- the claim studies' questions (suite/studies/) ---
        Axis("jpeg_stage", _choice(("full", "decode")), "full",
             "the full pipeline, or decode only (the decode ceiling)", "full or decode", applies_to=("jpeg",)),
        Axis("forkserver_preload", bool, False, "forkserver: preload torch and the workload in the fork server",
             "true or false", needs_workers=True),
        Axis("parent_payload_mb", _float(0, 65_536), 0.0,
             "MiB of Python objects the dataset object carries (pickled to spawn/forkserver workers)",
             "a number of MiB from 0 to 65536"),
        Axis("index_backing", _choice(("none", "list_str", "numpy_bytes", "numpy_object", "arrow")), "none",
             "how the dataset holds its per-sample index (copy-on-write study)",
             "none, list_str, numpy_bytes, numpy_object or arrow"),
        Axis("index_items", _int(1, 100_000_000), 1_000_000, "entries in the per-sample index",
             "an integer from 1 to 100000000"),
        Axis("ranks", _int(1, 1024), 1, "loader processes side by side in the cell (DDP-like), each with num_workers",
             "an integer from 1 to 1024"),
        Axis("slow_worker_ms", _float(0, 60_000), 0.0, "extra wait per sample in worker 0 only (a straggler), in ms",
             "a number of milliseconds from 0 to 60000", needs_workers=True),
        Axis("worker_init", _choice(("none", "seed_all")), "none",
             "worker_init_fn: none, or seed Python's random and NumPy from torch's per-worker seed",
             "none or seed_all"),
        Axis("model", _choice(("none", "tutorial", "resnet50")), "none",
             "the consumer: a simulated step (none) or a real training step of this model",
             "none, tutorial or resnet50"),
        Axis("device", _choice(("auto", "cpu", "cuda")), "auto", "where a real model step runs (auto: cuda if present)",
             "auto, cpu or cuda"),
        Axis("non_blocking", bool, True, "host-to-device copies with non_blocking=True", "true or false"),
        Axis("prefetcher", bool, False, "copy batch N+1 on a side CUDA stream while N computes", "true or false"),
        # --- faults and limits (the fault workload is a self-test of the harness: suite/workloads/faulty.py) ---
        Axis("fault", _choice(FAULTS), "none", "fault workload: what goes wrong at sample fault_at (harness self-test)",
             f"one of {', '.join(FAULTS)}", applies_to=("fault",)),
        Axis("fault_at", _int(0, 100_000_000), 0, "fault workload: the sample index where the fault happens",
             "an integer from 0 to 100000000", applies_to=("fault",)),
        Axis("ulimit_nofile", _int(16, 1_048_576), None,
             "open-file limit (ulimit -n) of the cell and its workers; unset: inherited",
             "an integer from 16 to 1048576"),
        Axis("memory_limit_mb", _int(16, 16_777_216), None,
             "memory limit of the cell and its workers together, in MiB (a cgroup where writable, else RLIMIT_AS "
             "per process); unset: none", "an integer from 16 to 16777216"),
    ]
}


def validation_message(axis: Axis, exc: ValidationError) -> str:
    first = exc.errors()[0]
    return f"{first['msg']}; allowed: {axis.allowed}"

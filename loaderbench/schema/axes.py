"""The study matrix's vocabulary: every axis a study may vary, its type, its allowed values and default.

An axis is declared once here; validation, expansion, records and figures all read this table.
"""

from __future__ import annotations

import multiprocessing
import sys
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from loaderbench.schema.workload_catalog import WORKLOADS as _REGISTRY

WORKLOADS = tuple(_REGISTRY)
SUITE_DATASETS = tuple(name for name, w in _REGISTRY.items() if not w.users_dataset)  # not a user's own dataset
# module:callable, each a dotted Python name (loaderbench/workloads/factory.py)
FACTORY_PATTERN = r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$"
SHARING_STRATEGIES = ("file_descriptor", "file_system") if sys.platform.startswith("linux") else ("file_system",)
START_METHODS = tuple(multiprocessing.get_all_start_methods())
ALL_START_METHODS = ("fork", "spawn", "forkserver")
STORAGE_WORKLOADS = ("jpeg", "shards")
# workloads whose samples have an index (map-style; a custom dataset must be one): a resume is checked sample by
# sample
MAP_STYLE_WORKLOADS = tuple(name for name in WORKLOADS if name != "shards")
STORAGE_FAULTS = ("none", "server_stop", "server_stall", "truncated_shard")
LOADERS = ("dataloader", "nodes")
WORKER_METHODS = ("process", "thread")
URL_PATTERN = r"^http://[A-Za-z0-9.\-]+(:[0-9]{1,5})?(/[^\s]*)?$"
FAULTS = (
    "none",
    "raise",
    "segfault",
    "abort",
    "exit",
    "kill_self",
    "kill_main",
    "hang",
    "wait_kill",
    "oom",
)  # loaderbench/workloads/fault.py


@dataclass(frozen=True)
class Axis:
    name: str
    type_: Any  # a pydantic-validatable type (strict)
    default: Any
    help: str
    allowed: str  # what is allowed, in words, for error messages
    applies_to: tuple[str, ...] | None = None  # workloads this axis means something for (None: all)
    needs_workers: bool = False  # meaningless when num_workers == 0: None in such cells (WORKER_ONLY_AXES)
    only_when: tuple[tuple[str, tuple], ...] = ()  # meaningful only while each named axis takes one of its values
    unless: tuple[tuple[str, tuple], ...] = ()  # meaningless while a named axis takes one of its values
    blank: Any = None  # what a cell holds for this axis where it means nothing

    def means_nothing(self, cell: dict[str, Any]) -> bool:
        """Whether this axis means nothing for the cell (its other axes' values as they are)."""
        return (
            (self.applies_to is not None and cell["workload"] not in self.applies_to)
            or (self.needs_workers and cell["num_workers"] == 0)
            or any(cell.get(other) not in values for other, values in self.only_when)
            or any(cell.get(other) in values for other, values in self.unless)
        )

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
    return Literal[values]  # a Literal of values known only at run time: pydantic reads it


_ROW = "axis"  # the metadata key of an axis row on an AxisValues field


def axis(
    type_: Any,
    default: Any,
    help: str,
    allowed: str,
    *,
    applies_to: tuple[str, ...] | None = None,
    needs_workers: bool = False,
    only_when: dict[str, tuple] | None = None,
    unless: dict[str, tuple] | None = None,
    blank: Any = None,
) -> Any:
    """One row of the axis table: an AxisValues field whose default is the axis default, with what validates a
    study's values (`type_`, strict pydantic), its help and what is allowed, in words; and when it means nothing
    (the cell then holds `blank`): for workloads other than `applies_to`, without workers (`needs_workers`), while
    another axis takes other values than `only_when` names, or one of those `unless` names."""
    row = {
        "type_": type_,
        "help": help,
        "allowed": allowed,
        "applies_to": applies_to,
        "needs_workers": needs_workers,
        "only_when": tuple((only_when or {}).items()),
        "unless": tuple((unless or {}).items()),
        "blank": blank,
    }
    return field(default=default, metadata={_ROW: row})


@dataclass(frozen=True, kw_only=True)
class AxisValues:
    """The axis table: one attribute per axis, in the order studies, records and `loaderbench axes` list them.

    A field's annotation is what a cell holds for that axis (None: the axis means nothing for the cell, see
    loaderbench.study.study_file.normalize); its `axis(...)` row gives the default and how study values are
    validated. `AXES` below is this table by name; loaderbench.schema.cell.CellConfig is a cell's values, typed.
    """

    workload: str = axis(_choice(WORKLOADS), "sleep", "what each sample costs", f"one of {', '.join(WORKLOADS)}")
    num_workers: int = axis(
        _int(0, 1024), 0, "DataLoader worker processes (0: load in the main process)", "an integer from 0 to 1024"
    )
    cores: int = axis(
        _int(1, 4096),
        1,
        "CPUs the cell may use (affinity here, cpus-per-task on Slurm)",
        "an integer from 1 to the CPUs this machine allows",
    )
    start_method: str | None = axis(
        _choice(ALL_START_METHODS),
        "fork",
        "multiprocessing start method of the workers",
        f"one of {', '.join(START_METHODS)} on this platform",
        needs_workers=True,
        unless={"worker_method": ("thread",)},
    )
    sharing_strategy: str | None = axis(
        _choice(SHARING_STRATEGIES),
        "file_descriptor",
        "torch.multiprocessing sharing strategy",
        f"one of {', '.join(SHARING_STRATEGIES)}",
        needs_workers=True,
        unless={"worker_method": ("thread",)},
    )
    batch_size: int = axis(_int(1, 65536), 32, "samples per batch", "an integer from 1 to 65536")
    prefetch_factor: int | None = axis(
        _int(1, 1024), 2, "batches loaded ahead per worker", "an integer from 1 to 1024", needs_workers=True
    )
    pin_memory: bool = axis(bool, False, "copy batches into page-locked memory (needs an accelerator)", "true or false")
    persistent_workers: bool | None = axis(
        bool,
        False,
        "keep workers alive across epochs",
        "true or false",
        needs_workers=True,
        unless={"loader": ("nodes",)},
    )
    in_order: bool | None = axis(bool, True, "deliver batches in sampler order", "true or false", needs_workers=True)
    batched: bool | None = axis(
        bool,
        False,
        "fetch a batch with one __getitems__ call instead of per-sample __getitem__",
        "true or false",
        applies_to=SUITE_DATASETS,
    )
    epochs: int = axis(_int(1, 10000), 1, "passes over the measured window", "an integer from 1 to 10000")
    step_ms: float = axis(
        _float(0, 600_000),
        0.0,
        "simulated training step per batch, in ms",
        "a number of milliseconds from 0 to 600000",
        unless={"device": ("cpu",)},
        blank=0.0,
    )
    step_kind: str | None = axis(
        _choice(("sleep", "busy")),
        "sleep",
        "how the simulated step spends its time",
        "sleep or busy",
        unless={"step_ms": (0.0,)},
    )
    sleep_ms: float | None = axis(
        _float(0, 60_000),
        5.0,
        "blocking wait per sample, in ms",
        "a number of milliseconds from 0 to 60000",
        applies_to=("sleep", "tutorial"),
    )
    cpu_work: int | None = axis(
        _int(1, 1_000_000),
        20,
        "pure-Python CPU work per sample, in thousands of loop iterations",
        "an integer from 1 to 1000000",
        applies_to=("cpu",),
    )
    decoder: str | None = axis(
        _choice(("pil", "torchvision", "nvjpeg")),
        "pil",
        "JPEG decoder: PIL or torchvision (libjpeg-turbo) on the CPU, or nvjpeg on the GPU (torchvision.io.decode_jpeg "
        "with device cuda) in whichever process loads the sample, whose batches are then already on the GPU",
        "pil, torchvision or nvjpeg",
        applies_to=("jpeg", "shards"),
    )
    sample_kb: float | None = axis(
        _float(0.001, 1_048_576),
        12.0,
        "size of each sample's tensor(s), in KiB",
        "a number of KiB from 0.001 to 1048576",
        applies_to=("sleep", "cpu", "zlib"),
    )
    tensors_per_sample: int | None = axis(
        _int(1, 100_000),
        1,
        "tensors each sample returns",
        "an integer from 1 to 100000",
        applies_to=("sleep", "cpu", "zlib"),
    )
    work_us: float | None = axis(
        _float(0, 10_000_000),
        0.0,
        "CPU work per sample, in microseconds of the loading thread's CPU time",
        "a number of microseconds from 0 to 10000000",
        applies_to=("inmem",),
    )
    sample_bytes: int | None = axis(
        _int(1, 1 << 30),
        16,
        "size of each in-memory sample, in bytes (a few bytes of labels up to image-sized tensors)",
        "an integer from 1 to 1073741824",
        applies_to=("inmem",),
    )
    factory: str | None = axis(
        Annotated[str, Field(pattern=FACTORY_PATTERN)],
        None,
        "the callable that makes your dataset, from its module (the study file's folder first, then sys.path)",
        'module:callable, e.g. "my_pipeline:make_dataset"',
        applies_to=("custom",),
    )
    # --- the claim studies' questions (loaderbench/studies/) ---
    jpeg_stage: str | None = axis(
        _choice(("full", "decode", "read")),
        "full",
        "the full pipeline, decode only (the decode ceiling), or read only (the I/O ceiling: nothing decoded)",
        "full, decode or read",
        applies_to=("jpeg", "shards"),
    )
    forkserver_preload: bool | None = axis(
        bool,
        False,
        "forkserver: preload torch and the workload in the fork server",
        "true or false",
        needs_workers=True,
        only_when={"start_method": ("forkserver",)},
    )
    parent_payload_mb: float | None = axis(
        _float(0, 65_536),
        0.0,
        "MiB of Python objects the dataset object carries (pickled to spawn/forkserver workers)",
        "a number of MiB from 0 to 65536",
        applies_to=SUITE_DATASETS,
    )
    index_backing: str | None = axis(
        _choice(("none", "list_str", "numpy_bytes", "numpy_object", "arrow", "decoded", "decoded_objects")),
        "none",
        "how the dataset holds its per-sample index (copy-on-write study): file names (list_str, NumPy, Arrow), or "
        "decoded images held in memory, an eager dataset (decoded: a list of 3 x 224 x 224 uint8 arrays; "
        "decoded_objects: each image as a list of its 672 pixel rows, Python bytes objects)",
        "none, list_str, numpy_bytes, numpy_object, arrow, decoded or decoded_objects",
        applies_to=SUITE_DATASETS,
    )
    index_items: int | None = axis(
        _int(1, 100_000_000),
        1_000_000,
        "entries in the per-sample index",
        "an integer from 1 to 100000000",
        applies_to=SUITE_DATASETS,
        unless={"index_backing": ("none",)},
    )
    gc_freeze: bool | None = axis(
        bool,
        False,
        "gc.freeze() in the main process before the workers start, so a full GC "
        "pass in a forked worker leaves the objects it inherited (and their pages) alone",
        "true or false",
        needs_workers=True,
        unless={"worker_method": ("thread",)},
    )
    ranks: int = axis(
        _int(1, 1024),
        1,
        "loader processes (ranks) in the cell, each with num_workers: side by side or DDP ranks (rank_mode)",
        "an integer from 1 to 1024",
    )
    epoch_attribute: bool | None = axis(
        bool,
        False,
        "the main process sets an attribute of the dataset to the epoch number at every epoch's end; each sample "
        "carries the value its worker saw",
        "true or false",
        applies_to=("sleep", "cpu"),
        needs_workers=True,
    )
    second_loader: bool | None = axis(
        bool,
        False,
        "a second (validation) loader over the same dataset and settings, reading a few batches after every epoch",
        "true or false",
        needs_workers=True,
    )
    slow_worker_ms: float | None = axis(
        _float(0, 60_000),
        0.0,
        "extra wait per sample in worker 0 only (a straggler), in ms; with slow_every, on every slow_every-th "
        "sample in any worker instead",
        "a number of milliseconds from 0 to 60000",
        applies_to=SUITE_DATASETS,
        needs_workers=True,
    )
    slow_every: int | None = axis(
        _int(0, 1_000_000),
        0,
        "0: the straggler is worker 0, slow on every sample; N > 0: occasional stragglers, every N-th sample (by "
        "index) waits slow_worker_ms more, whichever worker loads it",
        "an integer from 0 to 1000000",
        applies_to=SUITE_DATASETS,
        needs_workers=True,
    )
    worker_init: str = axis(
        _choice(("none", "seed_all")),
        "none",
        "worker_init_fn: none, or seed Python's random and NumPy from torch's per-worker seed",
        "none or seed_all",
    )
    model: str = axis(
        _choice(("none", "tutorial", "resnet50")),
        "none",
        "the consumer: a simulated step (none) or a real training step of this model",
        "none, tutorial or resnet50",
    )
    device: str | None = axis(
        _choice(("auto", "cpu", "cuda")),
        "auto",
        "where a real model step runs (auto: cuda if present)",
        "auto, cpu or cuda",
        unless={"model": ("none",)},
    )
    non_blocking: bool | None = axis(
        bool, True, "host-to-device copies with non_blocking=True", "true or false", unless={"model": ("none",)}
    )
    prefetcher: bool | None = axis(
        bool,
        False,
        "copy batch N+1 on a side CUDA stream while N computes",
        "true or false",
        unless={"model": ("none",)},
    )
    # --- faults and limits (the fault workload is a self-test of the harness: loaderbench/workloads/fault.py) ---
    fault: str | None = axis(
        _choice(FAULTS),
        "none",
        "fault workload: what goes wrong at sample fault_at (harness self-test)",
        f"one of {', '.join(FAULTS)}",
        applies_to=("fault",),
    )
    fault_at: int | None = axis(
        _int(0, 100_000_000),
        0,
        "fault workload: the sample index where the fault happens",
        "an integer from 0 to 100000000",
        applies_to=("fault",),
    )
    ulimit_nofile: int | None = axis(
        _int(16, 1_048_576),
        None,
        "open-file limit (ulimit -n) of the cell and its workers; unset: inherited",
        "an integer from 16 to 1048576",
    )
    memory_limit_mb: int | None = axis(
        _int(16, 16_777_216),
        None,
        "memory limit of the cell and its workers together, in MiB (a cgroup where writable, else RLIMIT_AS "
        "per process); unset: none",
        "an integer from 16 to 16777216",
    )
    sharing_switch: str | None = axis(
        _choice(("none", *SHARING_STRATEGIES)),
        "none",
        "torch.multiprocessing.set_sharing_strategy(this) in the main process after the first epoch, its workers "
        "started (none: never); the strategy later batches arrive by is observed",
        f"none, {', '.join(SHARING_STRATEGIES)}",
        needs_workers=True,
    )
    shm_size_mb: int | None = axis(
        _int(1, 1_048_576),
        None,
        "size of the cell's own /dev/shm in MiB (a tmpfs in a private mount namespace, as docker --shm-size "
        "gives; needs root); unset: the machine's",
        "an integer from 1 to 1048576",
    )
    # --- remote data (loaderbench/storage/): where the JPEGs come from, and the network path to them ---
    storage: str | None = axis(
        _choice(("local", "http")),
        "local",
        "where the dataset is read: the local disk, or an HTTP server (nginx, started for the cell)",
        "local or http",
        applies_to=STORAGE_WORKLOADS,
    )
    storage_url: str | None = axis(
        Annotated[str, Field(pattern=URL_PATTERN)],
        None,
        "storage = http: your own server, serving the [dataset] folder's files (or the shard set) at these "
        "paths; unset: the suite starts nginx",
        "an http:// URL",
        applies_to=STORAGE_WORKLOADS,
        only_when={"storage": ("http",)},
    )
    latency_ms: float | None = axis(
        _float(0, 60_000),
        0.0,
        "round-trip time added to the network path, in ms",
        "a number of milliseconds from 0 to 60000",
        applies_to=STORAGE_WORKLOADS,
        only_when={"storage": ("http",)},
    )
    jitter_ms: float | None = axis(
        _float(0, 60_000),
        0.0,
        "uniform jitter on the added delay, in ms",
        "a number of milliseconds from 0 to 60000",
        applies_to=STORAGE_WORKLOADS,
        only_when={"storage": ("http",)},
    )
    bandwidth_mbit: float | None = axis(
        _float(0, 1_000_000),
        0.0,
        "bandwidth cap of the path, in Mbit/s (0: none)",
        "a number of Mbit/s from 0 to 1000000",
        applies_to=STORAGE_WORKLOADS,
        only_when={"storage": ("http",)},
    )
    shaping: str | None = axis(
        _choice(("auto", "kernel", "proxy")),
        "auto",
        "what applies latency and bandwidth: kernel qdiscs (netem/tbf) in private network namespaces, the "
        "suite's delaying proxy, or auto (kernel where the machine allows, else the proxy)",
        "auto, kernel or proxy",
        applies_to=STORAGE_WORKLOADS,
        only_when={"storage": ("http",)},
    )
    http_client: str | None = axis(
        _choice(("pooled", "per_request")),
        "pooled",
        "a kept-alive connection per loader process, or a new connection per request",
        "pooled or per_request",
        applies_to=STORAGE_WORKLOADS,
        only_when={"storage": ("http",)},
    )
    http_timeout_s: float | None = axis(
        _float(0.1, 3600),
        30.0,
        "seconds a request may wait for an answer",
        "a number of seconds from 0.1 to 3600",
        applies_to=STORAGE_WORKLOADS,
        only_when={"storage": ("http",)},
    )
    storage_fault: str | None = axis(
        _choice(STORAGE_FAULTS),
        "none",
        "a storage fault: the server is killed or stalls after storage_fault_at requests, or a shard is truncated",
        f"one of {', '.join(STORAGE_FAULTS)}",
        applies_to=STORAGE_WORKLOADS,
    )
    storage_fault_at: int | None = axis(
        _int(0, 100_000_000),
        0,
        "requests served before the server fault happens",
        "an integer from 0 to 100000000",
        applies_to=STORAGE_WORKLOADS,
        unless={"storage_fault": (None, "none")},
    )
    sharding: str | None = axis(
        _choice(("split", "none")),
        "split",
        "which shards a loader process reads: split across ranks and workers, or none (every worker reads "
        "every shard: duplicates)",
        "split or none",
        applies_to=("shards",),
    )
    shards: int | None = axis(
        _int(1, 1_000_000),
        16,
        "tar shards the dataset is written as",
        "an integer from 1 to 1000000",
        applies_to=("shards",),
    )
    shard_samples: int | None = axis(
        _int(1, 1_000_000),
        8,
        "samples per shard (a pass over the shards reads shards x shard_samples)",
        "an integer from 1 to 1000000",
        applies_to=("shards",),
    )
    # --- threads or processes (loaderbench/measure/nodes_loader.py, loaderbench/study/loader_rules.py) ---
    loader: str = axis(
        _choice(LOADERS),
        "dataloader",
        "the loader: torch.utils.data.DataLoader, or a torchdata.nodes pipeline (sampler, ParallelMapper, "
        "prefetch, Loader) whose workers are threads or processes",
        "dataloader or nodes",
    )
    worker_method: str | None = axis(
        _choice(WORKER_METHODS),
        "process",
        "what a worker is: a process (its own interpreter and GIL) or a thread of the main process (one GIL)",
        "process or thread (thread with loader = dataloader only where the installed torch offers it)",
        needs_workers=True,
    )
    zlib_kb: float | None = axis(
        _float(1, 1_048_576),
        64.0,
        "zlib workload: KiB compressed per sample (zlib releases the GIL while it compresses)",
        "a number of KiB from 1 to 1048576",
        applies_to=("zlib",),
    )
    # --- checkpointable loading (torchdata's StatefulDataLoader): what snapshots cost, what a resume replays ---
    snapshot_every_n_steps: int = axis(
        _int(0, 1_000_000),
        0,
        "0: the plain DataLoader; n >= 1: torchdata's StatefulDataLoader, its workers' state taken every n steps",
        "an integer from 0 to 1000000",
    )
    resume_at: int | None = axis(
        _int(0, 100_000_000),
        0,
        "the step of the first epoch at which the loader's state is saved, its process SIGKILLed and a fresh "
        "process resumes the epoch from that state (0: no interruption; needs snapshot_every_n_steps >= 1)",
        "an integer from 0 to 100000000",
        applies_to=MAP_STYLE_WORKLOADS,
    )
    # --- real DDP ranks (loaderbench/measure/ddp.py) ---
    rank_mode: str = axis(
        _choice(("side_by_side", "ddp")),
        "side_by_side",
        "how the cell's ranks run: loaders side by side, or real DDP ranks (a torch.distributed process group, "
        "DistributedSampler, a small model step and its gradient all-reduce)",
        "side_by_side or ddp",
    )


AXES: dict[str, Axis] = {f.name: Axis(f.name, default=f.default, **f.metadata[_ROW]) for f in fields(AxisValues)}

#: Axes that mean nothing without worker processes: a num_workers = 0 cell holds None for each (normalize), so
#: one such cell serves every value of them. `worker_init` is not one of them, so a study may measure its
#: num_workers = 0 cells under each worker_init_fn as controls.
WORKER_ONLY_AXES = tuple(name for name, a in AXES.items() if a.needs_workers)

#: Axes meaningful only with storage = "http" (normalize sets them to None otherwise).
HTTP_ONLY = tuple(name for name, a in AXES.items() if ("storage", ("http",)) in a.only_when)


def validation_message(axis: Axis, exc: ValidationError) -> str:
    first = exc.errors()[0]
    msg = "not of the allowed form" if first["type"] == "string_pattern_mismatch" else first["msg"]
    return f"{msg}; allowed: {axis.allowed}"

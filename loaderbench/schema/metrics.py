"""Every metric a record's `metrics` may carry, declared once: what the measuring side writes (the loop, the
consumer, the cell process, the observers, the storage session, the runner's probe), in nested TypedDicts. A
metric marked `Column` is a column of the analysis's tidy table (loaderbench.schema.record_row), so the table can
name no metric that is not declared here. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, TypedDict


@dataclass(frozen=True)
class Column:
    """Marks a metric as a column of the analysis's tidy table: `name` (default: the metric's key); `{}` in it
    stands for the key of the block that holds the metric (the rng workload's per-generator blocks)."""

    name: str | None = None


COLUMN = Column()  # a column named as its metric


class BatchWait(TypedDict):
    p50: Annotated[float, Column("batch_wait_p50_s")]
    p95: Annotated[float, Column("batch_wait_p95_s")]
    p99: Annotated[float, Column("batch_wait_p99_s")]
    max: Annotated[float, Column("batch_wait_max_s")]
    mean: Annotated[float, Column("batch_wait_mean_s")]


class Window(TypedDict):
    mode: str  # "steady" | "epoch"
    warmup_batches: int
    measure_batches: int
    tail_batches: int
    epoch_batches: int
    window_batches: int
    max_windows: int


class CpuSeconds(TypedDict):
    main: Annotated[float, Column("cpu_main_s")]  # the loader process(es): the loop, collation of num_workers = 0
    workers: Annotated[float, Column("cpu_workers_s")]  # every worker process (and their children)
    pin_memory_thread: Annotated[float, Column("cpu_pin_thread_s")]


class CtxSwitches(TypedDict):
    voluntary: Annotated[int, Column("ctx_voluntary")]
    involuntary: Annotated[int, Column("ctx_involuntary")]


class Precision(TypedDict, total=False):
    """The adaptive rule's summary (loaderbench.stats.stopping.StoppingRule.summary)."""

    precision_target: float
    confidence: float
    precision_reached: Annotated[bool, COLUMN]
    precision_half_width: Annotated[float | None, COLUMN]
    windows: Annotated[int, COLUMN]
    base_window_batches: int
    window_batches: int
    independent_windows: int | None
    lag1_autocorrelation: float | None
    looks: int


class RngRepeats(TypedDict):
    within_epoch: Annotated[float, Column("rng_dup_{}_within")]  # share of an epoch's draws equal to another
    across_epochs: Annotated[float | None, Column("rng_dup_{}_across")]  # share drawn in the epoch before


class RngDuplicates(TypedDict):
    python: RngRepeats
    numpy: RngRepeats
    torch: RngRepeats


class RankSummary(TypedDict):
    samples_per_s: float | None
    time_to_first_batch_s: float
    batch_wait_s: BatchWait


class RanksCommonWindow(TypedDict):
    seconds: float
    epochs: int


class StoragePath(TypedDict, total=False):
    """How the cell's network path was built (loaderbench.storage.host_tools.PathPlan)."""

    server: str
    netns: bool
    latency: Annotated[str, Column("storage_latency_via")]  # netem, proxy or none
    bandwidth: Annotated[str, Column("storage_bandwidth_via")]  # tbf, proxy or none
    latency_ms: float
    jitter_ms: float
    bandwidth_mbit: float


class StorageUse(TypedDict, total=False):
    """storage = "http": the mechanisms in force, the server, requests, bytes (loaderbench.measure.storage_session)."""

    kind: str
    url: str
    client: str
    path: StoragePath
    server: dict[str, Any]  # kind, nginx, pids, cpus, left_running
    netns: dict[str, Any] | None
    qdiscs: list[dict[str, Any]]
    fault: Any
    requests: Annotated[int, Column("storage_requests")]
    bytes: int
    connections: Annotated[int, Column("storage_connections")]
    samples: int
    bytes_per_sample: Annotated[float | None, Column("storage_bytes_per_sample")]
    payload_mbit_per_s: Annotated[float | None, Column("storage_payload_mbit_per_s")]


class ShardPasses(TypedDict, total=False):
    """The shards workload: every pass over the shards, counted (loaderbench.storage.exactly_once)."""

    sharding: str
    expected_per_pass: Annotated[int, Column("shard_expected_per_pass")]
    readers: int
    passes_complete: Annotated[int, Column("shard_passes_complete")]
    seen: Annotated[int, Column("shard_seen")]
    duplicates: Annotated[int, Column("shard_duplicates")]
    missing: Annotated[int | None, Column("shard_missing")]
    unexpected: int
    epochs: list[list[dict[str, Any]]]


class MemoryBytes(TypedDict):
    """Peaks of the sums over the cell's process tree."""

    rss_peak: Annotated[int, Column("rss_peak_bytes")]
    pss_peak: Annotated[int, Column("pss_peak_bytes")]
    uss_peak: Annotated[int, Column("uss_peak_bytes")]
    main_uss_peak: Annotated[int, Column("main_uss_peak_bytes")]
    workers_uss_peak: Annotated[int, Column("workers_uss_peak_bytes")]


class ProbeCost(TypedDict, total=False):
    """The runner's probe of the cell's process tree: its own work, beside the cell's."""

    samples: int
    memory_samples: int
    memory_samples_at_window_end: int  # of them, the walk when the cell's last window ended (workers alive)
    cost_s: float  # wall seconds inside the samples
    cpu_s: float  # CPU seconds the probe's thread spent sampling
    cpu_share: Annotated[float, Column("probe_cpu_share")]  # cpu_s over the seconds it sampled: a share of one CPU
    workers_cpu_s_sampled: float
    # the CPUs the probe sampled from: none of the cell's where the machine had others ([]: it shared the cell's)
    off_cell_cpus: Annotated[list[int], Column("probe_off_cell_cpus")]


class ReferenceRun(TypedDict):
    """One run of the fixed reference workload on the cell's cores (loaderbench.measure.machine_speed)."""

    python_per_s: float  # reference units per second of the fixed pure-Python loop, mean over the cores timed
    jpeg_per_s: float  # decodes per second of the fixed JPEG, mean over the cores timed
    python_per_core: list[float]
    jpeg_per_core: list[float]
    cpus: list[int]  # the cores timed, in order
    seconds: float  # what this run cost


class MachineSpeed(TypedDict, total=False):
    """The machine's speed beside the measured window (loaderbench.measure.machine_speed) and, when a local run
    judged it, whether the repetition was disturbed (loaderbench.schema.disturbance)."""

    before: ReferenceRun  # right before the window
    after: ReferenceRun  # right after it, once the workers are gone
    python_per_s: Annotated[float, Column("ref_python_per_s")]  # mean of before and after
    jpeg_per_s: Annotated[float, Column("ref_jpeg_per_s")]
    python_change: Annotated[float, Column("ref_python_change")]  # after / before - 1
    jpeg_change: Annotated[float, Column("ref_jpeg_change")]
    window_s: float  # the span the kernel's counts cover
    cell_cpu_s: float  # CPU time of the cell's process tree in it, adopted_cpu_s included
    adopted_cpu_s: float  # of which the programs the cell started that left its tree (a daemonised torch_shm_manager)
    steal_fraction: Annotated[float | None, COLUMN]  # of the cell's cores' time; None without /proc/stat
    others_cpu_s: float | None  # CPU time of other processes on the cell's cores
    others_share: Annotated[float | None, COLUMN]  # others_cpu_s over window_s x cores
    cpu_mhz_before: list[float] | None  # None where cpufreq is not exposed
    cpu_mhz_after: list[float] | None
    cpu_mhz: Annotated[float | None, COLUMN]
    cost_s: Annotated[float, Column("reference_cost_s")]  # both reference runs together
    study_python_per_s: float | None  # the study's median reference when the repetition was judged
    margins: dict[str, float]  # the margins it was judged by
    disturbed: Annotated[bool, COLUMN]
    disturbed_reasons: list[str]


class PrivateShmUse(TypedDict):
    """A cell with its own /dev/shm (`shm_size_mb`; loaderbench.measure.private_shm): its size, the size this
    setting needs computed from one measured batch, and what the cell's processes left in it, counted before it
    was removed."""

    size_bytes: Annotated[int, Column("shm_size_bytes")]
    batch_bytes: Annotated[int | None, Column("shm_batch_bytes")]  # one batch's tensors, measured in the cell
    in_flight_batches: Annotated[int, Column("shm_in_flight_batches")]  # prefetch_factor per worker, the main's 2
    needed_bytes: Annotated[int | None, Column("shm_needed_bytes")]  # batch_bytes x in flight, 25% margin, MiB up
    left_segments: Annotated[int, Column("shm_left_segments")]  # entries left once the cell's processes ended
    left_bytes: Annotated[int, Column("shm_left_bytes")]


class DeliveryOrderSeen(TypedDict):
    """The order batches arrived in against the sampler's (loaderbench.measure.observers.DeliveryOrder): the sleep
    and cpu workloads with workers."""

    batches: int
    out_of_order: Annotated[int, Column("order_out_of_order")]  # batches delivered away from their sampled place
    fingerprint: Annotated[str, Column("order_fingerprint")]  # of the delivery permutation: equal = same order


class EpochAttribute(TypedDict):
    """`epoch_attribute`: samples of the epochs after the first, and those that carried an epoch count older than
    the main process's (their worker's copy of the dataset missed the change)."""

    samples: Annotated[int, Column("epoch_attr_samples")]
    stale: Annotated[int, Column("epoch_attr_stale")]


class Resume(TypedDict):
    """resume_at > 0: the loader's state saved at that step, its process SIGKILLed, a fresh process resumed from
    the state to the end of the epoch (loaderbench.measure.resume)."""

    at_step: int
    epoch_batches: int
    killed_by: str
    state_bytes: Annotated[int, Column("resume_state_bytes")]  # the saved state file
    snapshot_step: int | None  # the snapshot the state holds (the step itself with num_workers = 0)
    steps_since_snapshot: Annotated[int | None, Column("resume_steps_since_snapshot")]  # torchdata's own count
    replayed_samples: Annotated[int, Column("resume_replayed_samples")]  # loaded again only to fast-forward
    replayed_batches: Annotated[float, Column("resume_replayed_batches")]
    state_load_s: float  # from the restart until the state was read and loaded
    restart_to_first_batch_s: Annotated[float | None, Column("resume_first_batch_s")]  # from the restart
    expected_samples: int  # the uninterrupted epoch's
    delivered_before: int  # before the checkpoint
    delivered_after: int  # after the resume
    lost: Annotated[int, Column("resume_lost")]
    duplicated: Annotated[int, Column("resume_duplicated")]
    exactly_once: Annotated[bool, Column("resume_exactly_once")]
    same_order: Annotated[bool, Column("resume_same_order")]
    first_divergence: int | None


class DdpRank(TypedDict):
    """One DDP rank (loaderbench.measure.ddp): where it ran and what its steps cost."""

    rank: int
    host: str
    step_s: float  # median step: forward, backward, gradient all-reduce, optimizer
    allreduce_s: float  # median all-reduce of the gradients alone
    grad_local: float  # checksum of this rank's own gradients at the last step, before the all-reduce
    grad_reduced: float  # and after it: equal on every rank when the all-reduce happened
    params: float  # checksum of the model's parameters after the last step


class DdpSummary(TypedDict):
    """Real DDP ranks: the process group, the step, and every rank's share of each epoch, counted."""

    backend: Annotated[str, Column("ddp_backend")]
    world_size: Annotated[int, Column("ddp_world_size")]
    nodes: Annotated[int, Column("ddp_nodes")]  # distinct hosts the ranks ran on
    step_s: Annotated[float, Column("ddp_step_s")]  # median over ranks of each rank's median step
    allreduce_s: Annotated[float, Column("ddp_allreduce_s")]
    epoch_samples: Annotated[int, Column("ddp_epoch_samples")]  # one epoch of the dataset, all shares together
    epochs_counted: Annotated[int, Column("ddp_epochs_counted")]  # epochs in which every rank's loop received samples
    share_reads: Annotated[int, Column("ddp_share_reads")]  # samples the ranks' loops received, those epochs
    share_overlap: Annotated[int, Column("ddp_share_overlap")]  # reads of an index another rank also read
    share_missing: Annotated[int, Column("ddp_share_missing")]  # indices of those epochs no rank read
    grads_equal: Annotated[bool, Column("ddp_grads_equal")]  # every rank held the same gradients after all-reduce
    ranks: list[DdpRank]


class Metrics(TypedDict, total=False):
    """Every key a record's metrics may carry. Failed and timed-out records carry only the probe's keys."""

    # the measuring loop (loaderbench.measure.loop.summarize_loop)
    samples_per_s: Annotated[float | None, COLUMN]  # steady state: samples / seconds of the measured windows
    measured_samples: int
    measured_s: Annotated[float, COLUMN]
    end_to_end_samples_per_s: Annotated[float | None, COLUMN]  # every batch of every epoch, start-up included
    total_s: Annotated[float, COLUMN]
    time_to_first_batch_s: Annotated[float, COLUMN]
    batch_wait_s: BatchWait  # the loop's wait for each measured batch
    data_stall_fraction: Annotated[float | None, COLUMN]  # waiting time over window time
    epoch_s: Annotated[list[float], COLUMN]
    epoch_gap_s: Annotated[float | None, COLUMN]  # mean gap between an epoch's last batch and the next's first
    epoch_gaps_s: Annotated[list[float], COLUMN]
    window: Window
    # the consumer (loaderbench.measure.consumers): a simulated step, or a model on the CPU or a GPU
    consumer: Annotated[str, COLUMN]  # "simulated" (or why it stands in for a model) | "cpu" | "gpu"
    accelerator_busy_fraction: Annotated[float | None, COLUMN]
    compute_s: Annotated[float, COLUMN]
    model: str  # a real model step: its name
    device: Annotated[str, Column("consumer_device")]  # and where it ran
    h2d_s: float  # GPU only: host-to-device copies, their time and bytes,
    h2d_bytes: int
    h2d_gbps: Annotated[float | None, COLUMN]  # their bandwidth
    h2d_overlap_fraction: Annotated[float | None, COLUMN]  # and the share of copy time that overlapped compute
    # the host's time inside the copy calls over the copies' time on the device: about 1 for a blocking copy,
    # near 0 when the host goes on while the copy is in flight
    h2d_host_blocked_fraction: Annotated[float | None, COLUMN]
    gpu_name: str
    # the cell process (loaderbench.measure.cell_process)
    cpu_s: CpuSeconds
    ctx_switches: CtxSwitches  # of main and workers
    pin_memory_effective: Annotated[bool, COLUMN]
    warmup_batches_effective: int
    precision: Precision  # adaptive measuring only
    ranks: list[RankSummary]  # ranks > 1: each rank's rate, first batch and waits
    ranks_common_window: RanksCommonWindow  # and the window all ranks shared
    ddp: DdpSummary  # rank_mode = "ddp": the process group, the step, the shares
    # observers (loaderbench.measure.observers, loaderbench.storage.exactly_once)
    rng_duplicates: RngDuplicates  # the rng workload: draws that repeat, per generator
    duplicate_samples: int | None  # iterable datasets: tail samples seen before in their epoch
    duplicate_checked_samples: int  # tail samples fingerprinted (0: no tail, e.g. window = "epoch")
    shard_passes: ShardPasses  # the shards workload
    order: DeliveryOrderSeen  # the sleep and cpu workloads with workers
    # sharing_switch: per epoch, the strategy its first batch arrived by (file_descriptor | file_system | not shared)
    sharing_seen: Annotated[list[str], COLUMN]
    epoch_attribute: EpochAttribute  # epoch_attribute = true
    storage: StorageUse  # storage = "http"
    resume: Resume  # resume_at > 0: what a resume after a kill replayed and delivered
    # the machine's speed beside the window (loaderbench.measure.machine_speed)
    machine: MachineSpeed
    # the runner's probe of the process tree (loaderbench.measure.probes)
    memory_bytes: MemoryBytes
    memory_timeline: Annotated[list[list[float]], COLUMN]  # [t_s, procs, main_pss, workers_pss, main_uss, workers_uss]
    shm_peak_bytes: Annotated[int, COLUMN]
    open_fds_peak: Annotated[int, COLUMN]
    processes_peak: Annotated[int, COLUMN]
    probe: ProbeCost  # the probe's own cost and sample count
    # --- a cell's own /dev/shm (the runner, loaderbench.measure.private_shm); ok and failed records alike ---
    shm_private: PrivateShmUse


METRIC_NAMES = tuple(Metrics.__annotations__)  # the top-level metrics, by name

"""The numbered catalogue of DataLoader claims the suite puts to the test: what each says, where it is written,
what can measure it, and, for a claim no coded rule decides yet, the study and hardware that would.

Data, not logic: the rules that decide a claim carry its number (loaderbench.analysis.rules.claim.Claim.number),
and the claims table (loaderbench.analysis.claims.claims_table) gives every number a row, a rule's or a
"not measured yet" one built from `pending` here.

Sources (`source`): R = an analytical report on DataLoader parallelism and resource management (line numbers of
its text); T = the PyTorch tutorial "Data Loading Optimization in PyTorch" (lines of its rendered page);
P = a guide to input pipelines with remote storage.
"""

from __future__ import annotations

from dataclasses import dataclass

#: what the source tags stand for, for the tables' legends
SOURCES = {
    "R": "an analytical report on DataLoader parallelism and resource management (lines of its text)",
    "T": 'the PyTorch tutorial "Data Loading Optimization in PyTorch" (lines of its page)',
    "P": "a guide to input pipelines reading remote storage (lines of its text)",
}
#: what can measure a claim
WHERE = {"C": "a CPU-only Linux machine", "G": "a GPU node", "B": "a node of 64 or more cores, or several nodes"}


@dataclass(frozen=True)
class SeedClaim:
    """One numbered claim. `pending`: what would decide it where no rule does (or what a partial rule leaves
    open); None when its rules decide it."""

    number: int
    claim: str
    source: str
    where: str
    pending: str | None = None

    @property
    def tag(self) -> str:
        return f"#{self.number}"


CATALOGUE: tuple[SeedClaim, ...] = (
    SeedClaim(1, "workers beat num_workers = 0 when per-sample work is heavy", "R:15; T:53-56; P:31", "C"),
    SeedClaim(
        2,
        "num_workers = 0 wins when transforms are cheap or data is in memory (IPC costs more than it gains)",
        "R:15; T:57-60; P:17",
        "C",
    ),
    SeedClaim(3, "with workers, step time is about max(load, train), not their sum", "P:9-11; R:19-20", "C"),
    SeedClaim(
        4,
        "throughput saturates once N / T_prep >= 1 / T_train; more workers then only fill queues",
        "R:50-51, 160",
        "C",
    ),
    SeedClaim(5, "processes parallelize CPU-bound Python work", "R:29; P:13", "C"),
    SeedClaim(
        6,
        "because of the GIL, threads serialize CPU-bound augmentation (threads suffice only for I/O)",
        "R:25-29; P:13",
        "C",
    ),
    SeedClaim(
        7, "fork starts workers fastest; spawn pays an interpreter start and imports per worker", "R:37-38, 92", "C"
    ),
    SeedClaim(8, "spawn pickles the dataset to every worker", "R:38; P:29", "C"),
    SeedClaim(9, "spawn uses more memory than fork (no shared pages)", "R:37-38", "C"),
    SeedClaim(10, "forkserver sits between fork and spawn", "R:39", "C"),
    SeedClaim(11, "fork is the Linux default start method", "R:37, 41", "C"),
    SeedClaim(12, "CUDA initialized before fork breaks forked workers", "R:37, 42", "G"),
    SeedClaim(13, "the CPU-bound optimum is about the physical cores (or one fewer)", "R:57, 152; P:35", "C"),
    SeedClaim(14, "throughput degrades past the cores", "R:55, 183; T:232", "C"),
    SeedClaim(15, "the cause is context switches and cache/TLB flushes", "R:56", "C"),
    SeedClaim(16, "a sleep() workload scales past the cores, which misleads", "R:61-63", "C"),
    SeedClaim(17, "I/O-bound loading: 2-4x the cores as workers", "R:151; T:55", "C"),
    SeedClaim(
        18,
        "on 64 or more cores, cap workers at 16-32",
        "R:153",
        "B",
        "the `scaling` study (loaderbench/studies/scaling.toml) on a node of 64 or more cores",
    ),
    SeedClaim(19, "DDP: workers per rank = cores / GPUs; R x cores workers collapse", "R:154, 166-172", "C"),
    SeedClaim(20, "DistributedSampler gives each rank a disjoint share", "R:174", "C"),
    SeedClaim(
        21, "fork shares pages until written; one-object arrays (NumPy, Arrow, mmap) stay shared", "R:71, 84; P:45", "C"
    ),
    SeedClaim(22, 'refcount writes copy Python-object data ("not a leak")', "R:76-77, 162; P:39-45", "C"),
    SeedClaim(23, "copies multiply with the worker count", "R:67, 77; T:63-64", "C"),
    SeedClaim(24, "lazy loading (paths, not decoded data, in the dataset) avoids duplication", "R:83", "C"),
    SeedClaim(25, "freezing refcounts prevents copy-on-write", "R:85", "C"),
    SeedClaim(26, "restarting workers costs a start-up each epoch, more under spawn", "R:91-92; T:92; P:25", "C"),
    SeedClaim(27, "persistent workers speed up many short epochs (1.13x)", "T:95-102", "C"),
    SeedClaim(
        28, "persistent workers hold their memory between epochs; a second (validation) loader doubles it", "R:104", "C"
    ),
    SeedClaim(29, "persistent workers miss dataset state changed between epochs", "R:105", "C"),
    SeedClaim(30, "NumPy and Python random repeat across forked workers", "R:130-131", "C"),
    SeedClaim(31, "torch gives each worker its own seed", "R:132", "C"),
    SeedClaim(32, "augmentations repeat every epoch; a seeding worker_init_fn fixes it", "R:132-140", "C"),
    SeedClaim(
        33,
        "pinned memory gives faster host-to-device copies; pageable memory is staged",
        "R:113-114, 123; T:76-77",
        "G",
    ),
    SeedClaim(34, "non_blocking copies overlap compute", "R:122; T:78", "G"),
    SeedClaim(35, "the single pin-memory thread becomes a bottleneck with many workers", "R:125", "G"),
    SeedClaim(36, "always pin with an accelerator", "T:80, 233", "G"),
    SeedClaim(
        37,
        "manual pin_memory() + non_blocking is slower than the DataLoader's pinning",
        "T:82-83",
        "G",
        "a later axis of `gpu-feed` on a GPU node: pinning by hand in the training loop",
    ),
    SeedClaim(38, "2-4 workers per GPU are enough", "T:66, 232", "G"),
    SeedClaim(39, "the ladder: 3.30 / 3.33 / 3.76 / 3.77 / 11.55x", "T:71-131, 205-227", "G"),
    SeedClaim(40, "step gains: pin about 1.0x, prefetcher about 1.0x", "T:90, 109", "G"),
    SeedClaim(
        41,
        "the prefetcher's stream sync can outweigh its gain when loading is fast",
        "T:107",
        "G",
        "the `ladder`'s prefetcher rung after batched loading, on a GPU node (a later rung order)",
    ),
    SeedClaim(42, "__getitems__ amortizes per-sample overhead (about 3x)", "T:110-131", "C"),
    SeedClaim(43, "batch size 16 -> 128: loading time per batch grows (0.18 -> 0.93 s for 10 batches)", "T:43", "C"),
    SeedClaim(44, "batch sizes 32-128 balance best; large ones hit GPU out-of-memory", "T:33-35, 231", "G"),
    SeedClaim(45, "each worker keeps prefetch_factor batches in flight (memory, shm)", "T:49", "C"),
    SeedClaim(
        46, "head-of-line blocking: the main process waits for the worker whose turn it is", "P:33; T:52, 133-135", "C"
    ),
    SeedClaim(47, "in_order=False keeps mean throughput about the same", "T:141-143", "C"),
    SeedClaim(48, "in_order=False gives up deterministic order", "T:137-139", "C"),
    SeedClaim(
        49,
        "snapshot_every_n_steps: more snapshots cost throughput, fewer replay more samples on recovery",
        "T:144-150",
        "C",
    ),
    SeedClaim(50, "file_descriptor is limited by ulimit -n; file_system is not", "T:159-166, 181-183, 237", "C"),
    SeedClaim(
        51, "file_descriptor is cheaper per small tensor; file_system suits few large ones", "T:162, 175-180", "C"
    ),
    SeedClaim(52, "set_sharing_strategy after workers start has no effect", "T:185-187", "C"),
    SeedClaim(53, "too little /dev/shm gives bus errors; too many workers exhaust it", "T:65, 188-193", "C"),
    SeedClaim(54, "fewer workers, a lower prefetch_factor or smaller batches cut /dev/shm use", "T:194-199", "C"),
    SeedClaim(55, "crashed workers leak /dev/shm segments", "T:203", "C"),
    SeedClaim(56, "remote storage makes a pipeline I/O-bound", "P:1-3", "C"),
    SeedClaim(57, "num_workers = 0: no start-up cost, readable tracebacks", "R:150; P:21", "C"),
)
BY_NUMBER = {c.number: c for c in CATALOGUE}

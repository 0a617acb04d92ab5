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

import re
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


#: one numbered claim a line: number | where | source | claim [| pending]; a line that starts with spaces goes on
#: with the one before
_TABLE = """
1 | C | R:15; T:53-56; P:31 | workers beat num_workers = 0 when per-sample work is heavy
2 | C | R:15; T:57-60; P:17 | num_workers = 0 wins when transforms are cheap or data is in memory (IPC costs more
    than it gains)
3 | C | P:9-11; R:19-20 | with workers, step time is about max(load, train), not their sum
4 | C | R:50-51, 160 | throughput saturates once N / T_prep >= 1 / T_train; more workers then only fill queues
5 | C | R:29; P:13 | processes parallelize CPU-bound Python work
6 | C | R:25-29; P:13 | because of the GIL, threads serialize CPU-bound augmentation (threads suffice only for I/O)
7 | C | R:37-38, 92 | fork starts workers fastest; spawn pays an interpreter start and imports per worker
8 | C | R:38; P:29 | spawn pickles the dataset to every worker
9 | C | R:37-38 | spawn uses more memory than fork (no shared pages)
10 | C | R:39 | forkserver sits between fork and spawn
11 | C | R:37, 41 | fork is the Linux default start method
12 | G | R:37, 42 | CUDA initialized before fork breaks forked workers
13 | C | R:57, 152; P:35 | the CPU-bound optimum is about the physical cores (or one fewer)
14 | C | R:55, 183; T:232 | throughput degrades past the cores
15 | C | R:56 | the cause is context switches and cache/TLB flushes
16 | C | R:61-63 | a sleep() workload scales past the cores, which misleads
17 | C | R:151; T:55 | I/O-bound loading: 2-4x the cores as workers
18 | B | R:153 | on 64 or more cores, cap workers at 16-32 | the `scaling` study (loaderbench/studies/scaling.toml)
    on a node of 64 or more cores
19 | C | R:154, 166-172 | DDP: workers per rank = cores / GPUs; R x cores workers collapse
20 | C | R:174 | DistributedSampler gives each rank a disjoint share
21 | C | R:71, 84; P:45 | fork shares pages until written; one-object arrays (NumPy, Arrow, mmap) stay shared
22 | C | R:76-77, 162; P:39-45 | refcount writes copy Python-object data ("not a leak")
23 | C | R:67, 77; T:63-64 | copies multiply with the worker count
24 | C | R:83 | lazy loading (paths, not decoded data, in the dataset) avoids duplication
25 | C | R:85 | freezing refcounts prevents copy-on-write
26 | C | R:91-92; T:92; P:25 | restarting workers costs a start-up each epoch, more under spawn
27 | C | T:95-102 | persistent workers speed up many short epochs (1.13x)
28 | C | R:104 | persistent workers hold their memory between epochs; a second (validation) loader doubles it
29 | C | R:105 | persistent workers miss dataset state changed between epochs
30 | C | R:130-131 | NumPy and Python random repeat across forked workers
31 | C | R:132 | torch gives each worker its own seed
32 | C | R:132-140 | augmentations repeat every epoch; a seeding worker_init_fn fixes it
33 | G | R:113-114, 123; T:76-77 | pinned memory gives faster host-to-device copies; pageable memory is staged
34 | G | R:122; T:78 | non_blocking copies overlap compute
35 | G | R:125 | the single pin-memory thread becomes a bottleneck with many workers
36 | G | T:80, 233 | always pin with an accelerator
37 | G | T:82-83 | manual pin_memory() + non_blocking is slower than the DataLoader's pinning | a later axis of
    `gpu-feed` on a GPU node: pinning by hand in the training loop
38 | G | T:66, 232 | 2-4 workers per GPU are enough
39 | G | T:71-131, 205-227 | the ladder: 3.30 / 3.33 / 3.76 / 3.77 / 11.55x
40 | G | T:90, 109 | step gains: pin about 1.0x, prefetcher about 1.0x
41 | G | T:107 | the prefetcher's stream sync can outweigh its gain when loading is fast | the `ladder`'s prefetcher
    rung after batched loading, on a GPU node (a later rung order)
42 | C | T:110-131 | __getitems__ amortizes per-sample overhead (about 3x)
43 | C | T:43 | batch size 16 -> 128: loading time per batch grows (0.18 -> 0.93 s for 10 batches)
44 | G | T:33-35, 231 | batch sizes 32-128 balance best; large ones hit GPU out-of-memory
45 | C | T:49 | each worker keeps prefetch_factor batches in flight (memory, shm)
46 | C | P:33; T:52, 133-135 | head-of-line blocking: the main process waits for the worker whose turn it is
47 | C | T:141-143 | in_order=False keeps mean throughput about the same
48 | C | T:137-139 | in_order=False gives up deterministic order
49 | C | T:144-150 | snapshot_every_n_steps: more snapshots cost throughput, fewer replay more samples on recovery
50 | C | T:159-166, 181-183, 237 | file_descriptor is limited by ulimit -n; file_system is not
51 | C | T:162, 175-180 | file_descriptor is cheaper per small tensor; file_system suits few large ones
52 | C | T:185-187 | set_sharing_strategy after workers start has no effect
53 | C | T:65, 188-193 | too little /dev/shm gives bus errors; too many workers exhaust it
54 | C | T:194-199 | fewer workers, a lower prefetch_factor or smaller batches cut /dev/shm use
55 | C | T:203 | crashed workers leak /dev/shm segments
56 | C | P:1-3 | remote storage makes a pipeline I/O-bound
57 | C | R:150; P:21 | num_workers = 0: no start-up cost, readable tracebacks
"""
CATALOGUE: tuple[SeedClaim, ...] = tuple(
    SeedClaim(int(number), claim, source, where, *pending)
    for number, where, source, claim, *pending in (
        [field.strip() for field in line.split("|")] for line in re.sub(r"\n +", " ", _TABLE.strip()).splitlines()
    )
)
BY_NUMBER = {c.number: c for c in CATALOGUE}

"""Real DDP ranks (`rank_mode = "ddp"`): the cell's `ranks` processes form a torch.distributed process group
(gloo on the CPU, nccl when the model runs on CUDA), each reads its share through DistributedSampler (an
iterable dataset: the workload's own shard split), runs a small model step on its batch and all-reduces the
gradients before the optimizer step, as DistributedDataParallel does.

Why not loaders side by side: what DDP adds to the cores' load is the process group, the step and the
all-reduce that waits for the slowest rank. Each rank keeps the index of every sample its loop received from its
DataLoader (each sample carries it), so the record says whether the shares delivered were disjoint and covered the
epoch, rather than assuming it from what the sampler handed out (the index travels as a small tensor beside each
batch: loaderbench.measure.resume.tag, a few microseconds per sample).

Locally the cell forks ranks 1..R-1 (in its own process group, so the runner's probe sees every rank's tree,
workers included, and its clean-up kills them all); a rank that fails closes its connections, the others'
collectives fail at once, and rank 0 stops the rest and reports the first failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource

#: Features the small model pools each sample to: a two-layer MLP over them, whatever the sample's shape.
FEATURES = 64
#: How long a collective may wait for a rank before the group gives up (a hung rank ends by the cell's timeout).
GROUP_TIMEOUT = timedelta(minutes=30)
#: Relative difference under which two ranks' gradient checksums count as equal (the all-reduce is exact; this
#: only forgives the float sum of the checksum itself).
GRAD_TOLERANCE = 1e-6


class RankGroup:
    """What makes one loader process a DDP rank: its sampler, its step, and the indices of the samples its loop
    received (`received`, per epoch: set by loaderbench.measure.rank.measure_rank, which tags every sample of a
    map-style dataset with its index)."""

    def __init__(self, rank: int, world: int, device: str):
        self.rank, self.world, self.device = rank, world, device
        self.sampler_: Any = None
        self.step: DdpStep | None = None
        self.epoch_samples = 0  # the dataset all shares cut (0: an iterable dataset, no sampler)
        self.received: list[list[int]] = []  # the indices of the samples the loop received, per epoch

    def sampler(self, parts, seed: int):
        """DistributedSampler over a map-style dataset (every rank the same seed, so the shares are one
        permutation cut in R); None for an iterable one, whose workload splits its shards by rank itself."""
        if parts.iterable:
            return None
        from torch.utils.data.distributed import DistributedSampler

        self.epoch_samples = len(parts.dataset)
        self.sampler_ = DistributedSampler(parts.dataset, self.world, self.rank, shuffle=True, seed=seed)
        return self.sampler_

    def consumer(self, cell: CellConfig) -> DdpStep:
        self.step = DdpStep(cell, self.world, self.device)
        return self.step

    def next_epoch(self) -> None:
        if self.sampler_ is not None:
            self.sampler_.set_epoch(self.sampler_.epoch + 1)


class DdpStep:
    """The consumer of a DDP rank: forward and backward of a small model (or the cell's `model`), the
    gradients all-reduced in one flat bucket and averaged, then the optimizer step. Times the step and the
    all-reduce; keeps checksums of the last step's gradients before and after the all-reduce."""

    kind = "cpu"

    def __init__(self, cell: CellConfig, world: int, device: str):
        import torch

        from loaderbench.measure.consumers import build_model
        from loaderbench.measure.loop import make_step

        self.torch, self.world = torch, world
        self.dist = torch.distributed
        self.device = torch.device(device)
        self.kind = "gpu" if self.device.type == "cuda" else "cpu"
        torch.manual_seed(cell.seed)  # every rank starts from the same weights, as DDP's broadcast makes them
        self.model_name = cell.model if cell.model != "none" else "mlp"
        self.model = (build_model(cell.model) if cell.model != "none" else _mlp()).to(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        for p in self.params:
            self.dist.broadcast(p.data, src=0)
        self.opt = torch.optim.SGD(self.params, lr=0.01)
        self.loss = torch.nn.CrossEntropyLoss()
        self.classes = 1000 if cell.model == "resnet50" else 10
        self.simulated = make_step(cell.step_ms, cell.step_kind)
        self.step_s: list[float] = []
        self.allreduce_s: list[float] = []
        self.grad_local = self.grad_reduced = 0.0

    def wrap(self, iterable):
        return iterable

    def _input(self, batch):
        data = batch[0][0] if isinstance(batch[0], (list, tuple)) else batch[0]
        data = data.to(self.device).float()
        if self.model_name == "mlp":
            flat = data.flatten(1).unsqueeze(1)
            data = self.torch.nn.functional.adaptive_avg_pool1d(flat, FEATURES).squeeze(1)
        return data, self.torch.as_tensor(batch[1]).to(self.device).long() % self.classes

    def __call__(self, batch: Any) -> None:
        torch = self.torch
        t0 = time.perf_counter()
        data, labels = self._input(batch)
        loss = self.loss(self.model(data), labels)
        self.opt.zero_grad(set_to_none=False)
        loss.backward()
        self.simulated(batch)
        flat = torch.cat([p.grad.reshape(-1) for p in self.params])
        local = float(flat.double().abs().sum())
        t1 = time.perf_counter()
        self.dist.all_reduce(flat)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t2 = time.perf_counter()
        flat /= self.world
        offset = 0
        for p in self.params:
            n = p.grad.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
            offset += n
        self.opt.step()
        self.step_s.append(time.perf_counter() - t0)
        self.allreduce_s.append(t2 - t1)
        self.grad_local, self.grad_reduced = local, float(flat.double().abs().sum())

    def metrics(self, steps: list[int], window_s: float) -> dict:
        from loaderbench.measure.consumers import busy_metrics

        return {
            "consumer": self.kind,
            **busy_metrics(self.step_s, steps, window_s),
            "model": self.model_name,
            "device": str(self.device),
        }

    def summary(self, rank: int) -> dict:
        params = sum(float(p.detach().double().abs().sum()) for p in self.params)
        return {
            "rank": rank,
            "host": socket.gethostname(),
            "step_s": statistics.median(self.step_s) if self.step_s else 0.0,
            "allreduce_s": statistics.median(self.allreduce_s) if self.allreduce_s else 0.0,
            "grad_local": self.grad_local,
            "grad_reduced": self.grad_reduced,
            "params": params,
        }


def _mlp():
    import torch.nn as nn

    return nn.Sequential(nn.Linear(FEATURES, FEATURES), nn.ReLU(), nn.Linear(FEATURES, 10))


def _device(cell: CellConfig, rank: int) -> str:
    """CUDA (and nccl) only where the cell's model is asked to run there; the loaders' own ranks use gloo."""
    if cell.model != "none" and cell.device == "cuda":
        import torch

        local = int(os.environ.get("LOCAL_RANK", rank))  # a rank started as a Slurm task: its place on its node
        return f"cuda:{local % max(1, torch.cuda.device_count())}"
    return "cpu"


def run_rank(
    cell: CellConfig, repetition: int, source: DataSource, rank: int, world: int, init_method: str, loop=None
) -> dict | None:
    """One DDP rank, start to end: join the group, measure, send rank 0 what it needs. Returns, on rank 0,
    the cell's metrics and raw times; None on the others."""
    import torch.distributed as dist

    from loaderbench.measure.rank import measure_rank

    device = _device(cell, rank)
    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world, timeout=GROUP_TIMEOUT)
    try:
        hosts: list[Any] = [None] * world
        dist.all_gather_object(hosts, socket.gethostname())
        dist.barrier()
        t_sync = time.perf_counter() if len(set(hosts)) > 1 else 0.0  # one clock on one host; else the barrier's
        group = RankGroup(rank, world, device)
        metrics, raw = measure_rank(cell, repetition, source.for_rank(rank), loop=loop, group=group)
        raw = {"t_iter": [t - t_sync for t in raw["t_iter"]]} | {
            k: [[t - t_sync for t in row] for row in raw[k]] for k in ("got", "done")
        }
        assert group.step is not None
        mine = {
            "metrics": metrics,
            "raw": raw,
            "rank": group.step.summary(rank),
            "received": group.received,
            "epoch_samples": group.epoch_samples,
        }
        gathered: list[Any] | None = [None] * world if rank == 0 else None
        dist.gather_object(mine, gathered, dst=0)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if gathered is None:
        return None
    return combine_ddp(cell, gathered, backend)


def combine_ddp(cell: CellConfig, gathered: list[dict], backend: str) -> dict:
    """Rank 0's view of the cell: the ranks' combined metrics (loaderbench.measure.rank.combine_ranks), their CPU
    time summed, and the `ddp` block: step, all-reduce, gradient agreement and the shares counted from the samples
    each rank received."""
    from loaderbench.measure.rank import combine_ranks

    per_rank = [g["metrics"] for g in gathered]
    agg = combine_ranks(cell, per_rank, [g["raw"] for g in gathered])
    agg["cpu_s"] = {k: sum(m["cpu_s"][k] for m in per_rank) for k in per_rank[0]["cpu_s"]}
    agg["ctx_switches"] = {k: sum(m["ctx_switches"][k] for m in per_rank) for k in per_rank[0]["ctx_switches"]}
    ranks = [g["rank"] for g in gathered]
    reduced = [r["grad_reduced"] for r in ranks]
    scale = max(abs(x) for x in reduced) or 1.0
    agg["ddp"] = {
        "backend": backend,
        "world_size": len(gathered),
        "nodes": len({r["host"] for r in ranks}),
        "step_s": statistics.median(r["step_s"] for r in ranks),
        "allreduce_s": statistics.median(r["allreduce_s"] for r in ranks),
        **count_shares([g["received"] for g in gathered], gathered[0]["epoch_samples"]),
        "grads_equal": (max(reduced) - min(reduced)) <= GRAD_TOLERANCE * scale,
        "ranks": ranks,
    }
    return {"metrics": agg, "raw": gathered[0]["raw"]}


def count_shares(received: list[list[list[int]]], size: int) -> dict:
    """Count, over the epochs in which every rank's loop received samples (`received[rank][epoch]`: the indices the
    samples it received carried), the reads, the reads of an index read more than once in its epoch (overlapping
    shares) and the indices of a `size`-sample epoch that no rank read."""
    epochs = min((len(r) for r in received), default=0) if size else 0
    reads = overlap = missing = 0
    for e in range(epochs):
        counts = Counter(i for r in received for i in r[e])
        reads += sum(counts.values())
        overlap += sum(c for c in counts.values() if c > 1)
        missing += size - len(counts)
    return {
        "epoch_samples": size,
        "epochs_counted": epochs,
        "share_reads": reads,
        "share_overlap": overlap,
        "share_missing": missing,
    }


#: Set (to a torch.distributed init method, e.g. env://) where a launcher started each rank as its own task (one
#: Slurm task per rank, RANK and WORLD_SIZE exported by submitit): the cell then is this one rank.
LAUNCHED = "LOADERBENCH_DDP_INIT"


def launched_rank() -> tuple[int, int] | None:
    """(rank, world size) when a launcher started this rank as a task of its own; None when the cell starts its
    ranks itself."""
    if not os.environ.get(LAUNCHED):
        return None
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def measure_ddp(
    cell: CellConfig, repetition: int, source: DataSource, loop: Callable | None = None
) -> tuple[dict, dict]:
    """The cell's `ranks` DDP ranks: where a launcher started each rank as a task, this one rank (its metrics
    empty but on rank 0); else all of them on this node, ranks 1..R-1 forked, rank 0 this process, brought
    together by a file store in a private folder. Returns rank 0's combined (metrics, raw)."""
    launched = launched_rank()
    if launched is not None:
        rank, world = launched
        if world != cell.ranks:
            raise RuntimeError(f"ranks = {cell.ranks} but the launcher started {world} tasks for this cell")
        out = run_rank(cell, repetition, source, rank, world, os.environ[LAUNCHED], loop)
        return (out["metrics"], out["raw"]) if out is not None else ({}, {})
    world = cell.ranks
    store = tempfile.mkdtemp(prefix="lb-ddp-")
    init = f"file://{store}/store"
    children: dict[int, int] = {}  # pid -> read end of its error pipe
    try:
        for rank in range(1, world):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                code = 1
                try:
                    run_rank(cell, repetition, source, rank, world, init, loop)
                    code = 0
                except BaseException as exc:  # noqa: BLE001 - rank 0 reports it
                    _report(w, exc, cell)
                finally:
                    os._exit(code)
            os.close(w)
            children[pid] = r
        try:
            out = run_rank(cell, repetition, source, 0, world, init, loop)
        except BaseException as exc:
            cause = _first_failure(children, exc)
            if cause is exc:
                raise
            raise cause from exc
        assert out is not None
        for pid in list(children):
            _, status = os.waitpid(pid, 0)
            os.close(children.pop(pid))
            if status != 0:
                raise RuntimeError(f"DDP rank process {pid} ended with status {os.waitstatus_to_exitcode(status)}")
        return out["metrics"], out["raw"]
    finally:
        _stop(children)
        shutil.rmtree(store, ignore_errors=True)


_COMM_ERRORS = ("Connection closed by peer", "Connection reset by peer", "Gloo", "gloo", "DistBackendError")


class RankFailed(RuntimeError):
    """Another rank of the cell failed: its error, already classified where it happened
    (loaderbench.measure.failures.classify_exception keeps it), named by the rank."""

    def __init__(self, rank: int, error: dict):
        self.classified = {"kind": error["kind"], "message": f"DDP rank {rank} failed: {error['message']}"}
        super().__init__(self.classified["message"])


def _report(fd: int, exc: BaseException, cell: CellConfig) -> None:
    """A forked rank's failure, classified there (a worker's traceback is in its own exception), for rank 0."""
    from loaderbench.measure.failures import classify_exception

    text = f"{type(exc).__name__}: {exc}"
    report = {"error": classify_exception(exc, cell.sharing_strategy), "collective": _broken_collective(text)}
    os.write(fd, json.dumps(report).encode())


def _broken_collective(text: str) -> bool:
    return any(m in text for m in _COMM_ERRORS)


def _first_failure(children: dict[int, int], own: BaseException) -> BaseException:
    """Rank 0 failed: `own` when the cause is its own (not a collective broken by another rank); else the
    failure of the first rank whose cause is not a broken collective, once the ranks have ended."""
    if not _broken_collective(f"{type(own).__name__}: {own}"):
        return own
    deadline = time.monotonic() + 10  # the others' collectives fail as soon as rank 0's connections close
    for rank, (pid, r) in enumerate(children.items(), start=1):
        while time.monotonic() < deadline and not os.waitpid(pid, os.WNOHANG)[0]:
            time.sleep(0.05)
        os.set_blocking(r, False)
        try:
            text = os.read(r, 1 << 20).decode(errors="replace")
        except BlockingIOError:
            continue
        try:
            report = json.loads(text)
        except ValueError:
            continue
        if not report["collective"]:
            return RankFailed(rank, report["error"])
    return own


def _stop(children: dict[int, int]) -> None:
    """Kill every rank process still there, with its workers, and reap it."""
    import psutil

    for pid, r in list(children.items()):
        try:
            procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            procs = []
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        os.close(r)
        children.pop(pid)

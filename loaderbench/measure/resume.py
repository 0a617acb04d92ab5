"""Recovery, measured in the cell (`resume_at` > 0): what a preempted training job's loader replays and how
soon it delivers again.

The cell's own measuring loop reads its first epoch uninterrupted: the reference sequence of sample indices.
Then, as a training job would:

1. a fresh process (forked from the cell) builds the same loader, reads `resume_at` batches, saves the
   loader's `state_dict()` as a checkpoint does (loaderbench.measure.checkpoint_state), reads on, and is
   killed with SIGKILL together with its workers, as a preemption kills a job;
2. another fresh process builds the loader again, loads the saved state and reads to the end of the epoch.

Every sample carries its index through the DataLoader (`IndexTagged`), and the dataset counts what it loads
in shared memory, so the record holds what the resumed process loaded only to fast-forward (replayed), the
time from the restart to its first batch, and whether the samples before the kill and after the resume are
the uninterrupted epoch's, each once (loaderbench.storage.exactly_once.resumed_sequence).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

from loaderbench.schema.cell import CellConfig


class IndexTagged:
    """A map-style dataset whose samples come out as (index, sample), counting its loads per loading process
    (slot 0: the loader process itself; slot w + 1: worker w) in a shared tensor."""

    def __init__(self, inner, loads):
        self.inner, self.loads = inner, loads

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index):
        self._count(1)
        return index, self.inner[index]

    def __getattr__(self, name: str):  # worker_init_fns read the workload's attributes through get_worker_info
        if name in ("inner", "loads"):  # not set yet (unpickling): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _count(self, n: int) -> None:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        self.loads[0 if info is None else info.id + 1] += n


class IndexTaggedBatched(IndexTagged):
    """The same for a dataset that fetches a batch with one __getitems__ call (the `batched` axis)."""

    def __getitems__(self, indices):
        self._count(len(indices))
        return list(zip(indices, self.inner.__getitems__(indices)))


class TaggedCollate:
    """Collate (index, sample) pairs into (index tensor, the workload's own batch)."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, pairs):
        import torch
        from torch.utils.data import default_collate

        samples = [s for _, s in pairs]
        return torch.tensor([i for i, _ in pairs], dtype=torch.int64), (self.inner or default_collate)(samples)


def tag(parts, num_workers: int):
    """(the workload's LoaderParts with indexed, counted samples, the shared load counter)."""
    import torch

    from loaderbench.workloads import LoaderParts

    if parts.iterable:
        raise ValueError(
            "resume_at: the dataset is iterable, so its samples have no index to check a resume by; "
            "allowed: resume_at with a map-style dataset"
        )
    loads = torch.zeros(num_workers + 1, dtype=torch.int64).share_memory_()
    cls = IndexTaggedBatched if hasattr(parts.dataset, "__getitems__") else IndexTagged
    tagged = LoaderParts(cls(parts.dataset, loads), TaggedCollate(parts.collate_fn), parts.worker_init_fn)
    return tagged, loads


class Untagged:
    """The loader as the loop sees it: the workload's batches, with each epoch's sample indices kept aside."""

    def __init__(self, loader):
        self.loader = loader
        self.epochs: list[list[int]] = []

    def __iter__(self):
        seen: list[int] = []
        self.epochs.append(seen)
        for indices, batch in self.loader:
            seen += indices.tolist()
            yield batch


def _child(body: Callable[[Any], dict], channel_w: int) -> None:
    """Run `body(writer)` in a forked process and send its result (or its failure) as one JSON line."""
    code = 1
    try:
        with os.fdopen(channel_w, "w") as out:
            try:
                result = body(out)
            except BaseException as exc:  # noqa: BLE001 - the parent turns it into the cell's failure
                result = {"failed": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc()}
            out.write(json.dumps(result, default=str) + "\n")
            out.flush()
            code = 0
    finally:
        os._exit(code)


def _fork(body: Callable[[Any], dict]) -> tuple[int, Any]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _child(body, w)
    os.close(w)
    return pid, os.fdopen(r)


def _reply(pid: int, reader, what: str) -> dict:
    line = reader.readline()
    if not line:
        _, status = os.waitpid(pid, 0)
        raise RuntimeError(
            f"the {what} process died without a result (exit status {os.waitstatus_to_exitcode(status)})"
        )
    got = json.loads(line)
    if "failed" in got:
        if got["failed"] == "CheckpointError":
            from loaderbench.measure.checkpoint_state import CheckpointError

            raise CheckpointError(got["message"])
        raise RuntimeError(f"in the {what} process: {got['failed']}: {got['message']}\n{got['traceback'][-3000:]}")
    return got


def _kill_hard(pid: int, workers: list[int]) -> None:
    """SIGKILL the process, its descendants and its workers (a forkserver's workers are not its descendants) at
    once, as a preemption does, then reap it."""
    import psutil

    try:
        tree = [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    for victim in [pid, *tree, *workers]:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # reaped already (it died before it answered)
        pass


def measure_resume(
    cell: CellConfig,
    reference: list[int],
    build: Callable[[], Any],
    make_loader: Callable[[Any], Any],
) -> dict:
    """The `resume` block of the record. `reference`: the uninterrupted first epoch's sample indices; `build()`:
    the workload's LoaderParts; `make_loader(parts)`: the cell's loader over them (same seed, so same order)."""
    from loaderbench.measure.loop import make_step
    from loaderbench.storage.exactly_once import resumed_sequence

    bs, at = cell.batch_size, cell.resume_at or 0
    epoch_batches = len(reference) // bs
    if at >= epoch_batches:
        raise ValueError(
            f"resume_at = {at}: the epoch has {epoch_batches} batches; allowed: a step from 1 to {epoch_batches - 1} "
            f"(or raise measure_batches)"
        )
    step = make_step(cell.step_ms, cell.step_kind)
    folder = tempfile.mkdtemp(prefix="loaderbench-resume-")
    path = os.path.join(folder, "loader_state.pt")

    def interrupted(out) -> dict:
        from loaderbench.measure.checkpoint_state import save_state

        parts, _ = tag(build(), cell.num_workers)
        loader = make_loader(parts)
        it = iter(loader)
        before: list[int] = []
        for _ in range(at):
            indices, batch = next(it)
            before += indices.tolist()
            step(batch)
        state = loader.state_dict()
        size = save_state(path, state)
        workers = [w.pid for w in getattr(it, "_workers", [])]
        out.write(json.dumps({"before": before, "state_bytes": size, "workers": workers, "state": _summary(state)}))
        out.write("\n")
        out.flush()
        for _, batch in it:  # training goes on after its checkpoint until the preemption
            step(batch)
        signal.pause()
        return {}

    pid, reader = _fork(interrupted)
    saved: dict = {}
    try:
        saved = _reply(pid, reader, "interrupted loader")
    finally:
        reader.close()
        _kill_hard(pid, saved.get("workers", []))  # the preemption (or what is left of a failed run)
    t_restart = time.perf_counter()

    def resumed(out) -> dict:
        from loaderbench.measure.checkpoint_state import load_state

        parts, loads = tag(build(), cell.num_workers)
        loader = make_loader(parts)
        state = load_state(path)
        loader.load_state_dict(state)
        t_state = time.perf_counter()
        after: list[int] = []
        t_first = None
        for indices, batch in loader:  # iter() fast-forwards from the last snapshot: the replay
            if t_first is None:
                t_first = time.perf_counter()
            after += indices.tolist()
            step(batch)
        return {
            "after": after,
            "loads": int(loads.sum()),
            "state_load_s": t_state - t_restart,
            "restart_to_first_batch_s": None if t_first is None else t_first - t_restart,
        }

    try:
        pid, reader = _fork(resumed)
        try:
            got = _reply(pid, reader, "resumed loader")
        finally:
            reader.close()
            _reap(pid)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    replayed = got["loads"] - len(got["after"])
    return {
        "at_step": at,
        "epoch_batches": epoch_batches,
        "killed_by": "SIGKILL",
        "state_bytes": saved["state_bytes"],
        "steps_since_snapshot": saved["state"]["steps_since_snapshot"],
        "snapshot_step": saved["state"]["snapshot_step"],
        "replayed_samples": replayed,
        "replayed_batches": replayed / bs,
        "state_load_s": got["state_load_s"],
        "restart_to_first_batch_s": got["restart_to_first_batch_s"],
        **resumed_sequence(reference, saved["before"], got["after"]),
    }


def _summary(state: dict) -> dict:
    """Where the saved state says the loader will resume: its last snapshot's step and the steps since it (the
    batches a resume reads again), as torchdata's multi-process state holds them; the loader process's own
    state (num_workers = 0) is taken at the step itself."""
    snapshot = state.get("_snapshot")
    if isinstance(snapshot, dict):
        return {
            "snapshot_step": snapshot.get("_snapshot_step"),
            "steps_since_snapshot": state.get("_steps_since_snapshot"),
        }
    return {"snapshot_step": state.get("_num_yielded"), "steps_since_snapshot": 0}

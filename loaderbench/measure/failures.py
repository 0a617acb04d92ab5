"""Turn what went wrong in a cell into a classified error: a kind a figure can group by, and a message
that tells the user what happened and what to do.

Two sources: an exception the cell process caught (`classify_exception`, run inside the cell, which can
still look at the DataLoader's worker list to name the worker), and a cell process that ended without
writing a result (`classify_exit`, run by the runner). The runner may override either with what only it
knows (an OOM kill counted by the cell's memory cgroup, the timeout).
"""

from __future__ import annotations

import re
import signal

from loaderbench.processes import signame

KINDS = {
    "worker_killed": "a DataLoader worker was killed by a signal from outside (SIGKILL, SIGTERM)",
    "worker_crashed": "a DataLoader worker died by itself (segfault, abort, exit)",
    "worker_error": "the dataset raised an exception inside a DataLoader worker",
    "dataset_error": "the dataset raised an exception in the cell process (num_workers = 0)",
    "shm_exhausted": "/dev/shm is too small for the batches in flight",
    "shm_setup": "the cell's own /dev/shm (shm_size_mb) could not be mounted (needs root or CAP_SYS_ADMIN)",
    "too_many_open_files": "file descriptors ran out (file_descriptor sharing holds one per shared tensor)",
    "out_of_memory": "the cell ran out of memory (its memory_limit_mb, or the machine's)",
    "gpu_out_of_memory": "the GPU ran out of memory (the batch, the model and what the loader put there)",
    "cuda_after_fork": "a DataLoader worker forked after CUDA was initialized used CUDA itself",
    "timeout": "the cell did not finish within the study's timeout_s",
    "cell_crashed": "the cell process itself died",
    "storage_unreachable": "the storage server refused, reset or dropped a connection (it stopped mid-cell)",
    "storage_timeout": "a request to the storage server got no answer within http_timeout_s",
    "shard_truncated": "a tar shard ended before the bytes or samples its index promises",
    "storage_setup": "the storage server or its network path could not be set up (nginx, ip, tc)",
    "checkpoint_error": "a saved loader state could not be resumed from: truncated, corrupt or another torchdata's",
    "error": "an exception in the cell",
}

# loaderbench.storage's faults, by exception name: each message already says what happened and what to do
_STORAGE_FAULTS = {
    "StorageUnreachable": "storage_unreachable",
    "StorageTimeout": "storage_timeout",
    "ShardTruncated": "shard_truncated",
    "StorageSetupError": "storage_setup",
    "ToolMissing": "storage_setup",
}

# what torch's DataLoader prints for a worker's death signal (strsignal) -> signal number
_SIGNAL_TEXT = {
    "killed": 9,
    "terminated": 15,
    "segmentation fault": 11,
    "aborted": 6,
    "bus error": 7,
    "illegal instruction": 4,
    "floating point exception": 8,
    "hangup": 1,
    "interrupt": 2,
    "user defined signal 1": 10,
    "user defined signal 2": 12,
    "trace/breakpoint trap": 5,
    "bad system call": 31,
    "cpu time limit exceeded": 24,
    "file size limit exceeded": 25,
}
_CRASH_SIGNALS = {4, 5, 6, 8, 11, 31}  # the process's own fault: crashed, not killed

SHM_HINT = (
    "give it more shared memory (docker --shm-size=8g or --ipc=host; on Slurm/Apptainer check the size "
    "of /dev/shm), or lower num_workers, prefetch_factor or batch_size"
)
SIGKILL_HINT = "from outside: the kernel's OOM killer (see dmesg), a user, or a job scheduler"
NATIVE_HINT = (
    "a crash in native code the dataset calls (a decoder, a C extension); rerun the cell with "
    "num_workers = 0 to see where"
)


def _signal_words(num: int) -> str:
    try:
        desc = signal.strsignal(num)
    except (ValueError, AttributeError):
        desc = None
    return f"signal {num} ({signame(num)}{', ' + desc.lower() if desc else ''})"


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and everything it was raised from or during, outermost first."""
    out: list[BaseException] = []
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _worker_list(exc: BaseException) -> list:
    """The DataLoader iterator's worker processes, found as `self._workers` in the traceback's frames."""
    for e in _chain(exc):
        tb = e.__traceback__
        while tb is not None:
            found = getattr(tb.tb_frame.f_locals.get("self"), "_workers", None)
            if isinstance(found, list) and found:
                return found
            tb = tb.tb_next
    return []


def _worker_pids(exc: BaseException) -> list[int]:
    """PIDs of the DataLoader's workers in worker-id order."""
    return [getattr(w, "pid", None) for w in _worker_list(exc)]


def _worker_deaths(exc: BaseException, wait_s: float = 3.0) -> list[tuple[int, int, str, int]]:
    """(worker id, pid, "signal" | "exit", number) of each DataLoader worker that died abnormally.

    Read without reaping (torch's own SIGCHLD handler still looks at the worker) or, for a worker the loader
    already reaped while checking `is_alive()`, from its recorded exit code: either way the real status,
    whichever of the loader's error paths reported the death. A worker that closed its sockets may still be
    exiting: wait up to `wait_s` for it to be gone."""
    import time

    workers = _worker_list(exc)
    if not workers:
        return []
    deadline = time.monotonic() + wait_s
    while True:
        out = []
        for i, w in enumerate(workers):
            death = _death(w)
            if death is not None:
                out.append((i, getattr(w, "pid", None), *death))
        if out or time.monotonic() > deadline:
            return out
        time.sleep(0.05)


def _death(w) -> tuple[str, int] | None:
    import os

    pid = getattr(w, "pid", None)
    if pid is None:
        return None
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except (ChildProcessError, OSError, AttributeError):  # not our child (forkserver) or already reaped
        try:
            code = w.exitcode
        except Exception:  # noqa: BLE001 - a worker object torch no longer keeps consistent: nothing to learn from it
            return None
        if code is None or code == 0:
            return None
        return ("signal", -code) if code < 0 else ("exit", code)
    if info is None:
        return None
    if info.si_code == os.CLD_EXITED:
        return ("exit", info.si_status) if info.si_status != 0 else None
    return ("signal", info.si_status)


def _worker_name(pid: int, pids: list[int]) -> str:
    return f"DataLoader worker {pids.index(pid)} (pid {pid})" if pid in pids else f"DataLoader worker (pid {pid})"


def death_verdict(name: str, how: str, num: int | None, desc: str | None = None, seen: str = "") -> dict:
    """The one decision from how a worker ended (a signal or an exit code) to a kind and a message."""
    if how == "exit":
        return {
            "kind": "worker_crashed",
            "message": f"{name} exited unexpectedly with exit code {num} (something it ran called exit()); "
            f"rerun the cell with num_workers = 0 to see where{seen}",
        }
    sig = _signal_words(num) if num else f"signal: {desc}"
    if num == signal.SIGBUS:
        return {
            "kind": "shm_exhausted",
            "message": f"/dev/shm exhausted (bus error in worker): {name} was killed by {sig} writing a batch "
            f"to shared memory; {SHM_HINT}{seen}",
        }
    if num in _CRASH_SIGNALS:
        return {"kind": "worker_crashed", "message": f"{name} crashed with {sig}: {NATIVE_HINT}{seen}"}
    hint = SIGKILL_HINT if num == signal.SIGKILL else "from outside (a user or a job scheduler)"
    return {"kind": "worker_killed", "message": f"{name} was killed by {sig} {hint}{seen}"}


def _reported_death(full: str) -> tuple[list[int], str | None, int | None, str | None] | None:
    """What the loader's message says of a dead worker: (pids, "signal" | "exit" | None, number, signal text).

    torch reports a death by one of three paths, and which one wins is a race: its SIGCHLD handler names the
    signal, `_try_get_data` names only the pid(s) ("exited unexpectedly"), or the exit code."""
    killed = re.search(r"dataloader worker \(pid (\d+)\) is killed by signal: ([^.\n]+)", full, re.IGNORECASE)
    if killed:
        desc = killed.group(2).strip()
        return [int(killed.group(1))], "signal", _SIGNAL_TEXT.get(desc.lower()), desc
    exited = re.search(
        r"dataloader worker \(pid (\d+)\) exited unexpectedly with exit code (-?\d+)", full, re.IGNORECASE
    )
    if exited:
        return [int(exited.group(1))], "exit", int(exited.group(2)), None
    gone = re.search(r"dataloader worker \(pid\(s\) ([\d, ]+)\) exited unexpectedly", full, re.IGNORECASE)
    if gone:
        return [int(p) for p in gone.group(1).replace(" ", "").split(",") if p], None, None, None
    return None


def _raised_in_dataset(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name in ("__getitem__", "__getitems__"):
            return True
        tb = tb.tb_next
    return False


def _cuda_error(text: str) -> str:
    """The line of `text` that names the CUDA error (the last line of the traceback is often only advice)."""
    lines = [ln.strip() for ln in text.splitlines() if "cuda" in ln.lower() and "error:" in ln.lower()]
    return lines[-1][:300] if lines else _original_error(text)


def _original_error(text: str) -> str:
    """The last line of a worker's original traceback: the exception the dataset raised."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Warning)\b", ln) or (
            ":" in ln and not ln.startswith("File ")
        ):
            return ln[:300]
    return lines[-1][:300] if lines else text[:300]


def classify_exception(exc: BaseException, sharing_strategy: str | None = None) -> dict:
    chain = _chain(exc)
    for e in chain:  # classified where it happened (another DDP rank: loaderbench.measure.ddp.RankFailed)
        classified = getattr(e, "classified", None)
        if isinstance(classified, dict):
            return dict(classified)
    texts = [f"{type(e).__name__}: {e}" for e in chain]
    full = "\n".join(texts)
    low = full.lower()
    caught = re.search(r"caught (\w+) in dataloader worker process (\d+)", full, re.IGNORECASE)
    if caught:  # the worker's own traceback is inside this exception's text
        full = next((t for t in texts if "Original Traceback" in t), full)
        low = full.lower()
    where = f"in DataLoader worker {caught.group(2)}" if caught else "in the cell process"

    if any(isinstance(e, MemoryError) for e in chain) or (caught and caught.group(1) == "MemoryError"):
        return {
            "kind": "out_of_memory",
            "message": f"out of memory {where} ({_original_error(full)}): lower batch_size, num_workers or "
            f"prefetch_factor, or raise memory_limit_mb",
        }
    # torch's own check says so in words; a library calling CUDA directly in the child (torchvision's nvJPEG
    # decoder) gets the CUDA runtime's initialization error instead
    forked_cuda = "cannot re-initialize cuda in forked subprocess" in low or (
        caught is not None and ("cuda error: initialization error" in low or "cudaerrorinitializationerror" in low)
    )
    if forked_cuda:
        return {
            "kind": "cuda_after_fork",
            "message": f"CUDA was initialized in the cell process before its DataLoader workers were forked, and "
            f'{where} used CUDA, which a forked child cannot: use start_method = "spawn" or "forkserver", or keep '
            f"CUDA out of the workers ({_cuda_error(full)})",
        }
    if "cuda out of memory" in low or any(type(e).__name__ == "OutOfMemoryError" for e in chain):
        return {
            "kind": "gpu_out_of_memory",
            "message": f"the GPU ran out of memory {where} ({_original_error(full)}): lower batch_size, or run a "
            f"smaller model",
        }
    if "too many open files" in low or "errno 24" in low or "received 0 items of ancdata" in low:
        if sharing_strategy == "file_descriptor":
            hint = 'raise ulimit -n (ulimit_nofile) or use sharing_strategy = "file_system"'
        else:
            hint = "raise ulimit -n (ulimit_nofile)"
        return {
            "kind": "too_many_open_files",
            "message": f"too many open files under {sharing_strategy or 'this'} sharing {where}: {hint} "
            f"({_original_error(full)})",
        }
    shm_words = "shared memory" in low or "/torch_" in low or "/dev/shm" in low or " shm" in low
    if shm_words and (
        "no space left" in low
        or "unable to allocate" in low
        or "insufficient" in low
        or "bus error" in low
        or "errno 28" in low
    ):
        return {
            "kind": "shm_exhausted",
            "message": f"/dev/shm exhausted {where} (no space left for the batches in flight): {SHM_HINT} "
            f"({_original_error(full)})",
        }

    storage = _storage_fault(chain, full, caught, where)
    if storage is not None:
        return storage
    saved_state = next((e for e in chain if type(e).__name__ == "CheckpointError"), None)
    if saved_state is not None:  # loaderbench.measure.checkpoint_state: the message says what to do
        return {"kind": "checkpoint_error", "message": str(saved_state)[:600]}
    # loaderbench.measure.loop: too few batches; loaderbench.workloads.factory: a custom factory that failed in the cell
    if any(type(e).__name__ in ("EpochEndedEarly", "FactoryError") for e in chain):
        return {"kind": "dataset_error", "message": _first_line(texts[0])}
    reported = _reported_death(full)
    if reported is not None:
        return _classify_reported_death(exc, reported)
    if caught:
        return {
            "kind": "worker_error",
            "message": f"the dataset raised in DataLoader worker {caught.group(2)}: {_original_error(full)} "
            f"(full traceback in the record's traceback)",
        }
    if "out of memory" in low or "cannot allocate memory" in low or "errno 12" in low:
        return {"kind": "out_of_memory", "message": f"out of memory in the cell process: {_first_line(full)}"}
    deaths = _worker_deaths(exc)
    if deaths:  # the cell saw only a symptom of a worker's death
        i, pid, how, num = deaths[0]
        return death_verdict(
            f"DataLoader worker {i} (pid {pid})", how, num, seen=f" (the cell then saw {_first_line(texts[0])})"
        )
    if _raised_in_dataset(exc):
        return {
            "kind": "dataset_error",
            "message": f"the dataset raised in the cell process (num_workers = 0): {_first_line(texts[0])} "
            f"(full traceback in the record's traceback)",
        }
    return {"kind": "error", "message": _first_lines(full, 3)}


def _storage_fault(chain: list[BaseException], full: str, caught, where: str) -> dict | None:
    """A loaderbench.storage fault, raised in the cell process or (re-raised by the loader) in a worker: its own
    message, the last one of its name in the text (a worker's traceback ends with the original)."""
    names = [type(e).__name__ for e in chain] + ([caught.group(1)] if caught else [])
    name = next((n for n in names if n in _STORAGE_FAULTS), None)
    if name is None:
        return None
    found = re.findall(rf"\b{name}: (.+)", full)
    message = found[-1].strip() if found else _first_line(full)
    return {"kind": _STORAGE_FAULTS[name], "message": f"{message} ({where})"}


def _classify_reported_death(exc: BaseException, reported) -> dict:
    """A death the loader reported: the worker's real exit status decides, so the verdict is the same whichever
    of the loader's paths won the race; the message's own words only where the status cannot be read."""
    named, how, num, desc = reported
    pids = _worker_pids(exc)
    deaths = _worker_deaths(exc)
    real = [d for d in deaths if d[1] in named] or deaths
    if real:
        _, pid, how, num = real[0]
        return death_verdict(_worker_name(pid, pids), how, num)
    name = _worker_name(named[0], pids)
    if how is not None:
        return death_verdict(name, how, num, desc)
    return {
        "kind": "worker_crashed",
        "message": f"{name} exited unexpectedly (cause not reported); rerun the cell with num_workers = 0 to see where",
    }


def classify_exit(
    status: int, timed_out: bool, timeout_s: float, oom_suspect: bool = False, detail: str | None = None
) -> dict:
    """The cell process ended without writing a result (or was ended by the runner): why."""
    extra = f" ({detail})" if detail else ""
    if timed_out:
        return {
            "kind": "timeout",
            "message": f"the cell did not finish within timeout_s = {timeout_s:g} s and was killed{extra}; "
            f"a worker or the dataset may hang (raise timeout_s if it is only slow)",
        }
    if status < 0 or (status > 128 and status - 128 in signal.valid_signals()):
        num = -status if status < 0 else status - 128
        if num == signal.SIGKILL and oom_suspect:
            return {
                "kind": "out_of_memory",
                "message": f"the cell process was killed by SIGKILL at its memory limit (OOM){extra}",
            }
        if num == signal.SIGKILL:
            how = SIGKILL_HINT
        elif num == signal.SIGBUS:
            how = f"(a bus error: often /dev/shm is full; {SHM_HINT})"
        elif num in _CRASH_SIGNALS:
            how = f"(with num_workers = 0 the dataset runs in it: {NATIVE_HINT})"
        else:
            how = "from outside"
        return {"kind": "cell_crashed", "message": f"the cell process was killed by {_signal_words(num)} {how}{extra}"}
    return {"kind": "cell_crashed", "message": f"the cell process exited with status {status} without a result{extra}"}


def out_of_memory(limit_mb: int | None, via: str | None, victims: str, was: dict | None) -> dict:
    """The runner's verdict when the cell's memory cgroup counted OOM kills."""
    before = (
        f" (the cell saw: {was['kind']}: {was['message'][:200]})" if was and was.get("kind") != "out_of_memory" else ""
    )
    return {
        "kind": "out_of_memory",
        "message": f"the cell exceeded memory_limit_mb = {limit_mb} MiB ({via}): the kernel's OOM killer ended "
        f"{victims}; lower batch_size, num_workers or prefetch_factor, or raise memory_limit_mb{before}",
    }


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else text


def _first_lines(text: str, n: int) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[:n])[:600]

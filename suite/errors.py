"""Turn what went wrong in a cell into a classified error: a kind a figure can group by, and a message
that tells the user what happened and what to do."""

from __future__ import annotations

import re
import signal

KINDS = {
    "worker_killed": "a DataLoader worker was killed by a signal",
    "worker_crashed": "a DataLoader worker died (segfault or abort)",
    "worker_error": "the dataset raised an exception inside a worker",
    "shm_exhausted": "/dev/shm is too small for the batches in flight",
    "too_many_open_files": "file descriptors ran out (file_descriptor sharing holds one per shared tensor)",
    "out_of_memory": "the cell ran out of memory",
    "timeout": "the cell did not finish within the study's timeout_s",
    "cell_crashed": "the cell process itself died",
    "dataset_error": "the dataset could not be read",
    "error": "an exception in the cell",
}


def _signame(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def classify_exception(exc: BaseException, sharing_strategy: str | None = None) -> dict:
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if isinstance(exc, MemoryError):
        return {"kind": "out_of_memory", "message": f"out of memory in the cell: {text}"}
    if "too many open files" in low or "errno 24" in low:
        hint = ("raise ulimit -n or use sharing_strategy = \"file_system\"" if sharing_strategy == "file_descriptor"
                else "raise ulimit -n")
        return {"kind": "too_many_open_files",
                "message": f"too many open files under {sharing_strategy} sharing: {hint} ({_first_line(text)})"}
    if "bus error" in low or "shared memory" in low and ("no space" in low or "unable to" in low or "insufficient" in low):
        return {"kind": "shm_exhausted",
                "message": f"/dev/shm exhausted (bus error in worker): give the container more shm (--shm-size, "
                           f"--ipc=host) or lower num_workers, prefetch_factor or batch_size ({_first_line(text)})"}
    m = re.search(r"worker \(pid\(s\) ([\d, ]+)\) exited unexpectedly", low)
    m_sig = re.search(r"killed by signal: ([\w ]+)", text, re.IGNORECASE)
    if m_sig:
        name = m_sig.group(1).strip()
        kind = "worker_crashed" if any(s in name.lower() for s in ("segmentation", "abort", "bus")) else "worker_killed"
        if "bus" in name.lower():
            return classify_exception(RuntimeError("bus error"), sharing_strategy)
        return {"kind": kind, "message": f"DataLoader worker killed by signal: {name} ({_first_line(text)})"}
    if m:
        return {"kind": "worker_killed", "message": f"DataLoader worker (pid {m.group(1).strip()}) exited unexpectedly"}
    if "caught" in low and "in dataloader worker process" in low:
        return {"kind": "worker_error", "message": _first_lines(text, 3)}
    if "out of memory" in low or "cannot allocate memory" in low:
        return {"kind": "out_of_memory", "message": f"out of memory in the cell: {_first_line(text)}"}
    return {"kind": "error", "message": _first_lines(text, 3)}


def classify_exit(status: int, timed_out: bool, timeout_s: float, oom_suspect: bool = False) -> dict:
    """The cell process ended without writing a result: why."""
    if timed_out:
        return {"kind": "timeout", "message": f"the cell did not finish within timeout_s = {timeout_s:g} s and was killed"}
    if status < 0 or (status > 128 and status - 128 in signal.valid_signals()):
        num = -status if status < 0 else status - 128
        if num == signal.SIGKILL and oom_suspect:
            return {"kind": "out_of_memory", "message": "the cell was killed by SIGKILL near its memory limit (OOM)"}
        return {"kind": "cell_crashed", "message": f"the cell process was killed by {_signame(num)}"}
    return {"kind": "cell_crashed", "message": f"the cell process exited with status {status} without a result"}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else text


def _first_lines(text: str, n: int) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[:n])[:600]

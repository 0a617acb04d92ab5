"""Failures become classified errors with a message that says what to do, the shipped GPU records' own failures
among them (rebuilt from the tracebacks they keep)."""

import json
import re
from pathlib import Path

from loaderbench.measure.failures import classify_exception, classify_exit
from tests.conftest import REPO


def test_worker_killed():
    e = RuntimeError("DataLoader worker (pid 1234) is killed by signal: Killed. ")
    assert classify_exception(e)["kind"] == "worker_killed"


def test_worker_segfault():
    e = RuntimeError("DataLoader worker (pid 99) is killed by signal: Segmentation fault. ")
    assert classify_exception(e)["kind"] == "worker_crashed"


def test_bus_error_is_shm():
    e = RuntimeError(
        "DataLoader worker (pid 7) is killed by signal: Bus error. It is possible that dataloader's "
        "workers are out of shared memory."
    )
    c = classify_exception(e)
    assert c["kind"] == "shm_exhausted" and "/dev/shm" in c["message"]


def test_too_many_open_files_hint():
    c = classify_exception(OSError(24, "Too many open files"), "file_descriptor")
    assert c["kind"] == "too_many_open_files" and "file_system" in c["message"]


def test_exception_in_worker():
    e = ValueError("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback ...")
    assert classify_exception(e)["kind"] == "worker_error"


def test_exit_classification():
    assert classify_exit(-9, True, 5)["kind"] == "timeout"
    assert "SIGSEGV" in classify_exit(-11, False, 5)["message"]
    assert classify_exit(3, False, 5)["kind"] == "cell_crashed"


def _raised_by_iterator(workers, message):
    """An exception raised from inside a DataLoader-iterator-like frame, as torch raises it."""

    class Iterator:
        _workers = workers

        def next(self):
            raise RuntimeError(message)

    try:
        Iterator().next()
    except RuntimeError as exc:
        return exc


def test_a_worker_death_gets_one_verdict_whichever_loader_path_reports_it():
    """torch reports a dead worker by its SIGCHLD handler (naming the signal), by `_try_get_data` (naming only
    the pid, after `is_alive()` reaped it) or with the exit code; which one wins is a race decided by load.
    The verdict comes from the worker's real status, so all paths give the same record."""
    import os
    import subprocess
    import sys
    import types

    dead = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    os.waitid(os.P_PID, dead.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped: what the SIGCHLD path sees
    unreaped = [types.SimpleNamespace(pid=dead.pid)]
    by_signal = classify_exception(
        _raised_by_iterator(unreaped, f"DataLoader worker (pid {dead.pid}) is killed by signal: Segmentation fault. ")
    )
    by_pid_unreaped = classify_exception(
        _raised_by_iterator(unreaped, f"DataLoader worker (pid(s) {dead.pid}) exited unexpectedly")
    )
    dead.wait()  # reaped, as `w.is_alive()` leaves it: only the exit code the Process object kept remains
    reaped = [types.SimpleNamespace(pid=dead.pid, exitcode=-11)]
    by_pid_reaped = classify_exception(
        _raised_by_iterator(reaped, f"DataLoader worker (pid(s) {dead.pid}) exited unexpectedly")
    )
    assert by_signal == by_pid_unreaped == by_pid_reaped, (by_signal, by_pid_unreaped, by_pid_reaped)
    assert by_signal["kind"] == "worker_crashed"
    assert f"DataLoader worker 0 (pid {dead.pid})" in by_signal["message"] and "SIGSEGV" in by_signal["message"]


def test_a_death_nobody_can_read_says_so():
    """No worker list and no signal in the message: the one honest fallback."""
    c = classify_exception(RuntimeError("DataLoader worker (pid(s) 7) exited unexpectedly"))
    assert c["kind"] == "worker_crashed" and "cause not reported" in c["message"]


# --- the failures the shipped GPU records keep ----------------------------------------------------------------

SHIPPED_GPU = REPO / "results" / "reference" / "h200"
# what CUDA says in a child forked after its parent initialized it: torch's own check, or the runtime's error code
FORKED_CUDA = re.compile(r"Cannot re-initialize CUDA in forked subprocess|cudaErrorInitializationError")


def raised_again(text: str) -> BaseException:
    """The exception a formatted traceback ends with, rebuilt as the cell process caught it: its class's name and its
    whole message (a DataLoader worker's original traceback included). The stored text may lack its first lines (a
    record keeps the last 4000 characters): then the frames start at the first "  File" line."""
    lines = text.rstrip("\n").split("\n")
    heads = [i for i, line in enumerate(lines) if line == "Traceback (most recent call last):"]
    i = heads[-1] + 1 if heads else next(i for i, line in enumerate(lines) if line.startswith("  File "))
    while lines[i].startswith(" "):  # the frames, indented
        i += 1
    name, _, first = lines[i].partition(": ")
    error = type(name.rpartition(".")[2], (RuntimeError,), {})
    return error("\n".join([first, *lines[i + 1 :]]))


def shipped_failures() -> list[tuple[Path, dict, str]]:
    """(path, its error as stored, its traceback) of every failed shipped GPU record."""
    out = []
    for path in sorted(SHIPPED_GPU.rglob("*.json")):
        record = json.loads(path.read_text())
        if isinstance(record, dict) and record.get("status") == "failed" and record.get("traceback"):
            out.append((path.relative_to(REPO), record["error"], record["traceback"]))
    return out


WORKER_TEXT = (
    "Caught ValueError in DataLoader worker process 3.\nOriginal Traceback (most recent call last):\n"
    '  File "x.py", line 1, in __getitem__\nValueError: 7'
)


def _reraise():
    raise RuntimeError(WORKER_TEXT)


def test_a_traceback_is_raised_again_as_it_was_caught():
    """The last exception of a chain, its message's lines (a worker's frames among them) whole; also from a text
    whose beginning was cut off."""
    import traceback

    try:
        try:
            raise ValueError("the first")
        except ValueError:
            _reraise()
    except RuntimeError:
        text = traceback.format_exc()
    again = raised_again(text)
    assert (type(again).__name__, str(again)) == ("RuntimeError", WORKER_TEXT)
    head = "\nTraceback (most recent call last):\n"  # the last at the start of a line
    cut = text[text.rindex(head) + len(head) + 10 :]  # inside the last traceback's first frame
    assert not cut.startswith("  File ") and str(raised_again(cut)) == WORKER_TEXT


def test_cuda_used_in_forked_workers_is_told_in_the_shipped_gpu_records():
    """The shipped gpu-decode cells whose nvjpeg decoder ran in workers forked after the model was on the GPU: the
    text they stored classifies as CUDA after fork, naming the worker, the CUDA error and the start methods to use."""
    found = [(path, text) for path, _, text in shipped_failures() if FORKED_CUDA.search(text)]
    assert found, f"no shipped record under {SHIPPED_GPU} shows CUDA used in a forked worker: nothing was tested"
    wrong = []
    for path, text in found:
        worker = re.search(r"Caught \w+ in DataLoader worker process (\d+)", text)
        got = classify_exception(raised_again(text))
        named = (f"DataLoader worker {worker.group(1)}" if worker else "", '"spawn"', '"forkserver"')
        cuda_error = FORKED_CUDA.search(got["message"]) or "CUDA error: initialization error" in got["message"]
        if got["kind"] != "cuda_after_fork" or not all(w in got["message"] for w in named) or not cuda_error:
            wrong.append(f"{path}: {got}")
    assert not wrong, f"{len(wrong)} of {len(found)} records misread:\n" + "\n".join(wrong)


def test_the_shipped_gpu_records_other_failures_keep_their_kind():
    others = [(path, error, text) for path, error, text in shipped_failures() if not FORKED_CUDA.search(text)]
    assert others, f"no other failed record under {SHIPPED_GPU}: nothing was tested"
    wrong = [
        f"{path}: stored {error['kind']}, now {got}"
        for path, error, text in others
        if (got := classify_exception(raised_again(text)))["kind"] != error["kind"]
    ]
    assert not wrong, f"{len(wrong)} of {len(others)} records classified otherwise:\n" + "\n".join(wrong)

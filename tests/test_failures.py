"""Failures become classified errors with a message that says what to do."""

from loaderbench.measure.failures import classify_exception, classify_exit


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

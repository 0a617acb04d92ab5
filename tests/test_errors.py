"""Failures become classified errors with a message that says what to do."""

from suite.errors import classify_exception, classify_exit


def test_worker_killed():
    e = RuntimeError("DataLoader worker (pid 1234) is killed by signal: Killed. ")
    assert classify_exception(e)["kind"] == "worker_killed"


def test_worker_segfault():
    e = RuntimeError("DataLoader worker (pid 99) is killed by signal: Segmentation fault. ")
    assert classify_exception(e)["kind"] == "worker_crashed"


def test_bus_error_is_shm():
    e = RuntimeError("DataLoader worker (pid 7) is killed by signal: Bus error. It is possible that dataloader's "
                     "workers are out of shared memory.")
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

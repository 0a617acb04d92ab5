"""Fault injection (`workload = "fault"`): a SELF-TEST of the harness, not a benchmark.

It checks that a cell that goes wrong ends as a classified `failed`/`timeout` record, that the run goes
on with the next cell, and that no process or /dev/shm segment of the cell is left behind. Its numbers
mean nothing. Samples are tiny and instant, except sample `fault_at` (an index of the dataset; shuffled,
so it comes up somewhere mid-epoch), where the fault named by the `fault` axis happens inside whichever
process loads it: a DataLoader worker, or the cell process itself when num_workers = 0.

    none       nothing goes wrong (a healthy control cell)
    raise      __getitem__ raises RuntimeError
    segfault   the loading process dereferences NULL (SIGSEGV)
    abort      the loading process calls abort() (SIGABRT)
    exit       the loading process exits with status 3, no signal
    kill_self  the loading process sends SIGKILL to itself
    kill_main  a worker sends SIGKILL to the main process (the cell process): the training job crashes while its
               workers hold batches; refuses to run without workers
    hang       the loading process blocks forever; only the study's timeout_s ends the cell
    wait_kill  the loading process names itself `lb-wait-kill` (its /proc comm) and blocks until something
               outside kills it: tests find it by that name and SIGKILL it, a genuinely external kill that
               needs no timing luck
    oom        the loading process allocates (and touches) memory in 16 MiB steps until the cell's
               memory limit stops it; refuses to run without `memory_limit_mb`, and gives up with an
               error at twice that limit, so it never exhausts the machine
"""

from __future__ import annotations

import ctypes
import os
import signal
import time

import torch
from torch.utils.data import Dataset

from loaderbench.schema.axes import FAULTS
from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource

WAIT_KILL_NAME = "lb-wait-kill"  # what a `wait_kill` process is called in /proc/<pid>/comm
_PR_SET_NAME = 15


def set_process_name(name: str) -> None:
    """Set this process's /proc/<pid>/comm (15 bytes at most) so tests can find it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _block_forever() -> None:
    while True:
        time.sleep(3600)


def _hog_memory(limit_mb: int | None) -> None:
    if not limit_mb:
        raise RuntimeError('fault = "oom" needs memory_limit_mb (it refuses to exhaust the machine\'s memory)')
    step = 16 << 20
    held = []
    for _ in range(2 * limit_mb // 16 + 1):
        held.append(b"\x01" * step)  # bytes multiplication writes every page: resident, charged to the cell
    raise RuntimeError(
        f'fault = "oom": allocated {2 * limit_mb} MiB and the memory limit of {limit_mb} MiB '
        f"did not stop it (is it enforced here?)"
    )


def _kill_main(main_pid: int | None) -> None:
    from torch.utils.data import get_worker_info

    if get_worker_info() is None or not main_pid or main_pid == os.getpid():
        raise RuntimeError('fault = "kill_main" needs workers: the main process is killed from one of them')
    os.kill(main_pid, signal.SIGKILL)


def inject(fault: str, index: int, memory_limit_mb: int | None = None, main_pid: int | None = None) -> None:
    """Make `fault` happen in this process, now (`main_pid`: the process that made the dataset, for kill_main)."""
    if fault == "none":
        return
    if fault == "raise":
        raise RuntimeError(f'fault injected: sample {index} raised (workload = "fault", fault = "raise")')
    if fault == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    elif fault == "abort":
        os.abort()
    elif fault == "exit":
        os._exit(3)
    elif fault == "kill_self":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "kill_main":
        _kill_main(main_pid)
    elif fault == "hang":
        _block_forever()
    elif fault == "wait_kill":
        set_process_name(WAIT_KILL_NAME)
        _block_forever()
    elif fault == "oom":
        _hog_memory(memory_limit_mb)
    else:
        raise ValueError(f"unknown fault {fault!r}; allowed: {', '.join(FAULTS)}")
    time.sleep(60)  # a signal sent to oneself may take a moment to land
    raise RuntimeError(f"fault {fault!r} did not end the process")


class FaultDataset(Dataset):
    def __init__(self, length: int, fault: str, fault_at: int, memory_limit_mb: int | None = None):
        self.length, self.fault, self.fault_at = length, fault, fault_at
        self.memory_limit_mb = memory_limit_mb
        self.main_pid = os.getpid()  # made in the main process; a worker's copy keeps it

    def __len__(self) -> int:
        return self.length

    def _sample(self, index: int):
        if index == self.fault_at:
            inject(self.fault, index, self.memory_limit_mb, self.main_pid)
        return torch.full((4,), float(index % 251)), index % 1000

    def __getitem__(self, index: int):
        return self._sample(index)


class BatchedFaultDataset(FaultDataset):
    def __getitems__(self, indices: list[int]):
        return [self._sample(i) for i in indices]


def build(cell: CellConfig, length: int, source: DataSource) -> FaultDataset:
    cls = BatchedFaultDataset if cell.batched else FaultDataset
    return cls(length, cell.fault or "none", cell.fault_at or 0, cell.memory_limit_mb)

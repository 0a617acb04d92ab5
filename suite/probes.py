"""Process probes: sample a cell's process tree from outside (the runner), so probing costs the cell nothing
but the kernel's time to answer /proc reads.

Memory is summed over the tree at each sample (RSS double-counts shared pages; PSS splits them fairly;
USS is what each process alone holds); the peaks of those sums are reported.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field

import psutil

SHM = "/dev/shm"


def shm_used() -> int:
    try:
        return shutil.disk_usage(SHM).used
    except OSError:
        return 0


@dataclass
class TreeProbe:
    pid: int
    started: float = field(default_factory=time.perf_counter)
    shm_baseline: int = field(default_factory=shm_used)
    samples: int = 0
    rss_peak: int = 0
    pss_peak: int = 0
    uss_peak: int = 0
    main_uss_peak: int = 0
    workers_uss_peak: int = 0
    shm_peak: int = 0
    fds_peak: int = 0
    procs_peak: int = 0
    timeline: list = field(default_factory=list)  # [t_s, n_procs, main_pss, workers_pss, main_uss, workers_uss]
    cpu_last: dict = field(default_factory=dict)  # pid -> (user+system) seconds last seen
    sample_cost_s: float = 0.0

    def sample(self) -> None:
        t0 = time.perf_counter()
        try:
            root = psutil.Process(self.pid)
            procs = [root] + root.children(recursive=True)
        except psutil.Error:
            return
        rss = pss = uss = fds = 0
        main = [0, 0]
        workers = [0, 0]
        alive = 0
        for p in procs:
            try:
                with p.oneshot():
                    m = p.memory_full_info()
                    n_fds = p.num_fds()
                    ct = p.cpu_times()
            except psutil.Error:
                continue
            alive += 1
            rss += m.rss
            pss += m.pss
            uss += m.uss
            fds += n_fds
            self.cpu_last[p.pid] = ct.user + ct.system
            slot = main if p.pid == self.pid else workers
            slot[0] += m.pss
            slot[1] += m.uss
        self.samples += 1
        self.rss_peak = max(self.rss_peak, rss)
        self.pss_peak = max(self.pss_peak, pss)
        self.uss_peak = max(self.uss_peak, uss)
        self.main_uss_peak = max(self.main_uss_peak, main[1])
        self.workers_uss_peak = max(self.workers_uss_peak, workers[1])
        self.fds_peak = max(self.fds_peak, fds)
        self.procs_peak = max(self.procs_peak, alive)
        self.shm_peak = max(self.shm_peak, shm_used() - self.shm_baseline)
        self.timeline.append([round(t0 - self.started, 4), alive, main[0], workers[0], main[1], workers[1]])
        self.sample_cost_s += time.perf_counter() - t0

    def metrics(self) -> dict:
        workers_cpu = sum(v for pid, v in self.cpu_last.items() if pid != self.pid)
        return {
            "memory_bytes": {"rss_peak": self.rss_peak, "pss_peak": self.pss_peak, "uss_peak": self.uss_peak,
                             "main_uss_peak": self.main_uss_peak, "workers_uss_peak": self.workers_uss_peak},
            "shm_peak_bytes": max(self.shm_peak, 0),
            "open_fds_peak": self.fds_peak,
            "processes_peak": self.procs_peak,
            "probe": {"samples": self.samples, "cost_s": round(self.sample_cost_s, 4),
                      "workers_cpu_s_sampled": round(workers_cpu, 4)},
            "memory_timeline": self.timeline,
        }


def descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def processes_in_group(pgid: int) -> list[int]:
    """PIDs still in a process group (a cell's leftovers after it exited)."""
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid:
                out.append(p.pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out

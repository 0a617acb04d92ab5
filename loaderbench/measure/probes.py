"""Process probes: sample a cell's process tree from outside (the runner), so probing costs the cell nothing
but the kernel's time to answer /proc reads.

Memory is summed over the tree at each sample (RSS double-counts shared pages; PSS splits them fairly;
USS is what each process alone holds); the peaks of those sums are reported.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from loaderbench.processes import pid_alive

SHM = "/dev/shm"
#: What counts as memory rising: RSS this far above its highest at a walk walks now, and PSS or USS this far above
#: their peaks keeps the walks at `memory_interval_s` (memory creeping up by less is walked as a steady tree is).
RISE = 1.05
#: The environment variable a cell process sets to its pid: every program the cell starts (torch_shm_manager,
#: a forkserver, spawned workers) carries it in /proc/<pid>/environ (a process forked without exec shows the
#: environment its program started with, so forked workers are found by their process group instead).
CELL_MARK = "LOADERBENCH_CELL"


def shm_used() -> int:
    try:
        return shutil.disk_usage(SHM).used
    except OSError:
        return 0


def children(pid: int) -> list[int]:
    """pid's children, from /proc/<pid>/task/*/children ([] once it is gone)."""
    out: list[int] = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as fh:
                out += [int(c) for c in fh.read().split()]
    except (OSError, ValueError):
        pass
    return out


def tree_pids(pid: int) -> list[int]:
    """pid and its descendants: far cheaper than psutil's scan of all of /proc."""
    out, stack = [], [pid]
    while stack:
        q = stack.pop()
        out.append(q)
        stack += children(q)
    return out


@dataclass
class TreeProbe:
    """Every tick: the tree's processes, RSS (statm), open fds, CPU times (workers the cell has not reaped when it
    reports, persistent ones, are counted from these) and /dev/shm: cheap reads (about 0.5 ms of CPU for a cell and
    two workers).
    PSS and USS need the kernel to walk every page table (smaps_rollup, 16-19 ms of CPU for a torch process on a
    2-vCPU VM, 25 to 70 cheap samples' worth, holding the cell's mmap lock), so they are read whenever RSS passes a
    new high by RISE, once when the cell's last window ends (its workers still alive:
    loaderbench.measure.window_mark), and on a schedule: every `memory_interval_s` while they keep rising by RISE,
    the interval doubling (up to `memory_backoff` times) after each scheduled read that finds no such rise, and back
    to `memory_interval_s` at the next that does. Their peaks are the peaks of those samples: a rise shows at the
    next tick (RSS) or within one interval (pages turning private under copy-on-write, which RSS does not show), and
    a long steady window, or memory creeping up by less than RISE, pays for few walks. (Reading them every 0.2 s cost
    the cell 5-15% throughput on 2 cores, measured by `make bench`; part 1 there counts the walks and their CPU.)
    The probe's own CPU time and its share of one CPU go into every record, with the CPUs it ran on where those were
    none of the cell's (`off_cell_cpus`)."""

    pid: int
    memory_interval_s: float = 2.0
    memory_backoff: int = 4  # the scheduled memory interval grows to at most this many times memory_interval_s
    # what reads /dev/shm's use: the machine's (other users' segments are noise), or the cell's private one
    shm_reader: Callable[[], int] = shm_used
    started: float = field(default_factory=time.perf_counter)
    shm_baseline: int = -1  # the use when the probe started (set then)
    samples: int = 0
    full_samples: int = 0
    window_end_samples: int = 0  # full samples taken when the cell marked the end of its last window
    rss_peak: int = 0
    pss_peak: int = 0
    uss_peak: int = 0
    main_uss_peak: int = 0
    workers_uss_peak: int = 0
    shm_peak: int = 0
    fds_peak: int = 0
    procs_peak: int = 0
    timeline: list = field(default_factory=list)  # [t_s, n_procs, main_pss, workers_pss, main_uss, workers_uss]
    seen: dict = field(default_factory=dict)  # pid -> (ppid, name) of every process of the tree ever sampled
    sample_cost_s: float = 0.0
    sample_cpu_s: float = 0.0  # CPU time of the sampling thread inside sample()
    off_cell_cpus: list = field(default_factory=list)  # where the probe ran off the cell's cores (off_cell_cpus())
    cpu_last: dict = field(default_factory=dict)  # pid -> (user+system) seconds last seen
    _procs: dict = field(default_factory=dict, repr=False)  # pid -> psutil.Process, kept between ticks
    _last_full: float = float("-inf")
    _interval: float = -1.0  # the scheduled memory interval now (memory_interval_s when set to < 0)
    _rss_at_full: int = 0  # the highest RSS seen by a full sample

    def __post_init__(self) -> None:
        if self._interval < 0:
            self._interval = self.memory_interval_s
        if self.shm_baseline < 0:
            self.shm_baseline = self.shm_reader()

    def _process(self, pid: int) -> psutil.Process:
        p = self._procs.get(pid)
        if p is None:
            p = self._procs[pid] = psutil.Process(pid)
            try:
                self.seen[pid] = (p.ppid(), p.name())
            except psutil.Error:
                self.seen[pid] = (None, "?")
        return p

    def sample(self, walk: bool = False) -> None:
        """One tick; `walk`: read PSS and USS now, whatever the schedule (the cell's last window has ended)."""
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            self._sample(t0, walk)
        finally:
            self.sample_cost_s += time.perf_counter() - t0
            self.sample_cpu_s += time.thread_time() - c0

    def _sample(self, t0: float, walk: bool = False) -> None:
        procs = []
        rss = fds = 0
        for pid in tree_pids(self.pid):
            try:
                p = self._process(pid)
                with p.oneshot():
                    rss += p.memory_info().rss
                    fds += p.num_fds()
                    ct = p.cpu_times()
            except psutil.Error:
                continue
            self.cpu_last[pid] = ct.user + ct.system
            procs.append(p)
        if not procs:
            return
        self.samples += 1
        self.rss_peak = max(self.rss_peak, rss)
        self.fds_peak = max(self.fds_peak, fds)
        self.procs_peak = max(self.procs_peak, len(procs))
        self.shm_peak = max(self.shm_peak, self.shm_reader() - self.shm_baseline)
        if walk or t0 - self._last_full >= self._interval or rss > RISE * self._rss_at_full:
            self._full_sample(procs, t0, rss)
            self.window_end_samples += walk

    def _full_sample(self, procs: list, t0: float, rss: int) -> None:
        pss = uss = 0
        main = [0, 0]
        workers = [0, 0]
        alive = 0
        for p in procs:
            try:
                m = p.memory_full_info()
            except psutil.Error:
                continue
            alive += 1
            pss += m.pss
            uss += m.uss
            slot = main if p.pid == self.pid else workers
            slot[0] += m.pss
            slot[1] += m.uss
        # a new high, not the RSS of this sample: a tree whose RSS swings (batches mapped in and out of shared
        # memory) would otherwise pay a full sample at every swing above a low one
        self._last_full, self._rss_at_full = t0, max(self._rss_at_full, rss)
        self.full_samples += 1
        risen = pss > RISE * self.pss_peak or uss > RISE * self.uss_peak or workers[1] > RISE * self.workers_uss_peak
        cap = self.memory_backoff * self.memory_interval_s
        self._interval = self.memory_interval_s if risen else min(2 * self._interval, cap)
        self.pss_peak = max(self.pss_peak, pss)
        self.uss_peak = max(self.uss_peak, uss)
        self.main_uss_peak = max(self.main_uss_peak, main[1])
        self.workers_uss_peak = max(self.workers_uss_peak, workers[1])
        self.timeline.append([round(t0 - self.started, 4), alive, main[0], workers[0], main[1], workers[1]])

    def metrics(self) -> dict:
        workers_cpu = sum(v for pid, v in self.cpu_last.items() if pid != self.pid)
        return {
            "memory_bytes": {
                "rss_peak": self.rss_peak,
                "pss_peak": self.pss_peak,
                "uss_peak": self.uss_peak,
                "main_uss_peak": self.main_uss_peak,
                "workers_uss_peak": self.workers_uss_peak,
            },
            "shm_peak_bytes": max(self.shm_peak, 0),
            "open_fds_peak": self.fds_peak,
            "processes_peak": self.procs_peak,
            "probe": {
                "samples": self.samples,
                "memory_samples": self.full_samples,
                "memory_samples_at_window_end": self.window_end_samples,
                "cost_s": round(self.sample_cost_s, 4),
                "cpu_s": round(self.sample_cpu_s, 4),
                "cpu_share": round(self.sample_cpu_s / max(time.perf_counter() - self.started, 1e-9), 5),
                "workers_cpu_s_sampled": round(workers_cpu, 4),
                "off_cell_cpus": list(self.off_cell_cpus),
            },
            "memory_timeline": self.timeline,
        }


def off_cell_cpus(cell_cores: int) -> list[int]:
    """The CPUs this thread may use that a cell of `cell_cores` cores, forked from it, does not: the cell takes the
    first `cell_cores` of the CPUs it inherits (loaderbench.measure.cell_process.pin_cores). [] where it takes
    them all: the probe then shares the cell's cores, and its CPU share in the record says what it took."""
    return sorted(os.sched_getaffinity(0))[cell_cores:]


# --- what a cell leaves behind: processes and /dev/shm entries -------------------------------------------

SHM_PREFIXES = ("torch_", "sem.mp-", "psm_")  # torch tensors (file_system / failed allocations), multiprocessing


def is_cleanup_helper(p: psutil.Process, shm_manager: bool = False) -> bool:
    """A helper that cleans up after a tree once its processes are gone, so it is killed last, after a grace
    period: multiprocessing's resource tracker (unlinks leaked semaphores; exits as soon as its pipe closes).
    torch_shm_manager is no such helper by default: it lingers 2 s after its last client before unlinking the
    file_system segments it tracks, so it is killed with the rest and sweep_shm() unlinks them instead. With
    `shm_manager` (a cell with its own /dev/shm, whose leftovers are counted) it is one, so the count shows
    what torch itself leaves behind."""
    try:
        if shm_manager and p.name().startswith("torch_shm_manag"):
            return True
        return any("multiprocessing.resource_tracker" in a for a in p.cmdline())
    except psutil.Error:
        return False


def _live(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def cell_processes(
    pgid: int, extra_pids=(), adopted_from: int | None = None, exclude=(), unmarked: bool = True
) -> list[psutil.Process]:
    """Live processes of a cell: its process group, `extra_pids` (a cgroup's), and, when `adopted_from` is
    given, that process's children (orphans re-parented to a subreaper runner) not in `exclude`, all with
    their descendants. `unmarked = False`: only the adopted children that carry the cell's CELL_MARK (the
    runner has other children, whose orphans it adopts too)."""
    found: dict[int, psutil.Process] = {}
    roots: list[psutil.Process] = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                roots.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error, OSError):
            continue
    for pid in extra_pids:
        try:
            roots.append(psutil.Process(pid))
        except psutil.Error:
            pass
    if adopted_from is not None:
        try:
            adopted = [c for c in psutil.Process(adopted_from).children() if c.pid not in exclude]
            roots += [c for c in adopted if unmarked or _marked(c, pgid)]
        except psutil.Error:
            pass
    for r in roots:
        for p in [r] + _descendants(r):
            if p.pid not in exclude and p.pid != os.getpid() and _live(p):
                found.setdefault(p.pid, p)
    return list(found.values())


def _marked(p: psutil.Process, pgid: int) -> bool:
    """Whether `p` was started by the cell whose process group is `pgid` (its environment carries the mark)."""
    try:
        return p.environ().get(CELL_MARK) == str(pgid)
    except psutil.Error:  # gone, a zombie (reaped elsewhere) or not ours to read
        return False


def _descendants(p: psutil.Process) -> list[psutil.Process]:
    try:
        return p.children(recursive=True)
    except psutil.Error:
        return []


def shm_snapshot() -> set[str]:
    try:
        return set(os.listdir(SHM))
    except OSError:
        return set()


def _held_inodes(dev: int) -> set[int]:
    """Inodes on the /dev/shm filesystem (device `dev`) that some live process has open or mapped."""
    held: set[int] = set()
    major, minor = os.major(dev), os.minor(dev)
    dev_text = f"{major:02x}:{minor:02x}"
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as fh:
                for line in fh:
                    parts = line.split(None, 5)
                    if len(parts) >= 5 and parts[3] == dev_text and parts[4] != "0":
                        held.add(int(parts[4]))
        except (OSError, ValueError):
            pass
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                st = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if st.st_dev == dev:
                held.add(st.st_ino)
    return held


def _creator_pid(name: str) -> int | None:
    if name.startswith("torch_"):
        try:
            return int(name.split("_")[1])
        except (IndexError, ValueError):
            return None
    return None


def sweep_shm(before: set[str], cell_pids: set[int], shm: str = SHM) -> list[str]:
    """Remove /dev/shm entries a finished cell left behind; returns their names.

    An entry is the cell's leftover when it appeared while the cell ran (not in `before`), is torch's or
    multiprocessing's (SHM_PREFIXES), no live process has it open or mapped, and, for torch's segments,
    whose name carries the creating pid, that pid is the cell's or no longer exists (a segment of another
    live process may be in flight between its processes, unmapped for a moment: left alone).
    Run it only once every process of the cell is gone.
    """
    try:
        new = [n for n in os.listdir(shm) if n not in before and n.startswith(SHM_PREFIXES)]
    except OSError:
        return []
    if not new:
        return []
    try:
        dev = os.stat(shm).st_dev
    except OSError:
        return []
    held = _held_inodes(dev)
    removed = []
    for name in new:
        path = os.path.join(shm, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_ino in held:
            continue
        creator = _creator_pid(name)
        if creator is not None and creator not in cell_pids and pid_alive(creator):
            continue
        try:
            os.unlink(path)
            removed.append(name)
        except OSError:
            pass
    return sorted(removed)

"""The loader's workers seen from the watched process: CPU per worker and in all, USS and PSS growth (copy-on-write),
open file descriptors, /dev/shm's use, and the accelerator's utilization where CUDA is in use
(loaderbench.doctor.accelerator), sampled by a background thread while the loader is measured."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable

import psutil

from loaderbench.doctor.accelerator import UtilizationSampler

#: Seconds between samples of the cheap readings: CPU times, RSS, open files, /dev/shm (about 0.2 ms a worker).
INTERVAL_S = 0.5
#: USS and PSS need the kernel to walk a worker's page tables (20-30 ms of CPU for a worker forked from a process
#: that imported torch, holding its memory map's lock, so that a worker mapping its next batch's shared memory
#: waits). They are read outside the measured steps where the loop allows, at the start (`prepare`, during the
#: warm-up) and at the end (`stop`). Within the measured steps, a worker new to the sampler is walked at once; the
#: others whenever a worker's RSS passes the RSS of its last walk by RISE, and on a schedule that starts at
#: MEMORY_INTERVAL_S and doubles, up to MEMORY_BACKOFF times, while memory stays flat; either only while the walks
#: made within the measured steps stay within WALK_SHARE of their time (of one CPU).
MEMORY_INTERVAL_S = 2.0
MEMORY_BACKOFF = 3
RISE = 1.05
WALK_SHARE = 0.005


def _shm_used() -> int | None:
    try:
        return shutil.disk_usage("/dev/shm").used
    except OSError:
        return None


def _shm_total() -> int | None:
    try:
        return shutil.disk_usage("/dev/shm").total
    except OSError:
        return None


def worker_pids(iterator) -> list[int]:
    """The pids of a DataLoader iterator's worker processes (none for a single-process or thread loader)."""
    pids = []
    for w in getattr(iterator, "_workers", None) or []:
        pid = getattr(w, "pid", None)
        if isinstance(pid, int):
            pids.append(pid)
    return pids


class WorkerSampler:
    """Samples the workers ``pids()`` names, and this process, every ``interval_s`` until stopped; their USS and PSS
    as MEMORY_INTERVAL_S describes.

    ``prepare`` (optional, while the loop warms up) walks the workers' page tables in a thread of its own: the
    baseline of their memory, outside the measured steps. ``start`` waits for that walk if it is still running,
    then reads the cheap values in the caller's thread (the CPU times the run's share is counted from), the walk's
    USS and PSS as this first sample's; a worker it did not walk is walked as the background thread's first task.
    ``stop`` reads everything once more, in the caller's thread, after the last measured step. ``cpu_s`` is the
    samples' own CPU time, ``window_cpu_s`` the part of it taken between ``start`` and ``stop`` (the rest is at the
    edges of the measured steps)."""

    def __init__(self, pids: Callable[[], list[int]], interval_s: float = INTERVAL_S):
        self._pids = pids
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prepared: threading.Thread | None = None
        self._procs: dict[int, psutil.Process] = {}
        self.samples: list[dict] = []
        self._me = psutil.Process(os.getpid())
        self.gpu = UtilizationSampler()
        self._walked: dict[str, dict] = {}  # per worker: its last walk's uss, pss, rss and time
        self._walk_every = MEMORY_INTERVAL_S
        self._walk_at = 0.0  # when the next scheduled walk is due (perf_counter)
        self._started: float | None = None  # when the measured steps began (perf_counter)
        self._window_walk_cpu_s = 0.0  # the CPU of the walks made within the measured steps
        self._last_walk_cpu_s = 0.0  # the CPU of the last walk: what the next one is expected to cost
        self.walks = 0
        self.cpu_s = 0.0  # the samples' own CPU time, in the threads that took them (the page-table walks included)
        self.window_cpu_s = 0.0

    def prepare(self) -> None:
        """Walk the current workers' page tables in a thread of its own, while the loop goes on."""
        if self._prepared is None and self._thread is None:
            self._prepared = threading.Thread(target=self._walk_now, name="loaderbench-doctor-baseline", daemon=True)
            self._prepared.start()

    def start(self) -> None:
        if self._prepared is not None:
            self._prepared.join()
            self._prepared = None
        self._sample(walk=False, adopt=True)
        self._started = self.samples[-1]["t"]
        self._thread = threading.Thread(target=self._run, name="loaderbench-doctor-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._started = None
        self._sample(walk=True)

    def _run(self) -> None:
        if self.samples and any(not w["walked"] for w in self.samples[-1]["workers"].values()):
            self._sample(walk=True)  # workers the baseline walk did not see
        while not self._stop.wait(self._interval):
            self._sample()

    def _walk_now(self) -> None:
        c0 = time.thread_time()
        cheap = self._cheap()
        if cheap:
            self._walk_and_schedule(cheap, time.perf_counter())
        self.cpu_s += time.thread_time() - c0

    def _walk_and_schedule(self, cheap: dict[str, dict], now: float) -> None:
        """Walk the workers in `cheap`, set the next scheduled walk, and keep what the walk cost."""
        w0 = time.thread_time()
        self._schedule(now, risen=self._walk(cheap, now))
        self._last_walk_cpu_s = time.thread_time() - w0

    def _proc(self, pid: int) -> psutil.Process | None:
        p = self._procs.get(pid)
        if p is None:
            try:
                p = self._procs[pid] = psutil.Process(pid)
            except psutil.Error:
                return None
        return p

    def _due(self, now: float, rss: dict[str, int]) -> bool:
        """Whether this sample walks the page tables: a worker is new; or on schedule, or a worker's RSS has risen,
        while the walks within the measured steps stay within their share."""
        if any(pid not in self._walked for pid in rss):
            return True
        if self._started is not None:
            spent = self._window_walk_cpu_s + self._last_walk_cpu_s
            if spent > WALK_SHARE * (now - self._started):
                return False
        if now >= self._walk_at:
            return True
        return any(r > RISE * self._walked[pid]["rss"] for pid, r in rss.items())

    def _cheap(self) -> dict[str, dict]:
        """The cheap readings of every worker: CPU time, RSS, open files."""
        cheap: dict[str, dict] = {}
        for pid in self._pids():
            p = self._proc(pid)
            if p is None:
                continue
            try:
                with p.oneshot():
                    cpu = p.cpu_times()
                    cheap[str(pid)] = {"cpu_s": cpu.user + cpu.system, "rss": p.memory_info().rss, "fds": p.num_fds()}
            except psutil.Error:
                continue
        return cheap

    def _sample(self, walk: bool | None = None, adopt: bool = False) -> None:
        """One sample; ``walk``: read USS and PSS (True), not (False), or when due (None); ``adopt``: a worker's
        walk since its last sample counts as this sample's."""
        c0 = time.thread_time()
        now = time.perf_counter()
        cheap = self._cheap()
        if walk is None:
            walk = self._due(now, {pid: w["rss"] for pid, w in cheap.items()})
        if walk and cheap:
            self._walk_and_schedule(cheap, now)
            if self._started is not None:
                self._window_walk_cpu_s += self._last_walk_cpu_s
        if adopt:
            for key in cheap:
                if key in self._walked:
                    self._walked[key]["at"] = now
        workers = {}
        for key, w in cheap.items():
            mem = self._walked.get(key, {})
            # uss and pss: the last walk's, and whether this sample made it (`walked`)
            workers[key] = {**w, "uss": mem.get("uss"), "pss": mem.get("pss"), "walked": mem.get("at") == now}
        cpu = self._me.cpu_times()
        self.samples.append(
            {
                "t": now,
                "main_cpu_s": cpu.user + cpu.system,
                "main_fds": self._safe(self._me.num_fds),
                "shm_used": _shm_used(),
                "workers": workers,
            }
        )
        self.gpu.maybe_sample()
        spent = time.thread_time() - c0
        self.cpu_s += spent
        if self._started is not None:
            self.window_cpu_s += spent

    def _walk(self, cheap: dict[str, dict], now: float) -> bool:
        """Read each worker's USS and PSS; whether any is new or its USS has risen by RISE."""
        risen = False
        for key, w in cheap.items():
            p = self._proc(int(key))
            try:
                mem = p.memory_full_info() if p is not None else None  # one walk gives both
            except psutil.Error:
                continue
            if mem is None:
                continue
            before = self._walked.get(key)
            risen = risen or before is None or mem.uss > RISE * before["uss"]
            self._walked[key] = {"uss": mem.uss, "pss": getattr(mem, "pss", None), "rss": w["rss"], "at": now}
        self.walks += 1
        return risen

    def _schedule(self, now: float, risen: bool) -> None:
        """The next scheduled walk: sooner again after one that found memory risen, later after a flat one."""
        if risen:
            self._walk_every = MEMORY_INTERVAL_S
        else:
            self._walk_every = min(self._walk_every * 2, MEMORY_INTERVAL_S * 2**MEMORY_BACKOFF)
        self._walk_at = now + self._walk_every

    @staticmethod
    def _safe(f):
        try:
            return f()
        except psutil.Error:
            return None


def summarize(
    samples: list[dict], cores: float, sampler_cpu_s: float | None = None, sampler_window_cpu_s: float | None = None
) -> dict:
    """CPU per worker and in all (cores' worth over the sampled time), USS and PSS at start and end per worker,
    /dev/shm's peak over the run, open files at the end, the sampler's own CPU time (in all, and within the measured
    steps); and the series for the page."""
    out: dict = {"samples": len(samples), "cores_allowed": cores, "shm_total": _shm_total()}
    out["sampler_cpu_s"] = sampler_cpu_s
    out["sampler_window_cpu_s"] = sampler_window_cpu_s
    if len(samples) < 2:
        return out
    first, last = samples[0], samples[-1]
    span = last["t"] - first["t"]
    out["span_s"] = span
    per_worker = {}
    for pid, end in last["workers"].items():
        seen = [s["workers"][pid] for s in samples if pid in s["workers"]]
        t_seen = [s["t"] for s in samples if pid in s["workers"]]
        dt = t_seen[-1] - t_seen[0]
        walked = [w for w in seen if w.get("walked")] or [{}]  # USS and PSS: the first and the last walk
        m0, m1 = walked[0], walked[-1]
        per_worker[pid] = {
            "cpu_cores": (end["cpu_s"] - seen[0]["cpu_s"]) / dt if dt > 0 else None,
            "uss_start": m0.get("uss"),
            "uss_end": m1.get("uss"),
            "uss_growth": _growth(m0.get("uss"), m1.get("uss")),
            # PSS: each worker's share of the pages it shares (the parent's, copied-on-write or not)
            "pss_start": m0.get("pss"),
            "pss_end": m1.get("pss"),
            "pss_growth": _growth(m0.get("pss"), m1.get("pss")),
            "memory_walks": sum(1 for w in seen if w.get("walked")),
            "fds": end["fds"],
        }
    out["workers"] = per_worker
    known = [w["cpu_cores"] for w in per_worker.values() if w["cpu_cores"] is not None]
    out["workers_cpu_cores"] = sum(known) if known else 0.0
    out["main_cpu_cores"] = (last["main_cpu_s"] - first["main_cpu_s"]) / span if span > 0 else None
    shm = [s["shm_used"] for s in samples if s["shm_used"] is not None]
    out["shm_start"] = shm[0] if shm else None
    out["shm_peak"] = max(shm) if shm else None
    out["main_fds"] = last.get("main_fds")
    t0 = first["t"]
    walks = [s for s in samples if any(w.get("walked") for w in s["workers"].values())]
    out["series"] = {
        "t_s": [round(s["t"] - t0, 3) for s in samples],
        "workers_cpu_s": [round(sum(w["cpu_s"] for w in s["workers"].values()), 4) for s in samples],
        "main_cpu_s": [round(s["main_cpu_s"], 4) for s in samples],
        "shm_used": [s["shm_used"] for s in samples],
        # memory: at the samples that walked the workers' page tables
        "memory_t_s": [round(s["t"] - t0, 3) for s in walks],
        "workers_uss": [sum(w.get("uss") or 0 for w in s["workers"].values()) for s in walks],
        "workers_pss": [sum(w.get("pss") or 0 for w in s["workers"].values()) for s in walks],
    }
    return out


def _growth(start: int | None, end: int | None) -> int | None:
    return end - start if start is not None and end is not None else None

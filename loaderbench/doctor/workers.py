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

#: Seconds between samples; USS needs the kernel to walk page tables, so it is not read more often.
INTERVAL_S = 0.5


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
    """Samples the workers ``pids()`` names, and this process, every ``interval_s`` until stopped."""

    def __init__(self, pids: Callable[[], list[int]], interval_s: float = INTERVAL_S):
        self._pids = pids
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._procs: dict[int, psutil.Process] = {}
        self.samples: list[dict] = []
        self._me = psutil.Process(os.getpid())
        self.gpu = UtilizationSampler()

    def start(self) -> None:
        self._sample()
        self._thread = threading.Thread(target=self._run, name="loaderbench-doctor-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self._sample()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def _proc(self, pid: int) -> psutil.Process | None:
        p = self._procs.get(pid)
        if p is None:
            try:
                p = self._procs[pid] = psutil.Process(pid)
            except psutil.Error:
                return None
        return p

    def _sample(self) -> None:
        workers = {}
        for pid in self._pids():
            p = self._proc(pid)
            if p is None:
                continue
            try:
                with p.oneshot():
                    cpu = p.cpu_times()
                    mem = p.memory_full_info()  # one walk of the page tables gives both
                    workers[str(pid)] = {
                        "cpu_s": cpu.user + cpu.system,
                        "uss": mem.uss,
                        "pss": getattr(mem, "pss", None),
                        "fds": p.num_fds(),
                    }
            except psutil.Error:
                continue
        cpu = self._me.cpu_times()
        self.samples.append(
            {
                "t": time.perf_counter(),
                "main_cpu_s": cpu.user + cpu.system,
                "main_fds": self._safe(self._me.num_fds),
                "shm_used": _shm_used(),
                "workers": workers,
            }
        )
        self.gpu.maybe_sample()

    @staticmethod
    def _safe(f):
        try:
            return f()
        except psutil.Error:
            return None


def summarize(samples: list[dict], cores: float) -> dict:
    """CPU per worker and in all (cores' worth over the sampled time), USS and PSS at start and end per worker,
    /dev/shm's peak over the run, open files at the end; and the series for the page."""
    out: dict = {"samples": len(samples), "cores_allowed": cores, "shm_total": _shm_total()}
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
        per_worker[pid] = {
            "cpu_cores": (end["cpu_s"] - seen[0]["cpu_s"]) / dt if dt > 0 else None,
            "uss_start": seen[0]["uss"],
            "uss_end": end["uss"],
            "uss_growth": end["uss"] - seen[0]["uss"],
            # PSS: each worker's share of the pages it shares (the parent's, copied-on-write or not)
            "pss_start": seen[0].get("pss"),
            "pss_end": end.get("pss"),
            "pss_growth": end["pss"] - seen[0]["pss"]
            if end.get("pss") is not None and seen[0].get("pss") is not None
            else None,
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
    out["series"] = {
        "t_s": [round(s["t"] - t0, 3) for s in samples],
        "workers_cpu_s": [round(sum(w["cpu_s"] for w in s["workers"].values()), 4) for s in samples],
        "main_cpu_s": [round(s["main_cpu_s"], 4) for s in samples],
        "workers_uss": [sum(w["uss"] for w in s["workers"].values()) for s in samples],
        "workers_pss": [sum(w.get("pss") or 0 for w in s["workers"].values()) for s in samples],
        "shm_used": [s["shm_used"] for s in samples],
    }
    return out

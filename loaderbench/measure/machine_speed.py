"""The machine's speed, measured beside every repetition: a fixed reference workload right before and right after
the measured window, on the cell's own cores, in the cell's own process, plus what the kernel says about the window.

Cloud VMs and shared nodes change a core's speed from minute to minute (a busy sibling hyperthread, the host's
frequency), and the guest does not see it as steal time. A fixed workload timed on the same cores is what sees it:
if the reference ran 30% slower, so did the loader, and the record says so. The reference is two fixed pieces of
work, each timed on every core of the cell (at most REFERENCE_MAX_CORES of them):

- a pure-Python loop (the `cpu` workload's own loop): its rate is in reference units per second, one unit being
  PY_ITERATIONS iterations;
- the decode of one fixed JPEG, made once in memory from a seeded array (no file, the same bytes everywhere):
  its rate is in decodes per second.

A rate is the inverse of the median time of its repetitions, so one preemption does not move it. Around the
window the cell also records:

- the kernel's steal time on the cell's cores (/proc/stat): time the hypervisor gave to another guest;
- the cores' current frequency (/sys/devices/system/cpu/cpuN/cpufreq/scaling_cur_freq), None where the machine
  does not expose it (most VMs);
- the CPU time other processes used on the cell's cores: the cores' busy time in /proc/stat (user, nice, system,
  irq, softirq) minus the CPU time of the cell's process tree (/proc/PID/stat, each live process's own and its
  reaped children's time). It sees every process of the machine that ran on those cores, kernel threads
  included. It cannot tell apart interrupt work done for the cell (its network, its disk) from anyone else's,
  so that counts as others'; it misses a process of the cell that left the tree without being reaped inside it
  (an orphan adopted by the runner); and /proc/stat counts in clock ticks (10 ms), so over a one-second window
  on one core its resolution is about 1%.
"""

from __future__ import annotations

import functools
import io
import os
import statistics
import time
from typing import Any

from loaderbench.measure.probes import CELL_MARK, children, tree_pids

PY_ITERATIONS = 100_000  # one reference unit: about 13 ms of the loop on a 2020s x86 core
PY_REPEATS = 3  # units timed per core, each side of the window
JPEG_REPEATS = 8  # decodes timed per core, each side of the window
JPEG_SIDE = 256  # pixels, square
REFERENCE_MAX_CORES = 4  # a cell on more cores has its first four timed: the cost stays bounded
CLK_TCK = os.sysconf("SC_CLK_TCK")
BUSY_FIELDS = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq in a /proc/stat cpu line
STEAL_FIELD = 7
TOTAL_FIELDS = 8  # user ... steal; guest and guest_nice are already inside user and nice


def python_unit(seed: int = 1) -> int:
    """One reference unit: PY_ITERATIONS steps of the `cpu` workload's linear congruential loop."""
    x = seed | 1
    for _ in range(PY_ITERATIONS):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


@functools.cache
def reference_jpeg() -> bytes:
    """The fixed JPEG: a smooth gradient with seeded noise (so it compresses like a photograph, not a flat field),
    encoded once per process at quality 90."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(20240607)
    ramp = np.linspace(0, 200, JPEG_SIDE, dtype=np.float32)
    base = ramp[None, :, None] * np.array([1.0, 0.6, 0.3], dtype=np.float32) + ramp[:, None, None] * 0.2
    noisy = np.clip(base + rng.normal(0, 12, size=(JPEG_SIDE, JPEG_SIDE, 3)), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noisy).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def decode_reference() -> None:
    from PIL import Image

    with Image.open(io.BytesIO(reference_jpeg())) as im:
        im.convert("RGB").load()


def _rate(work, repeats: int) -> float:
    """Runs per second of `work`, from the median time of `repeats` runs."""
    clock = time.perf_counter
    times = []
    for _ in range(repeats):
        t0 = clock()
        work()
        times.append(clock() - t0)
    return 1.0 / max(statistics.median(times), 1e-9)


def run_reference(cpus: list[int]) -> dict[str, Any]:
    """Time the reference on each of `cpus` (the calling thread pinned to one at a time, then given back the CPUs
    it had before); rates are the means over the cores."""
    timed = cpus[:REFERENCE_MAX_CORES]
    reference_jpeg()  # made before timing: its encoding is no part of the reference
    had = os.sched_getaffinity(0)
    t0 = time.perf_counter()
    python, jpeg = [], []
    try:
        for cpu in timed:
            os.sched_setaffinity(0, [cpu])
            python.append(_rate(python_unit, PY_REPEATS))
            jpeg.append(_rate(decode_reference, JPEG_REPEATS))
    finally:
        os.sched_setaffinity(0, had)
    return {
        "python_per_s": statistics.fmean(python),
        "jpeg_per_s": statistics.fmean(jpeg),
        "python_per_core": python,
        "jpeg_per_core": jpeg,
        "cpus": timed,
        "seconds": time.perf_counter() - t0,
    }


def cpu_ticks(cpus: list[int], stat: str = "/proc/stat") -> dict[int, list[int]] | None:
    """Each of `cpus`' /proc/stat counters (clock ticks), None when /proc/stat cannot be read."""
    wanted = {f"cpu{c}": c for c in cpus}
    out: dict[int, list[int]] = {}
    try:
        with open(stat) as fh:
            for line in fh:
                name, _, rest = line.partition(" ")
                if name in wanted:
                    out[wanted[name]] = [int(v) for v in rest.split()]
    except (OSError, ValueError):
        return None
    return out if len(out) == len(cpus) else None


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid`'s process tree: every live process's own time plus that of the children it reaped
    (cutime, cstime), so a worker that exited and was reaped inside the tree is still counted, once."""
    total = 0
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
            total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
        except (OSError, ValueError, IndexError):
            continue
    return total / CLK_TCK


def _carries_mark(pid: int, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return mark in fh.read().split(b"\0")
    except OSError:  # gone, or not ours to read
        return False


def adopted_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds of each program the cell `pid` started that has left its tree: a daemonised torch_shm_manager
    (one per process that shares tensors under file_system) is re-parented to the runner (a subreaper) or to init,
    and carries the cell's mark (CELL_MARK) in its environment. Keyed by pid, so that one that exits between two
    readings drops out of both rather than counting against the cell."""
    mark = f"{CELL_MARK}={pid}".encode()
    out: dict[int, float] = {}
    for parent in {os.getppid(), 1}:
        for child in children(parent):
            if child != pid and child not in out and _carries_mark(child, mark):
                out[child] = tree_cpu_s(child)
    return out


def cpu_mhz(cpus: list[int]) -> list[float] | None:
    """The cores' current frequency in MHz, None where cpufreq is not exposed."""
    out = []
    for c in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq") as fh:
                out.append(int(fh.read()) / 1000.0)
        except (OSError, ValueError):
            return None
    return out


def _change(before: float, after: float) -> float:
    return after / before - 1.0 if before > 0 else 0.0


class MachineWatch:
    """`start()` right before the measured window, `stop()` right after it (once the workers are gone): the
    reference on both sides and what the kernel counted in between, as the record's `machine` block."""

    def __init__(self, cpus: list[int]):
        self.cpus = list(cpus)
        self.pid = os.getpid()

    def start(self) -> None:
        self.before = run_reference(self.cpus)
        self.mhz_before = cpu_mhz(self.cpus)
        self.cell_cpu0 = tree_cpu_s(self.pid)
        self.adopted0 = adopted_cpu_s(self.pid)
        self.ticks0 = cpu_ticks(self.cpus)
        self.t0 = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        window_s = time.perf_counter() - self.t0
        ticks1 = cpu_ticks(self.cpus)
        adopted = adopted_cpu_s(self.pid)
        adopted_s = sum(cpu - self.adopted0.get(p, 0.0) for p, cpu in adopted.items())
        cell_cpu_s = tree_cpu_s(self.pid) - self.cell_cpu0 + adopted_s
        mhz_after = cpu_mhz(self.cpus)
        after = run_reference(self.cpus)
        before = self.before
        out: dict[str, Any] = {
            "before": before,
            "after": after,
            "python_per_s": (before["python_per_s"] + after["python_per_s"]) / 2,
            "jpeg_per_s": (before["jpeg_per_s"] + after["jpeg_per_s"]) / 2,
            "python_change": _change(before["python_per_s"], after["python_per_s"]),
            "jpeg_change": _change(before["jpeg_per_s"], after["jpeg_per_s"]),
            "window_s": window_s,
            "cell_cpu_s": cell_cpu_s,
            "adopted_cpu_s": adopted_s,
            "cpu_mhz_before": self.mhz_before,
            "cpu_mhz_after": mhz_after,
            "cpu_mhz": statistics.fmean(self.mhz_before + mhz_after) if self.mhz_before and mhz_after else None,
            "cost_s": before["seconds"] + after["seconds"],
            **_kernel_view(self.ticks0, ticks1, cell_cpu_s, window_s, len(self.cpus)),
        }
        return out


def _kernel_view(ticks0, ticks1, cell_cpu_s: float, window_s: float, cores: int) -> dict[str, float | None]:
    """Steal and others' share of the cell's cores over the window, from two /proc/stat readings."""
    if ticks0 is None or ticks1 is None or window_s <= 0:
        return {"steal_fraction": None, "others_cpu_s": None, "others_share": None}
    delta = [[b - a for a, b in zip(ticks0[c], ticks1[c])] for c in ticks0]
    total = sum(sum(d[:TOTAL_FIELDS]) for d in delta)
    busy_s = sum(d[i] for d in delta for i in BUSY_FIELDS if i < len(d)) / CLK_TCK
    steal = sum(d[STEAL_FIELD] for d in delta if len(d) > STEAL_FIELD)
    others_s = max(0.0, busy_s - cell_cpu_s)
    return {
        "steal_fraction": steal / total if total > 0 else 0.0,
        "others_cpu_s": others_s,
        "others_share": min(1.0, others_s / (window_s * cores)),
    }

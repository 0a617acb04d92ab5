"""The accelerator's utilization over the watched run: where the script has initialised CUDA, the share of time a
kernel ran on its GPU, as `nvidia-smi` reports it (the NVML counter torch.cuda.utilization reads, without needing
the pynvml package), sampled at most once a second beside the workers' samples.

The GPU read is the one CUDA_VISIBLE_DEVICES maps the process's current device to; where it names GPUs by UUID or MIG
instance, the mean over every GPU nvidia-smi lists."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time

#: Seconds between utilization samples: NVML's own sample period is 1/6 s to 1 s
INTERVAL_S = 1.0
QUERY = ["--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]


def cuda_device() -> int | None:
    """The CUDA device this process has initialised (None: it has not, or torch is not loaded)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.current_device())


def physical_index(device: int) -> int | None:
    """The nvidia-smi index of CUDA device `device`, through CUDA_VISIBLE_DEVICES (None: not a list of indices)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or not visible.strip():
        return device
    parts = [p.strip() for p in visible.split(",")]
    if not all(p.isdigit() for p in parts) or device >= len(parts):
        return None
    return int(parts[device])


def query(index: int | None, timeout_s: float = 5.0) -> dict | None:
    """One reading: {"t", "utilization" (%), "memory_used_mib"} of GPU `index` (the mean and sum over every GPU
    nvidia-smi lists when None); None where nvidia-smi is missing or answers nothing usable."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, *QUERY], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    rows = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and all(p.replace(".", "", 1).isdigit() for p in parts):
            rows.append((int(parts[0]), float(parts[1]), float(parts[2])))
    if index is not None:
        rows = [r for r in rows if r[0] == index]
    if not rows:
        return None
    return {
        "t": time.perf_counter(),
        "utilization": sum(r[1] for r in rows) / len(rows),
        "memory_used_mib": sum(r[2] for r in rows),
    }


class UtilizationSampler:
    """`maybe_sample()`, called at the workers' cadence: a reading at most every INTERVAL_S while CUDA is in use."""

    def __init__(self, interval_s: float = INTERVAL_S):
        self.interval_s = interval_s
        self.readings: list[dict] = []
        self.gpu_index: int | None = None
        self._next = 0.0
        self._dead = shutil.which("nvidia-smi") is None

    def maybe_sample(self) -> None:
        now = time.perf_counter()
        if self._dead or now < self._next:
            return
        device = cuda_device()
        if device is None:
            return
        self._next = now + self.interval_s
        self.gpu_index = physical_index(device)
        reading = query(self.gpu_index)
        if reading is None:
            self._dead = True  # nvidia-smi does not answer: asking again would only cost the script
            return
        self.readings.append(reading)


def summarize(readings: list[dict], t0: float | None = None) -> dict | None:
    """The utilization over the run: mean, median and the series (seconds since `t0`, default the first reading);
    None without readings (no CUDA in use, or no nvidia-smi)."""
    if not readings:
        return None
    util = [r["utilization"] for r in readings]
    start = readings[0]["t"] if t0 is None else t0
    return {
        "samples": len(readings),
        "utilization_mean": sum(util) / len(util),
        "utilization_p50": statistics.median(util),
        "memory_used_mib_peak": max(r["memory_used_mib"] for r in readings),
        "series": {
            "t_s": [round(r["t"] - start, 3) for r in readings],
            "utilization": [r["utilization"] for r in readings],
        },
    }

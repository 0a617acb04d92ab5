"""The cores this process may use: its CPU affinity, its cgroup's CPU quota and Slurm's CPUs per task, the
smallest of those that are set."""

from __future__ import annotations

import os
from pathlib import Path


def _cgroup_v2_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            rel = line[3:].strip().lstrip("/")
            for folder in (root / rel, root):
                f = folder / "cpu.max"
                if f.exists():
                    try:
                        quota, period = f.read_text().split()[:2]
                    except (OSError, ValueError):
                        return None
                    return None if quota == "max" else int(quota) / int(period)
    return None


def _cgroup_v1_quota(root: Path = Path("/sys/fs/cgroup/cpu")) -> float | None:
    try:
        quota = int((root / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def allowed_cores() -> dict:
    """``{"affinity": n, "cgroup_quota": q or None, "slurm_cpus_per_task": n or None, "cores": smallest}``."""
    affinity = len(os.sched_getaffinity(0))
    quota = _cgroup_v2_quota()
    if quota is None:
        quota = _cgroup_v1_quota()
    slurm = os.environ.get("SLURM_CPUS_PER_TASK")
    slurm_n = int(slurm) if slurm and slurm.isdigit() else None
    limits = [float(affinity)] + [x for x in (quota, slurm_n) if x]
    return {"affinity": affinity, "cgroup_quota": quota, "slurm_cpus_per_task": slurm_n, "cores": min(limits)}

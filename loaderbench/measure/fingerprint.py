"""The environment a record was measured in: machine, limits, versions, container image, Slurm ids.

`host_fingerprint()` is collected once per run by the runner; `cell_fingerprint()` inside each cell
process (what that process really had: its CPUs, threads, limits).
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import socket
import subprocess
from functools import lru_cache
from pathlib import Path

import psutil

from loaderbench.locations import checkout_root

LOCK_SHA_FILE = Path("/opt/loaderbench/lock.sha256")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_commit() -> str | None:
    """The commit of the checkout loaderbench runs from (`-dirty` with uncommitted changes); None for an
    installed package, whose folder may well sit inside some other project's git repository."""
    if os.environ.get("LOADERBENCH_GIT_COMMIT"):
        return os.environ["LOADERBENCH_GIT_COMMIT"]
    repo = checkout_root()
    if repo is None:
        return None
    try:
        out = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if out.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


@lru_cache(maxsize=4)
def _image_sha256(path: str) -> str | None:
    """sha256 of a container image file, hashed once per process; None if it cannot be read."""
    # Imported here: loaderbench.datasets brings numpy and Pillow, which only an Apptainer run needs.
    from loaderbench.datasets.manifest import sha256_file

    try:
        return sha256_file(path)
    except OSError:
        return None


def container_info() -> dict:
    """Which image this runs in: Docker (image name + digest passed at run time) or Apptainer (SIF hash)."""
    sif = os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER")
    lock = os.environ.get("LOADERBENCH_LOCK_SHA256")
    if not lock and LOCK_SHA_FILE.exists():
        lock = LOCK_SHA_FILE.read_text().split()[0] if LOCK_SHA_FILE.read_text().strip() else None
    if sif:
        return {
            "container_runtime": "apptainer",
            "container_image": sif,
            "container_digest": ("sha256:" + d) if (d := _image_sha256(sif)) else None,
            "lock_sha256": lock,
        }
    if os.environ.get("LOADERBENCH_IMAGE") or Path("/.dockerenv").exists():
        return {
            "container_runtime": "docker",
            "container_image": os.environ.get("LOADERBENCH_IMAGE"),
            "container_digest": os.environ.get("LOADERBENCH_IMAGE_DIGEST"),
            "lock_sha256": lock,
        }
    return {"container_runtime": None, "container_image": None, "container_digest": None, "lock_sha256": lock}


def _versions() -> dict:
    import numpy
    import PIL
    import torch
    import torchvision
    from PIL import features

    simd = ".post" in PIL.__version__
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": numpy.__version__,
        "pillow": PIL.__version__,
        "pillow_simd": simd,
        "libjpeg_turbo": bool(features.check_feature("libjpeg_turbo")),
        "libjpeg_turbo_version": features.version_feature("libjpeg_turbo"),
        "torch_cuda_build": torch.version.cuda,  # the CUDA the wheel was built for; devices: see gpus
    }


def _gpus() -> list[dict]:
    """GPUs as nvidia-smi sees them. Asked of nvidia-smi, not torch: the runner must never initialise CUDA,
    or the cells it forks could not use it."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            gpus.append({"index": parts[0], "name": parts[1], "driver": parts[2], "memory": parts[3]})
    return gpus


def _slurm() -> dict:
    keys = {
        "job_id": "SLURM_JOB_ID",
        "array_job_id": "SLURM_ARRAY_JOB_ID",
        "array_task_id": "SLURM_ARRAY_TASK_ID",
        "node": "SLURMD_NODENAME",
        "cpus_per_task": "SLURM_CPUS_PER_TASK",
        "partition": "SLURM_JOB_PARTITION",
    }
    found = {k: os.environ[v] for k, v in keys.items() if v in os.environ}
    return found or {}


@lru_cache(maxsize=1)
def default_start_method() -> str | None:
    """The start method a DataLoader given no multiprocessing_context uses with this Python: multiprocessing's
    default (torch.multiprocessing re-exports it), read in a fresh interpreter of this Python, where nothing
    has set it (fork on Linux up to Python 3.13, forkserver from 3.14)."""
    import sys

    try:
        out = subprocess.run(
            [sys.executable, "-I", "-c", "import multiprocessing; print(multiprocessing.get_start_method())"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def host_fingerprint() -> dict:
    from loaderbench.version import __version__

    vm = psutil.virtual_memory()
    try:
        shm = shutil.disk_usage("/dev/shm").total
    except OSError:
        shm = None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {
        "loaderbench": __version__,
        "host": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "logical_cpus": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "mem_total": vm.total,
        "shm_size": shm,
        "ulimit_nofile": [soft, hard],
        "kernel": platform.release(),
        "os": platform.platform(),
        "git_commit": _git_commit(),
        "default_start_method": default_start_method(),
        **_versions(),
        **container_info(),
        "gpus": _gpus(),
        "slurm": _slurm(),
    }


def cell_fingerprint() -> dict:
    """What this cell process really has (called inside it, after pinning)."""
    import torch

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    cuda = torch.cuda.is_available()  # safe here: the cell is the last process to fork workers itself
    return {
        "cuda_available": cuda,
        "cuda_device": torch.cuda.get_device_name(0) if cuda else None,
        "cuda_runtime": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "cpus_allowed": sorted(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "ulimit_nofile_cell": soft,
        "sharing_strategy": torch.multiprocessing.get_sharing_strategy(),
        "slurm": _slurm(),
    }

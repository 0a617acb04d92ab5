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


#: the packages whose versions a fingerprint names, by the key it names them with
PACKAGES = {"torch": "torch", "torchvision": "torchvision", "numpy": "numpy", "pillow": "PIL"}
#: those whose version is read from their version.py when this process has not imported them: torchvision's import
#: takes seconds, and only the cells that use it have it imported (loaderbench.measure.warm)
READ_NOT_IMPORTED = ("torchvision",)


def package_versions(import_missing: bool = True) -> dict:
    """Python's and the packages' versions, each as the package itself says (`torch.__version__`, with its local
    build label). ``import_missing=False``: only packages this process has already imported (the others None), for a
    process that must not pay an import for a version (torchvision's import takes seconds)."""
    import importlib
    import sys

    def loaded(name: str):
        if name in sys.modules:
            return sys.modules[name]
        if not import_missing or name in READ_NOT_IMPORTED:
            return None
        return importlib.import_module(name)

    def version(name: str, module) -> str | None:
        if module is not None:
            return getattr(module, "__version__", None)
        if not import_missing:
            return None
        return stated_version(name) or getattr(importlib.import_module(name), "__version__", None)

    mods = {key: loaded(name) for key, name in PACKAGES.items()}
    out: dict = {"python": platform.python_version()}
    out |= {key: version(PACKAGES[key], m) for key, m in mods.items()}
    pil, torch = mods["pillow"], mods["torch"]
    if pil is not None:
        from PIL import features

        out |= {
            "pillow_simd": ".post" in pil.__version__,
            "libjpeg_turbo": bool(features.check_feature("libjpeg_turbo")),
            "libjpeg_turbo_version": features.version_feature("libjpeg_turbo"),
        }
    else:
        out |= {"pillow_simd": None, "libjpeg_turbo": None, "libjpeg_turbo_version": None}
    # the CUDA the wheel was built for; devices: see gpus
    out["torch_cuda_build"] = torch.version.cuda if torch is not None else None
    return out


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


def stated_version(name: str) -> str | None:
    """The `__version__` string a package's version.py assigns, read without importing the package (None when it
    has no such file or assignment)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(name)  # a top-level name: found, not imported
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        try:
            tree = ast.parse((Path(folder) / "version.py").read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                return node.value.value
    return None


def host_fingerprint(versions: bool = True) -> dict:
    """The machine, its limits, this checkout's commit, the container, GPUs and Slurm ids; with ``versions`` the
    packages' versions as this process sees them (`package_versions`), else none (a process whose packages are
    not the ones measured: the doctor's, whose script may run another interpreter, reports the script's own)."""
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
        **(package_versions() if versions else {}),
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

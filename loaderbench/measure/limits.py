"""Per-cell limits: open files (`ulimit_nofile` -> RLIMIT_NOFILE) and memory (`memory_limit_mb`).

The memory limit covers the cell process and all its workers together when a memory cgroup can be made
here (cgroup v1 or v2, writable: root on a VM, a privileged container): the runner creates one per cell
repetition, the forked cell joins it before it starts anything, and the runner reads its OOM-kill count
afterwards and removes it. Where no cgroup can be made, the cell falls back to RLIMIT_AS, which is per
process and counts address space, not memory: each process may map `memory_limit_mb` MiB beyond what
the cell process had mapped when it started (torch's own mappings excluded). Records say which was used
(`env.limits.memory_via`).
"""

from __future__ import annotations

import os
import resource
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderbench.processes import pid_alive
from loaderbench.schema.cell import CellConfig

PREFIX = "loaderbench-"


def apply_nofile(n: int) -> None:
    """Set this process's open-file limit (inherited by its workers)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and n > hard:
        try:  # raising the hard limit needs CAP_SYS_RESOURCE
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
            return
        except (ValueError, OSError):
            raise RuntimeError(
                f"ulimit_nofile = {n} is above this machine's hard limit of {hard} open files; "
                f"lower it or raise the hard limit (ulimit -Hn)"
            ) from None
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


def _vm_size() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def apply_rlimit_as(limit_mb: int) -> int:
    """The fallback memory limit: address space beyond what this process has mapped now. Returns the limit."""
    limit = _vm_size() + limit_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return limit


def apply_cell_limits(cell: CellConfig, in_cgroup: bool = False) -> dict[str, Any]:
    """Called in the cell process before it builds its DataLoader; `in_cgroup`: the runner's memory cgroup
    already limits the cell, so no RLIMIT_AS. Returns what is in effect."""
    out: dict[str, Any] = {}
    if cell.ulimit_nofile:
        apply_nofile(cell.ulimit_nofile)
        out["nofile"] = cell.ulimit_nofile
    if cell.memory_limit_mb and not in_cgroup:
        out["rlimit_as"] = apply_rlimit_as(cell.memory_limit_mb)
    return out


# --- memory cgroups (made and removed by the runner) -------------------------------------------------


def _mountinfo() -> list[tuple[str, str, str, str]]:
    """(root, mount point, fstype, super options) of each mount."""
    out = []
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            f, r = left.split(), right.split()
            if len(f) >= 5 and len(r) >= 3:
                out.append((f[3], f[4], r[0], r[2]))
    except OSError:
        pass
    return out


def _own_cgroups() -> dict[str, str]:
    """controller ("memory", or "" for v2) -> this process's cgroup path."""
    out = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                out[c] = path
    except (OSError, ValueError):
        pass
    return out


def _join(mount: str, root: str, path: str) -> Path:
    rel = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(mount) / rel.lstrip("/")


def _candidate_parents() -> list[tuple[str, Path]]:
    """Where a child memory cgroup could be made: [(version, parent dir)], v1 first."""
    own = _own_cgroups()
    out = []
    for root, mnt, fstype, opts in _mountinfo():
        if fstype == "cgroup" and "memory" in opts.split(",") and "memory" in own:
            out.append(("v1", _join(mnt, root, own["memory"])))
    for root, mnt, fstype, _ in _mountinfo():
        if fstype == "cgroup2" and "" in own:
            out.append(("v2", _join(mnt, root, own[""])))
    return out


def _write(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _read_kv(path: Path) -> dict[str, int]:
    out = {}
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
    except OSError:
        pass
    return out


def remove_stale(parent: Path) -> None:
    """Remove empty cgroups left by runners that died (their pid is in the name)."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for d in entries:
        if not d.name.startswith(PREFIX) or not d.is_dir():
            continue
        try:
            runner = int(d.name[len(PREFIX) :].split("-")[0])
        except ValueError:
            continue
        if runner != os.getpid() and not pid_alive(runner):
            try:
                d.rmdir()
            except OSError:
                pass


_counter = 0


@dataclass
class MemoryCgroup:
    path: Path
    version: str  # "v1" | "v2"
    limit_bytes: int

    @classmethod
    def create(cls, limit_mb: int) -> MemoryCgroup | None:
        """A fresh memory cgroup limited to `limit_mb` MiB (swap included), or None where none can be made."""
        global _counter
        if os.environ.get("LOADERBENCH_CGROUP", "").lower() in ("0", "off", "no", "false"):
            return None  # forced fallback (tests; sites where cgroups belong to someone else)
        for version, parent in _candidate_parents():
            if not parent.is_dir() or not os.access(parent, os.W_OK):
                continue
            remove_stale(parent)
            _counter += 1
            path = parent / f"{PREFIX}{os.getpid()}-{_counter}"
            try:
                path.mkdir()
            except OSError:
                continue
            cg = cls(path, version, limit_mb * 2**20)
            try:
                cg._set_limit()
                return cg
            except OSError:
                cg.remove()
        return None

    def _set_limit(self) -> None:
        n = str(self.limit_bytes)
        if self.version == "v1":
            _write(self.path / "memory.limit_in_bytes", n)
            if (self.path / "memory.memsw.limit_in_bytes").exists():  # no escaping into swap
                try:
                    _write(self.path / "memory.memsw.limit_in_bytes", n)
                except OSError:
                    pass
            return
        if not (self.path / "memory.max").exists():
            try:
                _write(self.path.parent / "cgroup.subtree_control", "+memory")
            except OSError:
                pass
        if not (self.path / "memory.max").exists():
            raise OSError("the memory controller is not enabled for this cgroup")
        _write(self.path / "memory.max", n)
        try:
            _write(self.path / "memory.swap.max", "0")
        except OSError:
            pass

    def join(self, pid: int) -> None:
        _write(self.path / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer ended inside this cgroup (-1: cannot tell)."""
        if self.version == "v1":
            kv = _read_kv(self.path / "memory.oom_control")
            if "oom_kill" in kv:
                return kv["oom_kill"]
            try:  # old kernels: the limit was hit at least
                return 1 if int((self.path / "memory.failcnt").read_text()) > 0 else 0
            except (OSError, ValueError):
                return -1
        kv = _read_kv(self.path / "memory.events")
        return kv.get("oom_kill", -1)

    def peak_bytes(self) -> int | None:
        name = "memory.max_usage_in_bytes" if self.version == "v1" else "memory.peak"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def describe(self) -> dict[str, Any]:
        return {"memory_via": f"cgroup-{self.version}", "memory_limit_bytes": self.limit_bytes}

    def remove(self) -> bool:
        """Remove the (empty) cgroup; True when it is gone."""
        import signal
        import time

        for attempt in range(50):
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                time.sleep(0.02 * (1 + attempt // 10))
        return False


def oom_victims(error: dict | None, status: int | None) -> str:
    """Which of the cell's processes the kernel's OOM killer took, as far as the record can tell."""
    if status is not None and status == -signal.SIGKILL:
        return "the cell process"
    msg = (error or {}).get("message", "")
    if msg.startswith("DataLoader worker"):
        return msg.split(" was ")[0].split(" crashed")[0].split(" exited")[0]
    return "a process of the cell"


def limits_in_force(cell: CellConfig, cgroup, peak: int | None, oom_kills: int) -> dict:
    """The limits a cell ran under, for its record: open files, memory (cgroup or address-space rlimit)."""
    out: dict[str, Any] = {}
    if cell.ulimit_nofile:
        out["nofile"] = cell.ulimit_nofile
    if cell.memory_limit_mb:
        if cgroup is not None:
            out.update(cgroup.describe())
            out["memory_peak_bytes"] = peak
            out["oom_kills"] = oom_kills
        else:
            out["memory_via"] = "rlimit_as"
            out["memory_limit_bytes"] = cell.memory_limit_mb * 2**20
    return out

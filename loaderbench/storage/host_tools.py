"""The programs an HTTP storage cell needs and what this machine can shape its network path with.

- nginx serves the files (unless the cell names its own server with `storage_url`);
- `ip` and `tc` (iproute2) build the cell's private network namespaces and the tbf/netem qdiscs; they need
  root (CAP_NET_ADMIN, CAP_SYS_ADMIN for unshare/setns).

`path_plan(cell)` decides, for one cell, which mechanism applies latency and which applies the bandwidth
cap; the record names them. A missing program is a ToolMissing error that names it and how to install it.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from loaderbench.errors import ToolMissing
from loaderbench.schema.cell import CellConfig

INSTALL_HINT = (
    "install it with tools/install-storage-tools.sh from a checkout (Debian: apt-get install "
    "nginx iproute2; the Docker image has both)"
)
SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")  # not on a non-root user's PATH on Debian
CLONE_NEWNET = 0x40000000


def find_program(name: str) -> str | None:
    """The program's path: PATH first, then the sbin folders."""
    found = shutil.which(name)
    if found:
        return found
    for folder in SBIN:
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def require(*names: str, why: str) -> dict[str, str]:
    """Paths of `names`; ToolMissing naming every missing one, `why` they are needed and how to get them."""
    paths = {n: find_program(n) for n in names}
    missing = [n for n, p in paths.items() if p is None]
    if missing:
        raise ToolMissing(f"{' and '.join(missing)} not found ({why}): {INSTALL_HINT}")
    return paths  # type: ignore[return-value]  # every value is a path: the missing ones raised above


@functools.cache
def nginx_version(path: str) -> str:
    out = subprocess.run([path, "-v"], capture_output=True, text=True, timeout=30)
    text = (out.stderr or out.stdout).strip()
    return text.split("/", 1)[1] if "/" in text else text


def _in_child(check) -> bool:
    """Run `check()` in a forked child (it may change the child's namespaces); whether it returned True."""
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            ok = bool(check())
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _unshare_net() -> bool:
    return ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET) == 0


@functools.cache
def kernel_shaping() -> tuple[bool, str]:
    """(whether this process can build a private namespace pair shaped by tc, why not)."""
    if find_program("ip") is None or find_program("tc") is None:
        return False, f"ip or tc not found ({INSTALL_HINT})"
    if os.geteuid() != 0:
        return False, "network namespaces and qdiscs need root"
    if not _in_child(_unshare_net):
        return False, "unshare(CLONE_NEWNET) is not permitted here (a container without CAP_SYS_ADMIN?)"
    return True, ""


@functools.cache
def netem_available() -> bool:
    """Whether the kernel has the netem qdisc (tried on the loopback device of a throwaway namespace)."""
    tc = find_program("tc")
    if tc is None or not kernel_shaping()[0]:
        return False

    def check() -> bool:
        if not _unshare_net():
            return False
        out = subprocess.run(
            [tc, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], capture_output=True, timeout=30
        )
        return out.returncode == 0

    return _in_child(check)


@dataclass(frozen=True)
class PathPlan:
    """How one cell's network path is built. `latency` and `bandwidth`: "netem" / "tbf" (kernel qdiscs on the
    server's side of a veth pair between two private namespaces), "proxy" (the suite's delaying TCP proxy in
    front of the server) or "none"."""

    server: str  # "nginx" (started for the cell) or "url" (the user's storage_url)
    netns: bool  # the cell and the server each in a private network namespace, joined by a veth pair
    latency: str
    bandwidth: str
    latency_ms: float
    jitter_ms: float
    bandwidth_mbit: float  # 0: no cap

    @property
    def proxy(self) -> bool:
        return "proxy" in (self.latency, self.bandwidth)

    def describe(self) -> dict:
        return asdict(self)


def path_plan(cell: CellConfig) -> PathPlan:
    """The mechanisms for this cell: kernel qdiscs where `shaping` allows and the machine can, else the proxy.
    Raises ToolMissing when `shaping = "kernel"` cannot be had here, or nginx is missing."""
    latency_ms = float(cell.latency_ms or 0.0)
    jitter_ms = float(cell.jitter_ms or 0.0)
    mbit = float(cell.bandwidth_mbit or 0.0)
    shaping = cell.shaping or "auto"
    delayed, capped = latency_ms > 0 or jitter_ms > 0, mbit > 0
    if cell.storage_url:
        return PathPlan(
            "url", False, "proxy" if delayed else "none", "proxy" if capped else "none", latency_ms, jitter_ms, mbit
        )
    require("nginx", why='storage = "http" serves the dataset with nginx; or set storage_url to your server')
    kernel_ok, why_not = kernel_shaping()
    if shaping == "kernel" and not kernel_ok:
        raise ToolMissing(f'shaping = "kernel" cannot be used here: {why_not}; use shaping = "proxy" or "auto"')
    use_kernel = (shaping == "kernel") or (shaping == "auto" and kernel_ok and (delayed or capped))
    if use_kernel:
        latency = ("netem" if netem_available() else "proxy") if delayed else "none"
        return PathPlan("nginx", True, latency, "tbf" if capped else "none", latency_ms, jitter_ms, mbit)
    return PathPlan(
        "nginx", False, "proxy" if delayed else "none", "proxy" if capped else "none", latency_ms, jitter_ms, mbit
    )


def check_tools(cells: Iterable[CellConfig]) -> None:
    """Before a run: ToolMissing when any cell needs a program this machine lacks (one message for all)."""
    http = [c for c in cells if c.storage == "http"]
    if any(not c.storage_url for c in http):
        require("nginx", why='storage = "http" cells serve the dataset with nginx; or set storage_url to your server')
    if any(c.shaping == "kernel" for c in http):
        ok, why_not = kernel_shaping()
        if not ok:
            raise ToolMissing(f'shaping = "kernel" cannot be used here: {why_not}; use shaping = "proxy" or "auto"')
    if any(c.shaping != "proxy" and not c.storage_url for c in http):
        netem_available()  # probed once here: the cells, forked from this process, inherit the answers

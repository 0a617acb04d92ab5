"""The private network of one cell: the cell process in one new network namespace, its server in another,
joined by a veth pair; the qdiscs that shape the path sit on the server's end of the pair.

Both namespaces are anonymous (created with unshare, never named under /run/netns): each lives exactly as
long as a process inside it, so when the cell's processes end, however they end, the kernel removes the
namespaces, the veth pair and its qdiscs with them. Nothing of this touches the host's own namespace, and
the server's address is reachable from the cell's namespace only.

Linux network namespaces belong to threads: `enter_private()` moves the calling (main) thread; threads and
processes it starts afterwards (DataLoader workers, the pin-memory thread) inherit it.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess

from loaderbench.storage.host_tools import CLONE_NEWNET, find_program

CLIENT_DEV, SERVER_DEV = "lbc0", "lbs0"
CLIENT_ADDR, SERVER_ADDR = "10.233.0.1", "10.233.0.2"  # private to the pair: no host route leads here
PREFIX = 30
TBF_QUEUE_MS = 100  # how long a packet may wait in the tbf queue before it is dropped


class NetnsError(RuntimeError):
    """A namespace, link or qdisc could not be set up (the message carries the command's own error)."""


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def unshare_net() -> None:
    if _libc().unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetnsError(f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}")


def net_namespace(pid: int | str = "self") -> str:
    """The namespace's identity, as the kernel names it (`net:[inode]`)."""
    return os.readlink(f"/proc/{pid}/ns/net")


def run(*args: str) -> str:
    exe = find_program(args[0])
    if exe is None:
        raise NetnsError(f"{args[0]} not found")
    out = subprocess.run([exe, *args[1:]], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise NetnsError(f"`{' '.join(args)}` failed: {(out.stderr or out.stdout).strip()}")
    return out.stdout


class ClientNamespace:
    """The cell process's private namespace. `enter()` moves the calling thread into a new one (remembering the
    namespace it came from); `link_to(pid)` creates the veth pair with its far end in process `pid`'s
    namespace; `leave()` returns to the old namespace, which frees the private one once no process uses it."""

    def __init__(self) -> None:
        self.saved: int | None = None
        self.identity: str | None = None

    def enter(self) -> None:
        self.saved = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            unshare_net()
        except NetnsError:
            os.close(self.saved)
            self.saved = None
            raise
        self.identity = os.readlink("/proc/thread-self/ns/net")
        run("ip", "link", "set", "lo", "up")

    def link_to(self, pid: int) -> None:
        run("ip", "link", "add", CLIENT_DEV, "type", "veth", "peer", "name", SERVER_DEV, "netns", str(pid))
        run("ip", "addr", "add", f"{CLIENT_ADDR}/{PREFIX}", "dev", CLIENT_DEV)
        run("ip", "link", "set", CLIENT_DEV, "up")

    def leave(self) -> None:
        if self.saved is None:
            return
        try:
            if _libc().setns(self.saved, CLONE_NEWNET) != 0:
                raise NetnsError(f"setns back to the original namespace failed: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(self.saved)
            self.saved = None


def tbf_burst_bytes(mbit: float) -> int:
    """A bucket of 10 ms at the rate (at least 32 KiB): the kernel's timer tick must not starve the link."""
    return max(32 * 1024, int(mbit * 1e6 / 8 / 100))


def qdisc_commands(latency: str, bandwidth: str, latency_ms: float, jitter_ms: float, mbit: float) -> list[list[str]]:
    """tc commands for the server's end of the pair: tbf at the root (the cap), netem below it (the delay)."""
    cmds: list[list[str]] = []
    parent = ["root"]
    if bandwidth == "tbf":
        cmds.append(
            [
                "tc",
                "qdisc",
                "add",
                "dev",
                SERVER_DEV,
                "root",
                "handle",
                "1:",
                "tbf",
                "rate",
                f"{mbit:g}mbit",
                "burst",
                str(tbf_burst_bytes(mbit)),
                "latency",
                f"{TBF_QUEUE_MS}ms",
            ]
        )
        parent = ["parent", "1:1"]
    if latency == "netem":
        delay = ["delay", f"{latency_ms:g}ms"] + ([f"{jitter_ms:g}ms"] if jitter_ms else [])
        cmds.append(["tc", "qdisc", "add", "dev", SERVER_DEV, *parent, "handle", "10:", "netem", *delay])
    return cmds


def configure_server_side(commands: list[list[str]]) -> None:
    """Inside the server's namespace, once the pair exists: addresses up, then the qdiscs."""
    run("ip", "link", "set", "lo", "up")
    run("ip", "addr", "add", f"{SERVER_ADDR}/{PREFIX}", "dev", SERVER_DEV)
    run("ip", "link", "set", SERVER_DEV, "up")
    for cmd in commands:
        run(*cmd)


def qdisc_stats() -> list[dict]:
    """What the server-side qdiscs did (kind, bytes and packets sent, drops, overlimits), from `tc -s -j`."""
    try:
        rows = json.loads(run("tc", "-s", "-j", "qdisc", "show", "dev", SERVER_DEV) or "[]")
    except (NetnsError, ValueError):
        return []
    keep = ("kind", "handle", "parent", "bytes", "packets", "drops", "overlimits", "requeues")
    return [{k: r[k] for k in keep if k in r} for r in rows if r.get("kind") in ("tbf", "netem")]

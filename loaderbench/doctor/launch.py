"""`loaderbench doctor -- COMMAND`: run the user's command unchanged in a child process whose Python processes
load the doctor's `sitecustomize`, pass its output through (keeping the end of its stderr), then gather what
each watched process left into doctor.json and doctor.html."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

import loaderbench
from loaderbench.doctor.bootstrap import ENV, OWNER
from loaderbench.doctor.watch import WatchPlan
from loaderbench.errors import LoaderbenchError

SITE_DIR = Path(__file__).resolve().parent / "site"
#: The end of the script's stderr kept in doctor.json.
STDERR_LINES = 200

NO_LOADER = (
    "the script never iterated a torch DataLoader (nor torchdata's StatefulDataLoader), so there was nothing to watch"
)


def child_env(plan: WatchPlan, parts: Path, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.pop(OWNER, None)
    env[ENV] = json.dumps({"plan": plan.to_json(), "parts": str(parts), "doctor_pid": os.getpid()})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE_DIR), env.get("PYTHONPATH", "")) if p)
    env["LOADERBENCH_DOCTOR_PACKAGE_PARENT"] = str(Path(loaderbench.__file__).resolve().parent.parent)
    return env


def _pump(stream, tail: deque) -> None:
    for line in iter(stream.readline, b""):
        sys.stderr.buffer.write(line)
        sys.stderr.flush()
        tail.append(line.decode(errors="replace"))
    stream.close()


def run_command(command: list[str], plan: WatchPlan, parts: Path) -> tuple[int, str, bool]:
    """Run ``command``; returns (exit code, the end of its stderr, whether it was interrupted)."""
    parts.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.Popen(command, env=child_env(plan, parts), stderr=subprocess.PIPE)
    except FileNotFoundError as exc:
        raise LoaderbenchError(f"cannot run {command[0]!r}: no such program") from exc
    except PermissionError as exc:
        raise LoaderbenchError(f"cannot run {command[0]!r}: not executable") from exc
    tail: deque = deque(maxlen=STDERR_LINES)
    pump = threading.Thread(target=_pump, args=(proc.stderr, tail), daemon=True)
    pump.start()
    interrupted = False

    def on_sigint(signum, frame):  # the child has its own Ctrl-C (same terminal); pass on one sent to us only
        nonlocal interrupted
        interrupted = True
        try:
            os.kill(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    pump.join(timeout=10)
    return rc, "".join(tail), interrupted or rc in (-signal.SIGINT, 130)


def read_parts(parts: Path) -> list[dict]:
    found = []
    for f in sorted(parts.glob("*.json")):
        try:
            found.append(json.loads(f.read_text()))
        except (OSError, ValueError):
            continue
    return found


def doctor(command: list[str], plan: WatchPlan, out: Path, echo: bool = True) -> tuple[int, dict]:
    """The whole run: returns (exit status for the CLI, the doctor.json document)."""
    from loaderbench.doctor.doctor_json import build, write
    from loaderbench.doctor.page import write_page
    from loaderbench.doctor.report import terminal_lines
    from loaderbench.measure.fingerprint import host_fingerprint

    if not command:
        raise LoaderbenchError("no command to watch: give one after --, e.g. `loaderbench doctor -- python train.py`")
    out.mkdir(parents=True, exist_ok=True)
    parts = out / f".doctor-parts-{os.getpid()}"
    try:
        rc, stderr_tail, interrupted = run_command(command, plan, parts)
        processes = read_parts(parts)
    finally:
        shutil.rmtree(parts, ignore_errors=True)
    versions = next((p["versions"] for p in processes if "versions" in p), {})
    doc = build(
        processes,
        command=command,
        plan=plan.to_json(),
        exit_code=rc,
        stderr_tail=stderr_tail,
        # the machine from here; Python's and the packages' versions from the script's process, which may run
        # another interpreter (and this process need not import torch to name them)
        fingerprint={**host_fingerprint(versions=False), **versions},
        interrupted=interrupted,
    )
    path = write(doc, out)
    page = write_page(doc, out)
    if echo:
        for p in doc["processes"]:
            for lo in p.get("loaders", []):
                if lo.get("note"):  # ended before its plan: the watched process printed only the finished ones
                    rank = f"rank {p['rank']}: " if p.get("rank") is not None else ""
                    print("\n".join(f"loaderbench doctor: {rank}{line}" for line in terminal_lines(lo)))
        if doc["status"] == "no loader":
            print(f"loaderbench doctor: {NO_LOADER}.")
        if doc["status"] in ("script failed", "interrupted"):
            print(f"loaderbench doctor: the script exited with status {rc}; what was measured before is kept.")
        print(f"loaderbench doctor: wrote {path} and {page}")
    if rc != 0:
        return (130 if interrupted else rc if rc > 0 else 128 - rc), doc
    return (1 if doc["status"] == "no loader" else 0), doc

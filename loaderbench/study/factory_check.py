"""A study's custom factories, checked before anything runs, and bound to its cells.

Each distinct factory is imported and called once with the study's [factory_args], in a child process forked
for the check: the calling process (which becomes the runner that forks every cell) never imports the
user's module nor runs its code, so threads, open files or memory a factory leaves behind cannot leak into
the cells, and a factory that crashes or hangs ends as one clear error (after the study's timeout_s).

A checked factory gives its cells three things: `factory_args` and the module file's `factory_sha256` join
the cell's measuring settings (and so its id: other arguments or an edited module are other cells), and the
folder the module was found in, `factory_root`, joins its context (not its id: a study moved to another
folder or machine keeps its cells).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderbench.errors import FactoryError
from loaderbench.processes import kill_group, signame
from loaderbench.schema.cell import Cell
from loaderbench.study.factory_spec import FactorySpec, find_root, not_found_message, raised

PICKLING_START_METHODS = ("spawn", "forkserver")  # workers receive the dataset pickled


@dataclass(frozen=True)
class CheckedFactory:
    spec: str
    root: str  # the folder the module was imported from
    file: str  # the module's file
    sha256: str
    kind: str  # "map-style" | "iterable"


def bind_factories(
    cells: list[Cell], factory_args: dict[str, Any], study_dir: Path, timeout_s: float, problems: list[str]
) -> list[Cell]:
    """The cells, with each custom cell's factory checked and bound; every problem is appended to `problems`."""
    custom = [c for c in cells if c["workload"] == "custom"]
    if not custom:
        return cells
    if any(c["factory"] is None for c in custom):
        problems.append(
            '[matrix] factory: missing; allowed: workload = "custom" needs factory = '
            '"module:callable" (e.g. "my_pipeline:make_dataset")'
        )
        return cells
    checked: dict[str, CheckedFactory] = {}
    for spec in sorted({c["factory"] for c in custom}):
        pickled_by = sorted(
            {
                c["start_method"]
                for c in custom
                if c["factory"] == spec and c["num_workers"] and c["start_method"] in PICKLING_START_METHODS
            }
        )
        found = check_factory(spec, factory_args, study_dir, timeout_s, pickled_by)
        if isinstance(found, CheckedFactory):
            checked[spec] = found
        else:
            problems += found
    if len(checked) < len({c["factory"] for c in custom}):
        return cells
    out = []
    for cell in cells:
        if cell["workload"] != "custom":
            out.append(cell)
            continue
        f = checked[cell["factory"]]
        out.append(
            Cell(
                axes=cell.axes,
                measure=cell.measure + (("factory_args", dict(factory_args)), ("factory_sha256", f.sha256)),
                context=cell.context + (("factory_root", f.root), ("factory_file", f.file)),
            )
        )
    return out


def check_factory(
    spec_text: str, args: dict[str, Any], study_dir: Path, timeout_s: float, pickled_by: list[str]
) -> CheckedFactory | list[str]:
    """Find the module (no import here), then import and call the factory in a forked child; the result, or
    the problems, each prefixed with the study key it concerns."""
    spec = FactorySpec.parse(spec_text)
    label = f"[matrix] factory = {spec_text!r}"
    root = find_root(spec, study_dir)
    if root is None:
        return [f"{label}: {not_found_message(spec, study_dir)}"]
    got = _in_child(lambda: _check(spec, root, args, pickled_by), timeout_s)
    if "problems" in got:
        return [p if p.startswith("[factory_args]") else f"{label}: {p}" for p in got["problems"]]
    if "died" in got:
        return [f"{label}: the process checking it {got['died']} (a crash in the factory or in what it imports)"]
    if "timeout" in got:
        return [
            f"{label}: the factory did not return within timeout_s = {timeout_s:g} s; a factory should be "
            f"cheap to call (open and index the data, read nothing in bulk)"
        ]
    return CheckedFactory(spec_text, **got["ok"])


def _check(spec: FactorySpec, root: Path, args: dict[str, Any], pickled_by: list[str]) -> dict:
    """In the child: import, check the arguments, call, check the result (and that it pickles, where workers
    receive it pickled)."""
    import torch.multiprocessing  # noqa: F401 - registers torch's reductions with ForkingPickler

    from loaderbench.workloads.factory import argument_problems, call_factory, import_factory, loader_parts, sha256_file

    try:
        factory, file = import_factory(spec, root)
        problems = argument_problems(factory, args, spec)
        if problems:
            return {"problems": problems}
        digest = sha256_file(file)  # the file as imported, before the factory runs
        parts = loader_parts(call_factory(factory, args, spec), spec)
    except FactoryError as exc:
        return {"problems": [str(exc)]}
    if pickled_by:
        from multiprocessing.reduction import ForkingPickler

        for name in ("dataset", "collate_fn", "worker_init_fn"):
            try:
                ForkingPickler.dumps(getattr(parts, name))
            except Exception as exc:  # noqa: BLE001 - pickle raises many types
                return {
                    "problems": [
                        f"its {name} cannot be pickled, and start_method = {' / '.join(pickled_by)} "
                        f"sends it pickled to every worker: {raised(exc, located=False)}; define it at the top level "
                        f'of a module (no lambdas or local functions), or use start_method = "fork"'
                    ]
                }
    return {
        "ok": {
            "root": str(root),
            "file": str(file),
            "sha256": digest,
            "kind": "iterable" if parts.iterable else "map-style",
        }
    }


def _in_child(work, timeout_s: float) -> dict:
    """Run `work()` (returning a JSON-able dict) in a forked child with its own process group; its result, or
    {"died": how} / {"timeout": True}."""
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.dup2(2, 1)  # what the factory prints goes to stderr: stdout may be a command's JSON answer
            os.setpgid(0, 0)  # what the factory starts goes when the check is killed
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides: it kills the group on Ctrl-C
            try:
                result = work()
            except BaseException as exc:  # noqa: BLE001 - anything the check itself did not expect
                result = {"problems": [f"checking it raised {raised(exc)}"]}
            data = json.dumps(result, default=str).encode()
            while data:
                data = data[os.write(w, data) :]
            code = 0
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(w)
    try:
        text = _read_until(r, time.monotonic() + timeout_s)
    except BaseException:
        kill_group(pid)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(r)
    kill_group(pid)  # the child has exited once its pipe closed: this ends what the factory left running
    _, status = os.waitpid(pid, 0)
    if text is None:
        return {"timeout": True}
    if not text:
        code = os.waitstatus_to_exitcode(status)
        return {"died": f"was killed by {signame(-code)}" if code < 0 else f"exited with status {code}"}
    return json.loads(text)


def _read_until(fd: int, deadline: float) -> str | None:
    """Everything written to `fd` until its writer closes it; None when the deadline comes first."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks).decode("utf-8", "replace")
        chunks.append(chunk)

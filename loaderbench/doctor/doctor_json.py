"""doctor.json: what one doctor run found, in a versioned schema, with the provenance of a record (the host's
fingerprint) and of each watched process."""

from __future__ import annotations

import json
import os
from pathlib import Path

from loaderbench.errors import LoaderbenchError

SCHEMA = "loaderbench-doctor"
#: Version 1: command, status, exit_code, stderr_tail, plan, fingerprint, processes[].loaders[].
#: Version 2: plan.tune, plan.tune_budget_s, plan.tune_trials, and processes[].loaders[].tune (the `--tune` search).
#: Version 3: a trial's and the best's `steps_per_s` (in a replica of the loop; was `batches_per_s`, of the loader
#: alone), tune.workers_needed and tune.replica, steps.step_cpu_share and steps.wait_cpu_share, the verdict
#: "borderline".
#: Version 4: the fingerprint's Python and package versions come from the watched script's process (a package it never
#: imported: null), and each process carries its own `versions`; workers' PSS beside their USS; loaders[].accelerator.
#: Version 5: steps.step_cpu_share and steps.wait_cpu_share are estimated from a sample of the measured batches (the
#: loop thread's CPU clock is read on those only), and steps.cpu_sampled_steps says how many steps they rest on.
#: Version 6: the workers' USS and PSS come from page-table walks on a schedule (workers.memory_walks per worker; the
#: series' memory_t_s), no longer at every sample; workers.sampler_cpu_s is the sampler's own CPU time.
#: Version 7: workers.sampler_window_cpu_s, the part of it taken within the measured steps (the baseline walk is
#: made during the warm-up, the last after the measured steps).
VERSION = 7

#: What a run's status says.
STATUSES = ("ok", "script failed", "no loader", "interrupted", "stopped")


def build(
    processes: list[dict],
    *,
    command: list[str],
    plan: dict,
    exit_code: int | None,
    stderr_tail: str,
    fingerprint: dict,
    interrupted: bool = False,
) -> dict:
    loaders = [lo for p in processes for lo in p.get("loaders", [])]
    if interrupted:
        status = "interrupted"
    elif exit_code not in (0, None):
        status = "script failed"
    elif not loaders:
        status = "no loader"
    elif plan.get("stop"):
        status = "stopped"
    else:
        status = "ok"
    ranked = sorted(processes, key=lambda p: (p.get("rank") is None, p.get("rank") or 0, p.get("pid") or 0))
    return {
        "schema": SCHEMA,
        "schema_version": VERSION,
        "status": status,
        "command": command,
        "exit_code": exit_code,
        "stderr_tail": stderr_tail,
        "plan": plan,
        "fingerprint": fingerprint,
        "processes": [p for p in ranked if p.get("loaders") or p is ranked[0]] if ranked else [],
    }


def loaders(doc: dict) -> list[tuple[dict, dict]]:
    """(process, loader) for every watched loader of a doctor.json."""
    return [(p, lo) for p in doc.get("processes", []) for lo in p.get("loaders", [])]


def write(doc: dict, out_dir: Path, name: str = "doctor.json") -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)
    return path


def read(path: Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise LoaderbenchError(f"{path}: not a readable doctor.json ({exc})") from exc
    if doc.get("schema") != SCHEMA or doc.get("schema_version") != VERSION:
        raise LoaderbenchError(
            f"{path}: schema {doc.get('schema')!r} version {doc.get('schema_version')!r}; "
            f"this loaderbench reads {SCHEMA!r} version {VERSION}"
        )
    return doc

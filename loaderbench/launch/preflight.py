"""What must hold before a study goes to a Slurm queue, checked from where it is submitted: a first run
that fails on every node burns the queue and the allocation. Each problem is one clear message."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from loaderbench.errors import ProfileError
from loaderbench.study.estimate import StudyEstimate, duration


def writable(folder: Path) -> str | None:
    """None when files can be created in `folder` (made if missing); else why not."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".loaderbench-write-test-"):
            pass
    except OSError as exc:
        return f"{folder}: cannot write there ({exc.strerror or exc})"
    return None


def check_submission(profile, results: Path, logs: Path, estimate: StudyEstimate | None) -> None:
    """Raise one ProfileError listing every problem: the container image, the folders, the time limit."""
    problems: list[str] = []
    c = profile.settings.container
    if c.kind == "apptainer" and not os.path.isfile(c.image):
        problems.append(
            f"[container] image = {c.image!r}: no such file here; build it with `make sif` and copy it "
            f"to a folder every node sees (the path must be the same on the nodes)"
        )
    for what, folder in (("results", results), ("logs", logs)):
        why = writable(folder)
        if why:
            problems.append(f"[slurm] {what}: {why}; every node must be able to write it too")
    limit_s = profile.settings.slurm.time_limit_min * 60
    if estimate is not None and estimate.longest_s > limit_s:
        problems.append(
            f"[slurm] time_limit_min = {profile.settings.slurm.time_limit_min}: shorter than the "
            f"longest cell repetition's estimate ({duration(estimate.longest_s)}); raise it, or "
            f"shorten the study's windows"
        )
    if problems:
        raise ProfileError(f"{profile.path}: cannot submit:\n" + "\n".join(f"  - {p}" for p in problems))

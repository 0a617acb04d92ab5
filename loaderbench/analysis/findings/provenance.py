"""Where published records come from, and how quiet the machine was: what a reference copy refuses and what its
README says of every study, computed from the records themselves.

A published verdict must come from code that can be recovered: records made by a commit in this repository, from
a tree without uncommitted changes. And "alone" is never written by hand: a study ran alone when the machine's
1-minute load average, read by the run before it started anything, was below half its logical CPUs, and other
processes took at most a small share of the cells' cores while they were measured.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pandas as pd

from loaderbench.locations import checkout_root
from loaderbench.schema.disturbance import OTHERS_MARGIN, QUIET_LOAD_PER_CPU

#: "alone": the 1-minute load average at the run's start below QUIET_LOAD_PER_CPU of the machine's logical CPUs,
#: and others' CPU time on the cells' cores at most the share a repetition is judged disturbed beyond, at the
#: median over repetitions
QUIET_OTHERS_SHARE = OTHERS_MARGIN
#: what a note may not say: how quiet the machine was (`conditions` says it, from the records)
STATED_CONDITIONS = re.compile(
    r"\b(alone|quiet(ly)?|busy|idle|(un)?disturbed|load( average)?( of)? \d[\d.]*)", re.IGNORECASE
)


@cache
def _known(commit: str, repo: str) -> bool:
    out = subprocess.run(
        ["git", "-C", repo, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, timeout=30, check=False
    )
    return out.returncode == 0


def commit_problem(commit: object, repo: Path | None = None) -> str | None:
    """Why the code a record's `env.git_commit` names cannot be recovered, or None when it can: no commit recorded,
    uncommitted changes (`-dirty`), or a commit this repository does not hold (checked where `repo`, default the
    checkout loaderbench runs from, is a git checkout)."""
    if not isinstance(commit, str) or not commit:
        return "no commit recorded (not run from a checkout)"
    if commit.endswith("-dirty"):
        return f"uncommitted changes on top of {commit.removesuffix('-dirty')[:12]}"
    repo = repo or checkout_root()
    if repo is not None and (Path(repo) / ".git").exists() and not _known(commit, str(repo)):
        return f"commit {commit[:12]} is not in this repository"
    return None


def conditions(rows: pd.DataFrame) -> str:
    """How quiet the machine was while a study's records were measured, in words, from the records: the load
    average its first run began at (later runs, e.g. more repetitions, begin beside the study's own processes)
    against the machine's logical CPUs, and the median share of the cells' cores other processes took."""
    load = pd.to_numeric(rows.get("env_load_1m_at_start", pd.Series(dtype=float)), errors="coerce")
    cpus = pd.to_numeric(rows.get("env_logical_cpus", pd.Series(dtype=float)), errors="coerce").dropna()
    others = pd.to_numeric(rows.get("others_share", pd.Series(dtype=float)), errors="coerce").dropna()
    if load.dropna().empty or cpus.empty:
        return "not known: the records carry no load average at the start of their run"
    started = pd.to_datetime(rows.get("started_at"), errors="coerce", utc=True)
    first = started[load.notna()].idxmin() if started is not None and started[load.notna()].notna().any() else None
    peak, n = float(load[first] if first is not None else load.dropna().iloc[0]), int(cpus.max())
    share = float(others.median()) if not others.empty else float("nan")
    quiet = peak < QUIET_LOAD_PER_CPU * n and (others.empty or share <= QUIET_OTHERS_SHARE)
    words = "alone" if quiet else "not alone"
    text = f"{words}: load {peak:.3g} at the start (quiet below {QUIET_LOAD_PER_CPU * n:g} on {n} CPUs)"
    if not others.empty:
        limit = 100 * QUIET_OTHERS_SHARE
        text += f"; others took {100 * share:.1f}% of the cells' cores (median; quiet at most {limit:g}%)"
    return text


def note_problem(note: str) -> str | None:
    """Why a hand-written note cannot stand beside a study's records, or None when it can: it says how quiet the
    machine was ("alone", a load average), which only `conditions` says, from the records."""
    m = STATED_CONDITIONS.search(note)
    if m is None:
        return None
    return (
        f"it says {m.group(0)!r}: how quiet the machine was is computed from the records (the conditions column), "
        "never noted by hand; a note says what the records cannot, e.g. what the study's cells are"
    )


def unrecoverable(rows: pd.DataFrame, repo: Path | None = None) -> dict[str, int]:
    """Why records' code cannot be recovered -> how many records say so ({} when every record's can)."""
    if "env_git_commit" not in rows:
        return {commit_problem(None, repo) or "": len(rows)} if len(rows) else {}
    out: dict[str, int] = {}
    for commit, n in rows["env_git_commit"].value_counts(dropna=False).items():
        why = commit_problem(None if pd.isna(commit) else commit, repo)
        if why:
            out[why] = out.get(why, 0) + int(n)
    return out

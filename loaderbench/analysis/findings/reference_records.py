"""Reference records: a results folder copied into `results/reference/<machine>/` as small JSON, so that what
docs/findings.md publishes can be drawn and decided again from the repository alone.

A copy keeps every record of the chosen studies, failed and timed-out ones included (a failure is a result),
and every key the analysis reads. It leaves out each record's `raw` block (the per-batch clock reads, the
bulk of a record, which no table, figure or claim reads) and writes the JSON without indentation. The
folder's README.md is written from the records: the machine and software their fingerprints name, and per
study the records, cells, repetitions, wall time, how quiet the machine was and whether the code that made them
can be recovered (both computed from the records: loaderbench.analysis.findings.provenance), and the notes given with
`--note`. The notes are kept in `reference.json` beside it, so a study copied later keeps the notes of the studies
copied before. A note says what the records cannot (what a study's cells are); one that says how quiet the machine
was ("alone", a load average) is refused, when given and when read back: only the records say that.

A copy refuses records whose code cannot be recovered (made from a tree with uncommitted changes, or by a commit
this repository does not hold), naming them: published evidence comes from committed code.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from loaderbench.analysis.findings.provenance import commit_problem, conditions, note_problem, unrecoverable
from loaderbench.analysis.findings.verdict_history import HISTORY, flips, remember
from loaderbench.analysis.report.layout import md_table
from loaderbench.analysis.table.environment import env_one
from loaderbench.analysis.text import fmt_bytes
from loaderbench.errors import LoaderbenchError
from loaderbench.schema.record import SCHEMA

#: What a reference record leaves out: per-batch clock reads (t_iter, got, done), read by nothing downstream.
TRIMMED = ("raw",)
META = "reference.json"
README = "README.md"
MACHINE_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-_.")


@dataclass
class Copied:
    """What one copy did: records written per study, and files of the source left out (with why)."""

    folder: Path
    records: dict[str, int] = field(default_factory=dict)
    bytes_before: int = 0
    bytes_after: int = 0
    left_out: list[tuple[str, str]] = field(default_factory=list)


def trim(record: dict) -> dict:
    """The record without the keys in TRIMMED."""
    return {k: v for k, v in record.items() if k not in TRIMMED}


def _is_record(obj) -> bool:
    return isinstance(obj, dict) and str(obj.get("schema", "")).startswith(SCHEMA.rsplit("/", 1)[0] + "/")


def _studies(results: Path, wanted: list[str] | None) -> list[str]:
    found = (
        sorted(p.name for p in results.iterdir() if p.is_dir() and not p.name.startswith("."))
        if results.is_dir()
        else []
    )
    if not found:
        raise LoaderbenchError(f"{results}: no study folders (give the folder `loaderbench run --results` wrote)")
    if wanted is None:
        return found
    missing = [s for s in wanted if s not in found]
    if missing:
        raise LoaderbenchError(
            f"{results}: no records of study {', '.join(missing)}; studies there: {', '.join(found)}"
        )
    return list(wanted)


def copy_reference(
    results: str | os.PathLike,
    reference: str | os.PathLike,
    machine: str,
    studies: list[str] | None = None,
    note: str | None = None,
) -> Copied:
    """Copy the records of `studies` (default: every study) under `results` into `reference/machine/<study>/`,
    trimmed; a study copied before is replaced whole. Then write reference.json and README.md."""
    if not machine or set(machine) - MACHINE_CHARS:
        raise LoaderbenchError(
            f"--machine {machine!r}: allowed: lower-case letters, digits, '-', '_' and '.' (e.g. epyc-2vcpu)"
        )
    if note and (why := note_problem(note)):
        raise LoaderbenchError(f"--note {note!r}: {why}")
    results, folder = Path(results), Path(reference) / machine
    out = Copied(folder)
    chosen = _studies(results, studies)
    meta = _read_meta(folder)
    notes(folder)  # refuses a note kept before that says how quiet the machine was, before anything is copied
    readable: dict[str, list[tuple[Path, dict]]] = {}
    refused: list[str] = []
    for study in chosen:
        readable[study] = []
        for path in sorted((results / study).glob("*.json")):
            if path.name.startswith("."):
                continue
            try:
                rec = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                out.left_out.append((str(path), f"unreadable ({type(exc).__name__})"))
                continue
            if not _is_record(rec) or rec.get("study") != study:
                out.left_out.append((str(path), "not a record of this study"))
                continue
            readable[study].append((path, rec))
            env = rec.get("env") if isinstance(rec.get("env"), dict) else {}
            why = commit_problem(env.get("git_commit"))
            if why:
                refused.append(f"{path} ({why})")
    if refused:
        shown = "; ".join(refused[:3]) + (f"; and {len(refused) - 3} more" if len(refused) > 3 else "")
        raise LoaderbenchError(
            f"{len(refused)} records cannot be published: the code that made them cannot be recovered: {shown}. "
            "Measure them again from a clean checkout of a commit in this repository (git status shows nothing "
            "to commit)"
        )
    for study in chosen:
        kept = []
        for path, rec in readable[study]:
            out.bytes_before += path.stat().st_size
            kept.append((path.name, trim(rec)))
        if not kept:
            raise LoaderbenchError(f"{results / study}: no records to copy")
        target = folder / study
        if target.exists() and study not in meta.get(HISTORY, {}):
            remember(meta, study, _rows(target))  # what the records being replaced decided
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for name, rec in kept:
            text = json.dumps(rec, separators=(",", ":"), default=str) + "\n"
            (target / name).write_text(text)
            out.bytes_after += len(text.encode())
        out.records[study] = len(kept)
        remember(meta, study, _rows(target), _settle_of(results, study))
        kept_notes = meta.setdefault("notes", {})
        if note:
            kept_notes[study] = note
    meta["machine"] = machine
    meta["trimmed"] = list(TRIMMED)
    (folder / META).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    write_readme(folder)
    return out


def _settle_of(results: Path, study: str) -> dict | None:
    """The study's settle-STUDY.json in the results folder (`loaderbench settle`), if there is one."""
    try:
        return json.loads((results / f"settle-{study}.json").read_text())
    except (OSError, ValueError):
        return None


def _read_meta(folder: Path) -> dict:
    try:
        meta = json.loads((folder / META).read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _rows(study_folder: Path) -> pd.DataFrame:
    from loaderbench.analysis.table.records import load_records

    df, _ = load_records(study_folder.parent, use_cache=False)
    return df[df["study"] == study_folder.name] if not df.empty and "study" in df else df


def unstable(folder: str | os.PathLike) -> dict[str, str]:
    """Keys "study|claim name" -> how each verdict flipped between the last two copies of the study
    (loaderbench.analysis.findings.verdict_history), {} when none did."""
    return flips(_read_meta(Path(folder)))


def notes(folder: str | os.PathLike) -> dict[str, str]:
    """The notes given per study when it was copied (reference.json), {} when none; one that says how quiet the
    machine was is refused (provenance.note_problem)."""
    n = _read_meta(Path(folder)).get("notes", {})
    out = {str(k): str(v) for k, v in n.items()} if isinstance(n, dict) else {}
    for study, note in out.items():
        if why := note_problem(note):
            raise LoaderbenchError(f"{Path(folder) / META}: the note of study {study}: {why}; remove it there")
    return out


# --------------------------------------------------------------------------------------------------------
# the README: the machine, the software and the studies, from the records


def machine_line(df: pd.DataFrame) -> str:
    """CPU, logical CPUs, memory and GPU of the records' machine, in one line."""
    parts = [f"{env_one(df, 'cpu_model')}, {env_one(df, 'logical_cpus')} logical CPUs"]
    mem = df["env_mem_total"].dropna() if "env_mem_total" in df else pd.Series(dtype=float)
    if not mem.empty:
        parts.append(f"{fmt_bytes(mem.iloc[0])} memory")
    if env_one(df, "cuda_device") not in ("?", "None"):
        parts.append(f"GPU {env_one(df, 'cuda_device')}")
    parts.append(f"kernel {env_one(df, 'kernel')}")
    return ", ".join(parts)


def software_line(df: pd.DataFrame) -> str:
    """Python, torch, torchvision, Pillow (SIMD or not, libjpeg-turbo) of the records."""
    simd = env_one(df, "pillow_simd")
    pillow = f"Pillow {env_one(df, 'pillow')} ({'SIMD' if simd == 'True' else 'stock'}"
    if env_one(df, "libjpeg_turbo_version") != "?":
        pillow += f", libjpeg-turbo {env_one(df, 'libjpeg_turbo_version')}"
    return (
        f"Python {env_one(df, 'python')}, torch {env_one(df, 'torch')}, "
        f"torchvision {env_one(df, 'torchvision')}, {pillow})"
    )


def repetitions_line(df: pd.DataFrame) -> str:
    """The repetitions per cell, and the studies measured with each count."""
    by: dict[str, list[str]] = {}
    for study, rows in df.groupby("study", sort=True):
        reps = rows.groupby("cell_id")["repetition"].nunique().max()
        by.setdefault(str(reps), []).append(f"`{study}`")
    return "; ".join(f"{n} per cell: {', '.join(s)}" for n, s in sorted(by.items(), key=lambda kv: -int(kv[0])))


#: a pause between a study's records longer than this is a break between runs, not part of its wall time
RUN_BREAK_S = 300.0


def wall_minutes(rows: pd.DataFrame) -> float:
    """The wall time the records took, in minutes (NaN without times): from the first record's start to the last
    one's end, less the breaks of over RUN_BREAK_S between runs (a study measured again days later)."""
    start = pd.to_datetime(rows.get("started_at"), errors="coerce", utc=True)
    end = pd.to_datetime(rows.get("finished_at"), errors="coerce", utc=True)
    if start is None or end is None or start.isna().all() or end.isna().all():
        return float("nan")
    spans = pd.DataFrame({"start": start, "end": end}).dropna().sort_values("start")
    total, reach = 0.0, None
    for a, b in zip(spans["start"], spans["end"]):
        if reach is None or (a - reach).total_seconds() > RUN_BREAK_S:
            total += (b - a).total_seconds()
        else:
            total += max(0.0, (b - reach).total_seconds())
        reach = b if reach is None else max(reach, b)
    return total / 60


def study_rows(df: pd.DataFrame, noted: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per study: records (ok / failed / timeout), cells, repetitions, wall time, conditions (computed
    from the records), whether their code can be recovered, and the notes given when it was copied."""
    out = []
    for study, rows in df.groupby("study", sort=True):
        counts = rows["status"].value_counts()
        bad = ", ".join(f"{int(counts[s])} {s}" for s in ("failed", "timeout") if counts.get(s, 0))
        reps = rows.groupby("cell_id")["repetition"].nunique()
        out.append(
            {
                "study": f"`{study}`",
                "records": f"{len(rows)}" + (f" ({bad})" if bad else ""),
                "cells": rows["cell_id"].nunique(),
                "repetitions": f"{reps.min()}" if reps.min() == reps.max() else f"{reps.min()}-{reps.max()}",
                "wall time": f"{wall_minutes(rows):.1f} min",
                "conditions": conditions(rows),
                "code": code_line(rows),
                "notes": (noted or {}).get(str(study), "–"),
            }
        )
    return pd.DataFrame(out)


def code_line(rows: pd.DataFrame) -> str:
    """Whether the code that made the rows can be recovered: "committed", or how many records cannot and why."""
    problems = unrecoverable(rows)
    if not problems:
        return "committed"
    return "; ".join(f"{n} records: {why}, to be measured again" for why, n in sorted(problems.items()))


def copied(folder: Path) -> bool:
    """Whether `loaderbench reference` wrote the machine folder (and so its README.md): it holds reference.json."""
    return (folder / META).is_file()


def readme_text(folder: Path, df: pd.DataFrame | None = None) -> str:
    """The folder's README.md, rendered from its records (`df`: those records' table, when loaded already)."""
    from loaderbench.analysis.table.records import load_records

    df = load_records(folder, use_cache=False)[0] if df is None else df
    if df.empty:
        raise LoaderbenchError(f"{folder}: no records")
    name = folder.name
    commits = sorted(df["env_git_commit"].dropna().astype(str).unique()) if "env_git_commit" in df else []
    lines = [
        f"# Reference records: {name}",
        "",
        "Records kept as reference data. Draw and decide them with:",
        "",
        "```bash",
        f"make figures RESULTS=results/reference/{name}     # figures, report and claims from these records alone",
        "loaderbench findings results/reference             # the tables and verdicts of docs/findings.md",
        "```",
        "",
        "| | |",
        "|---|---|",
        f"| machine | {machine_line(df)} |",
        f"| software | {software_line(df)} |",
        f"| loaderbench commit | {', '.join(commits) or '?'} |",
        "| fingerprint | in every record (`env`): CPU, memory, libraries, cores allowed, limits, the commit it ran |",
        trimmed_line(_read_meta(folder).get("trimmed", TRIMMED)),
        "",
        md_table(study_rows(df, notes(folder))),
        "",
    ]
    return "\n".join(lines)


def trimmed_line(trimmed: list[str] | tuple[str, ...]) -> str:
    """What `loaderbench reference` left out of the folder's records (reference.json's `trimmed`)."""
    if not trimmed:
        return "| trimmed | nothing: the records are kept as they were written, per-batch clock reads included |"
    return (
        f"| trimmed | each record's `{'`, `'.join(trimmed)}` block (per-batch clock reads) is left out; everything "
        "the analysis reads is kept, and failed records are kept as they are |"
    )


def write_readme(folder: Path) -> Path:
    path = folder / README
    path.write_text(readme_text(folder))
    return path

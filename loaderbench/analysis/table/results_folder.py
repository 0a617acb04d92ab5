"""What a folder given as RESULTS holds when no record could be read from it: a results folder holds one folder per
study, each of records (`<results>/<study>/*.json`); a folder one level above, such as `results/reference` (one
results folder per machine), holds none directly, and `not_a_results_folder` says which to pass instead."""

from __future__ import annotations

from pathlib import Path

from loaderbench.analysis.table.records import record_files


def results_folders_inside(folder: Path) -> dict[Path, int]:
    """The folders directly inside `folder` that are results folders themselves, with how many candidate records
    each holds (those holding none are left out)."""
    try:
        inside = sorted(p for p in Path(folder).iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return {}
    counted = {p: len(record_files(p)) for p in inside}
    return {p: n for p, n in counted.items() if n}


def not_a_results_folder(folder: Path) -> str | None:
    """When `folder` holds results folders rather than studies (e.g. results/reference, one folder per machine):
    what it holds and which to pass instead (the one with the most records as the example); None otherwise."""
    found = results_folders_inside(folder)
    if not found:
        return None
    example = max(found, key=lambda p: (found[p], p.name))
    n = len(found)
    return (
        f"{folder} holds {n} results folder{'s' if n != 1 else ''} ({', '.join(p.name for p in found)}), not records "
        f"of studies: pass {'one of them' if n != 1 else 'it'}, e.g. {example}"
    )

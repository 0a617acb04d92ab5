"""Checks run on every shipped reference record (results/reference/<machine>/<study>/*.json) at once: one test per
check, whose failure lists every record that fails it and why."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import REPO

REFERENCE = sorted((REPO / "results" / "reference").glob("*/*/*.json"))


def failures(check: Callable[[Path], str | None], paths: list[Path]) -> list[str]:
    """ "<record>: <what is wrong>" for each record `check` finds wrong: what it returns (None when nothing is), or
    the exception it raises."""
    out = []
    for path in paths:
        try:
            why = check(path)
        except Exception as exc:  # noqa: BLE001 - one record's error is listed with the others', not in their place
            why = f"{type(exc).__name__}: {exc}"
        if why:
            out.append(f"{_name(path)}: {why}")
    return out


def _name(path: Path) -> str:
    return str(path.relative_to(REPO / "results")) if path.is_relative_to(REPO / "results") else str(path)


def assert_every_record(check: Callable[[Path], str | None], paths: list[Path] = REFERENCE) -> None:
    """Fail naming every record `check` finds wrong (and fail when there is no record to check)."""
    assert paths, f"no reference records under {REPO / 'results' / 'reference'}: nothing was checked"
    wrong = failures(check, paths)
    assert not wrong, f"{len(wrong)} of {len(paths)} reference records:\n" + "\n".join(wrong)

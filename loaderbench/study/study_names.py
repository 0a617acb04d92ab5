"""A study named on the command line: the path of a study file, or the name of a study shipped in the package.

`loaderbench run quick` and `loaderbench run path/to/quick.toml` both work from any folder. A file that
exists wins over a shipped study of the same name; anything else is one error that lists the shipped names.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import NamedTuple

from loaderbench.errors import StudyError
from loaderbench.locations import shipped_studies


class ShippedStudy(NamedTuple):
    name: str
    description: str
    path: Path


def resolve_study(arg: str | os.PathLike) -> Path:
    """The study file `arg` names: itself when it is a file, else the shipped study of that name (`quick`,
    or `quick.toml` without a folder)."""
    path = Path(arg).expanduser()
    if path.is_file():
        return path
    text = os.fspath(arg)
    shipped = shipped_studies()
    name = text.removesuffix(".toml")
    if "/" not in text and os.sep not in text and name in shipped:
        return shipped[name]
    raise StudyError(
        f"{text}: no such study file, and no shipped study has that name; give the path of a study file (TOML) "
        f"or one of the shipped studies: {', '.join(shipped) or '(none found)'} (`loaderbench studies` lists "
        "them with what each answers)"
    )


def shipped_study_list() -> list[ShippedStudy]:
    """Every shipped study with its `[study] description`, in name order."""
    out = []
    for name, path in shipped_studies().items():
        try:
            description = tomllib.loads(path.read_text(encoding="utf-8")).get("study", {}).get("description", "")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            description = f"(unreadable: {exc})"
        out.append(ShippedStudy(name, str(description), path))
    return out

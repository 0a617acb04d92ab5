"""Where a custom workload's factory (`module:callable`) is found, without importing it: the study's checks
(loaderbench.study.factory_check) run here first, and the cell imports from the folder found
(loaderbench.workloads.factory)."""

from __future__ import annotations

import difflib
import os
import sys
import traceback
from dataclasses import dataclass
from importlib.machinery import PathFinder
from pathlib import Path


@dataclass(frozen=True)
class FactorySpec:
    """`module:callable` (the callable may be dotted: `module:Class.method`)."""

    module: str
    attr: str

    @classmethod
    def parse(cls, text: str) -> FactorySpec:
        module, _, attr = text.partition(":")
        return cls(module, attr)

    @property
    def top(self) -> str:
        return self.module.split(".")[0]

    def __str__(self) -> str:
        return f"{self.module}:{self.attr}"


def find_root(spec: FactorySpec, study_dir: Path) -> Path | None:
    """The folder the module's top-level name is found in: the study file's folder first, then each sys.path
    entry (an empty entry is the current folder); None when it is nowhere. Nothing is imported."""
    candidates = [study_dir] + [Path(entry or os.getcwd()) for entry in sys.path]
    for folder in candidates:
        try:
            found = PathFinder.find_spec(spec.top, [str(folder)])
        except (ImportError, ValueError, OSError):
            continue
        if found is not None:
            return folder.resolve()
    return None


def not_found_message(spec: FactorySpec, study_dir: Path) -> str:
    """What was looked for, and where, for a module that is nowhere."""
    near = difflib.get_close_matches(spec.top, [p.stem for p in study_dir.glob("*.py")], n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return (
        f"no module {spec.top!r}: looked for {study_dir / (spec.top + '.py')} (or a package "
        f"{study_dir / spec.top}/) in the study file's folder {study_dir}, then on sys.path{hint}"
    )


def raised(exc: BaseException, located: bool = True) -> str:
    """`Type: message (at file:line)`, the line being the innermost frame (the user's code, usually)."""
    where = ""
    if not located:
        pass
    elif isinstance(exc, SyntaxError) and exc.filename:
        where = f" (at {exc.filename}:{exc.lineno})"
    elif exc.__traceback__ is not None:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" (at {last.filename}:{last.lineno})"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}{': ' + text[:300] if text else ''}{where}"

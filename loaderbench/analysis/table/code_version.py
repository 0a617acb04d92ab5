"""The version of everything besides the records that the figures, tables, claims and report are made of
(`code_version`), and of what the records table is made of (`table_version`).

Every cache of `make figures` is keyed on it with the records' content, so a change to any of these makes the
next run draw everything again, never trusting output made by other code:
- the analysis package's own source;
- the packages below it that it may import (the `layers` contract in pyproject.toml lets it import no others):
  the statistics, the record's schema and the small helpers;
- the shipped study files, which the report quotes to say how to run a study again;
- the versions of the libraries that compute and draw (a new matplotlib or scipy can change a figure or a test).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from importlib import metadata
from pathlib import Path

#: Files and folders of the package that the analysis's output depends on (folders: their .py and .toml files).
SOURCES = (
    "analysis",
    "fake_records",
    "stats",
    "schema",
    "errors.py",
    "cores.py",
    "processes.py",
    "locations.py",
    "studies",
)
#: Distributions whose version is part of the key.
LIBRARIES = ("matplotlib", "seaborn", "numpy", "pandas", "scipy", "pyarrow")
#: What a row of the records table is made of: the record's definition (`flatten`), the module that reads files.
TABLE_SOURCES = ("schema", "analysis/table/records.py")
TABLE_LIBRARIES = ("pandas", "pyarrow")
_SUFFIXES = (".py", ".toml")


def source_digest(root: Path, sources: Iterable[str], libraries: Iterable[str]) -> str:
    """Hash of the names and bytes of `sources` under `root` (files, or folders whose .py and .toml files are
    taken, in sorted order) and of the installed version of each of `libraries` ("absent" where none is)."""
    h = hashlib.sha256()
    for source in sources:
        path = root / source
        files = sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES and p.is_file()) if path.is_dir() else [path]
        for p in files:
            h.update(p.relative_to(root).as_posix().encode() + b"\x1f")
            h.update(p.read_bytes() if p.is_file() else b"\x00absent")
            h.update(b"\x1e")
    for name in libraries:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{name}=={version}\x1e".encode())
    return h.hexdigest()


@lru_cache(maxsize=1)
def code_version() -> str:
    """The installed loaderbench's `source_digest` of SOURCES and LIBRARIES."""
    return source_digest(_PACKAGE, SOURCES, LIBRARIES)


@lru_cache(maxsize=1)
def table_version() -> str:
    """The `source_digest` of TABLE_SOURCES and TABLE_LIBRARIES: the records table's cache is kept only under it."""
    return source_digest(_PACKAGE, TABLE_SOURCES, TABLE_LIBRARIES)[:16]


_PACKAGE = Path(__file__).resolve().parents[2]

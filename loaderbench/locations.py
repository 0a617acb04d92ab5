"""Where loaderbench's files are: the studies and dataset recipes shipped inside the package, the source
checkout it runs from (if any), and the default dataset cache.

The package finds its own files through the import system (`importlib.resources`), so a wheel installed into
any environment works from any folder; nothing here depends on the current folder. A checkout is recognised
by the `pyproject.toml` of the loaderbench project beside the imported package (an editable install, or
`python -m loaderbench` run inside the checkout); an installed wheel has none.
"""

from __future__ import annotations

import os
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path

PACKAGE = "loaderbench"


def package_folder(name: str) -> Path:
    """A folder of package data (`studies`, `recipes`), wherever the package is installed."""
    # setuptools installs the package as plain files, so the traversable is a real folder
    return Path(str(resources.files(PACKAGE).joinpath(name)))


def shipped(folder: str) -> dict[str, Path]:
    """The `.toml` files of a package-data folder by name (file name without `.toml`), sorted by name."""
    root = package_folder(folder)
    return {p.stem: p for p in sorted(root.glob("*.toml"), key=lambda p: p.stem)} if root.is_dir() else {}


def shipped_studies() -> dict[str, Path]:
    """The shipped study files by name: `loaderbench run quick` runs `shipped_studies()["quick"]`."""
    return shipped("studies")


def shipped_recipes() -> dict[str, Path]:
    """The shipped dataset recipes by name (`[dataset] recipe = "synthetic-jpeg"`)."""
    return shipped("recipes")


@cache
def checkout_root() -> Path | None:
    """The source checkout the imported package lives in, or None when it is installed (a wheel)."""
    root = Path(str(resources.files(PACKAGE))).resolve().parent
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return root if project.get("name") == PACKAGE else None


def user_cache_dir() -> Path:
    """The user's cache folder for loaderbench: `$XDG_CACHE_HOME/loaderbench`, else `~/.cache/loaderbench`."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"  # the spec ignores relative
    return base / PACKAGE


def default_cache_root() -> Path:
    """Where generated data goes (datasets, shards): `$LOADERBENCH_CACHE`, else `<checkout>/.cache` when run
    from a checkout, else the user's cache folder. Never inside an installed package."""
    env = os.environ.get("LOADERBENCH_CACHE")
    if env:
        return Path(env).expanduser()
    root = checkout_root()
    return root / ".cache" if root is not None else user_cache_dir()

"""What callers exchange with loaderbench.datasets: the request, the result, and the error.

:class:`DatasetSpec` is a study file's ``[dataset]`` table, checked before any work is done;
:class:`PreparedDataset` is a verified dataset with a deterministic file order; every failure
a caller can act on is a :class:`DatasetError` whose message names the path or key, the
fault and the fix.  This module imports nothing heavy, so the other modules can all use it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loaderbench.errors import DatasetError

KINDS = ("synthetic-jpeg", "imagefolder")
JPEG_SUFFIXES = (".jpg", ".jpeg")  # compared lower-cased, so .JPEG and .JPG count too


class CorruptDataset(DatasetError):
    """A cache entry or temporary folder fails verification; the cache regenerates it."""


@dataclass(frozen=True)
class DatasetSpec:
    """What a study asks for: its ``[dataset]`` table."""

    kind: str  # "synthetic-jpeg" | "imagefolder"
    images: int = 1024  # synthetic only: how many images to generate
    path: str | None = None  # imagefolder only: root of an ImageFolder tree
    recipe: str = "synthetic-jpeg"  # synthetic only: a shipped recipe's name (or a .toml path)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "dataset") -> DatasetSpec:
        """Build from a parsed TOML table, with DatasetErrors that name ``where.key``."""
        if not isinstance(table, Mapping):
            raise DatasetError(f"[{where}] must be a table, got {type(table).__name__}")
        known = {"kind", "images", "path", "recipe"}
        unknown = sorted(set(table) - known)
        if unknown:
            raise DatasetError(
                f"[{where}] has unknown key(s) {', '.join(unknown)}; allowed keys: {', '.join(sorted(known))}"
            )
        if "kind" not in table:
            raise DatasetError(f"[{where}] needs kind = one of {', '.join(map(repr, KINDS))}")
        spec = cls(**dict(table))
        spec.validate(where)
        return spec

    def validate(self, where: str = "dataset") -> None:
        """Raise DatasetError naming ``where.key`` if the spec cannot be satisfied as given."""
        if self.kind not in KINDS:
            raise DatasetError(
                f"{where}.kind: unknown dataset kind {self.kind!r}; use one of {', '.join(map(repr, KINDS))}"
            )
        if self.kind == "synthetic-jpeg":
            if isinstance(self.images, bool) or not isinstance(self.images, int) or self.images < 1:
                raise DatasetError(f"{where}.images: must be a whole number >= 1, got {self.images!r}")
            if self.path is not None:
                raise DatasetError(
                    f"{where}.path: is only used with kind = 'imagefolder' "
                    f"(kind is 'synthetic-jpeg'); remove it or change the kind"
                )
            if not isinstance(self.recipe, str) or not self.recipe.strip():
                raise DatasetError(
                    f"{where}.recipe: must be a shipped recipe's name or a .toml path, got {self.recipe!r}"
                )
        else:
            if self.path is None or not isinstance(self.path, (str, os.PathLike)) or not str(self.path).strip():
                raise DatasetError(
                    f"{where}.path: kind = 'imagefolder' needs path = the root folder of an "
                    f"ImageFolder tree (one sub-folder per class holding .jpg/.jpeg files)"
                )


@dataclass(frozen=True)
class PreparedDataset:
    """A dataset ready to read: verified, with a deterministic file order."""

    root: Path  # ImageFolder root
    # relative paths ('/'-separated), deterministic: by class, then folder, then name, as
    # torchvision's ImageFolder orders them (plain sorted order for flat class folders)
    files: tuple[str, ...]
    labels: tuple[int, ...]  # class index per file
    digest: str  # sha256 over the manifest (identifies exactly these files)
    summary: dict = field(compare=False)  # n, mean_bytes, median_bytes, mean_width, ... (for result records)

    def __len__(self) -> int:
        return len(self.files)

    def paths(self) -> list[Path]:
        """Absolute paths, in ``files`` order."""
        return [self.root / f for f in self.files]

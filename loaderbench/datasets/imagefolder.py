"""Real datasets: scan an existing ImageFolder tree into a PreparedDataset.

The tree is ``root/<class>/**/*.jpg|jpeg`` (any case).  Classes and files are ordered the way
``torchvision.datasets.ImageFolder`` orders them, so labels agree with it.  The digest covers
the relative paths, labels and byte sizes, not the file contents: hashing a real ImageNet on
every run would cost minutes.  Nothing is written into the tree.
"""

from __future__ import annotations

import os
from pathlib import Path

from PIL import Image

from loaderbench.datasets.manifest import files_digest, files_summary
from loaderbench.datasets.types import JPEG_SUFFIXES, DatasetError, PreparedDataset


def scan_imagefolder(path: str | os.PathLike, where: str = "dataset.path", dims_sample: int = 256) -> PreparedDataset:
    """Scan an ImageFolder tree: classes = sorted sub-folders, files = their JPEGs (recursive).

    The order and labels follow torchvision.datasets.ImageFolder. Non-JPEG files are
    ignored (their count is in the summary); a class folder without JPEGs is an error,
    as it is for torchvision. Widths/heights come from the headers of an evenly spaced
    sample of ``dims_sample`` files.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise DatasetError(
            f"{where}: {root} does not exist; point it at the root of an ImageFolder tree "
            f"(one sub-folder per class holding .jpg/.jpeg files)"
        )
    if not root.is_dir():
        raise DatasetError(f"{where}: {root} is not a folder; point it at the root of an ImageFolder tree")
    root = root.resolve()
    try:
        classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    except OSError as exc:
        raise DatasetError(f"{where}: cannot list {root}: {exc}") from exc
    if not classes:
        raise DatasetError(
            f"{where}: {root} has no class sub-folders; an ImageFolder tree is "
            f"root/<class>/<image>.jpg (put the images in one folder per class)"
        )
    rows: list[dict] = []
    ignored = 0
    empty = []
    for label, cname in enumerate(classes):
        n_before = len(rows)
        for dirpath, _dirs, fnames in sorted(os.walk(root / cname, followlinks=True)):
            for fname in sorted(fnames):
                p = Path(dirpath, fname)
                if not fname.lower().endswith(JPEG_SUFFIXES):
                    ignored += 1
                    continue
                try:
                    size = p.stat().st_size
                except OSError as exc:
                    raise DatasetError(f"{where}: cannot read {p}: {exc}") from exc
                rows.append({"path": p.relative_to(root).as_posix(), "label": label, "bytes": size})
        if len(rows) == n_before:
            empty.append(cname)
    if not rows:
        raise DatasetError(f"{where}: {root} has {len(classes)} class folder(s) but no .jpg/.jpeg files in them")
    if empty:
        raise DatasetError(
            f"{where}: class folder(s) without .jpg/.jpeg files in {root}: "
            f"{', '.join(empty[:10])}{' ...' if len(empty) > 10 else ''}; remove them or add images"
        )
    k = min(dims_sample, len(rows))
    dim_rows = []
    for i in range(k):
        r = rows[(i * len(rows)) // k]
        try:
            with Image.open(root / r["path"]) as im:
                dim_rows.append({"width": im.width, "height": im.height, "mode": im.mode})
        except (OSError, Image.DecompressionBombError) as exc:
            raise DatasetError(f"{where}: {root / r['path']} is not a readable image: {exc}") from exc
    summary = {"kind": "imagefolder", **files_summary(rows, len(classes), dim_rows), "ignored_files": ignored}
    return PreparedDataset(
        root=root,
        files=tuple(r["path"] for r in rows),
        labels=tuple(r["label"] for r in rows),
        digest=files_digest(rows, with_hash=False),
        summary=summary,
    )

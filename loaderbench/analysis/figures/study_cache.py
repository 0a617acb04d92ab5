"""One study's cache in its figures folder: the analysis and the digest of every file drawn for it, keyed on its
records and the analysis code (`study_key`), so that an unchanged study is not drawn again and a changed file is
never trusted; and the atomic pickle every cache of `make figures` is written with."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
from pathlib import Path

import pandas as pd

from loaderbench.analysis.figures.formats import DEFAULT, parse_formats
from loaderbench.analysis.table.code_version import code_version

STUDY_CACHE = ".analysis-cache.pkl"


def study_key(rows: pd.DataFrame) -> str | None:
    """Fingerprint of one study's records and of the analysis code: the content of each record file (the digest of
    its bytes that the tidy table carries, with the file's name), else every value of every column. A record
    rewritten with the same bytes (a new mtime) keeps the key, as does the results folder moved elsewhere; any
    changed byte changes it."""
    try:
        h = hashlib.sha256(code_version().encode())
        if "record_digest" in rows.columns:  # the file's name in its study's folder, and its content
            rows = rows[["path", "record_digest"]].assign(path=rows["path"].astype(str).str.rsplit("/", n=1).str[-1])
        else:
            h.update("\x1f".join(map(str, rows.columns)).encode())
        rows = rows.sort_values("path", kind="stable").reset_index(drop=True)
        try:
            hashed = pd.util.hash_pandas_object(rows, index=False)
        except TypeError:  # a column of mixed types: hash its text
            hashed = pd.util.hash_pandas_object(rows.astype(str), index=False)
        h.update(hashed.to_numpy().tobytes())
        return h.hexdigest()
    except Exception:  # noqa: BLE001 - an unhashable table is simply not cached
        return None


def file_digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def cached_study(folder: Path, key: str | None, formats: tuple[str, ...] = DEFAULT):
    """The saved (analysis, paths) of a study whose key matches, drawn in the same `formats`, and whose every file is
    as it was written; None otherwise (missing, torn, from other records, code or formats, or a file changed or gone
    since): never trusted blindly."""
    if key is None:
        return None
    try:
        with open(folder / STUDY_CACHE, "rb") as fh:
            saved = pickle.load(fh)
        if saved.get("key") != key or tuple(saved.get("formats", ())) != tuple(formats):
            return None
        files = saved["files"]
        if any(file_digest(Path(p)) != digest for p, digest in files.items()):
            return None
        return saved["analysis"], [Path(p) for p in files]
    except Exception:  # noqa: BLE001 - missing, torn, from another version or a file gone: recompute
        return None


def save_study_cache(folder: Path, key: str | None, a, paths: list[Path], formats: tuple[str, ...] = DEFAULT) -> None:
    """Remember one study's analysis (less its rows) and the digest of every file drawn for it, under `key`
    (study_key) and the `formats` its figures were drawn in."""
    if key is None:
        return
    try:
        files = {str(p): file_digest(Path(p)) for p in paths}
    except OSError:  # a file gone already: nothing to remember
        return
    # without its rows: only the figures read them, and those are drawn (a tenth of the bytes to read back)
    kept = dataclasses.replace(a, rows=a.rows.iloc[0:0])
    drawn_in = parse_formats(list(formats))
    save_pickle(folder / STUDY_CACHE, {"key": key, "formats": drawn_in, "analysis": kept, "files": files})


def remove_formats_not_drawn(folder: Path, drawn: list[Path]) -> list[Path]:
    """Remove the PDF and SVG files of `folder` its study's last drawing wrote (its cache lists them) that this
    drawing, `drawn`, did not: a format no longer asked for, which would otherwise show older records beside the new
    PNGs. Returns the files removed."""
    try:
        with open(folder / STUDY_CACHE, "rb") as fh:
            before = [Path(p) for p in pickle.load(fh)["files"]]
    except Exception:  # noqa: BLE001 - no (readable) cache: nothing is known to be stale
        return []
    kept = {str(p) for p in drawn}
    stale = [p for p in before if str(p) not in kept and p.suffix in (".pdf", ".svg") and p.parent == folder]
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def save_pickle(path: Path, value) -> None:
    """`value` pickled to `path` atomically (None: `path` removed); a failure leaves no partial file."""
    if value is None:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a cache: the report is written all the same
        tmp.unlink(missing_ok=True)

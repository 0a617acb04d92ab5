"""Load result records into one tidy table (one row per cell repetition), cached as Parquet.

Records that cannot be used (truncated or corrupt JSON, a schema this code does not know, a stray
file) are skipped and reported with their path; they never crash the analysis or mix schemas. What a row
holds, and which records are usable, is the record's own definition (loaderbench.schema.record_row,
loaderbench.schema.record.record_problem); this module reads files, caches and helps readers of the table.

Speed (100,000 records, see `python -m loaderbench.analysis.stage_costs`): the Parquet cache is matched to the
files by path, size and mtime as whole columns (no per-row Python), and is kept only while the code that makes its
rows is the same (`code_version.table_version`: the record's schema, this module, pandas and pyarrow), so a warm
load costs one directory scan plus one Parquet read; records that are new or changed are parsed in a process pool
when there are many (each worker tabulates its share, and asks the kernel for the next files while it parses),
and their per-batch `raw` times (half of each file, never used here) are cut out of the text before parsing.

The helpers at the end are how every reader of the table takes its rows and values: `ok_rows` / `ok_mask`
(the rows that carry metrics), `col` (a column or a default), `is_true` and `plain` (values as they come back
from Parquet and float columns), `as_objects` and `keep_dtypes` (column dtypes restored).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from loaderbench.analysis.figures.stages import Stages
from loaderbench.analysis.table.code_version import table_version
from loaderbench.processes import trim_memory
from loaderbench.schema.axes import AXES
from loaderbench.schema.record import OK, record_problem  # the record's one definition (pure Python, no torch)
from loaderbench.schema.record_row import flatten  # a record as a row, its columns declared with the metrics

CACHE_NAME = ".records-cache.parquet"

#: Config columns that are axes of a study (the user's vocabulary, see loaderbench/schema/axes.py); `jpeg_stage`
#: ("full" | "decode") marks the decode-only reference cells when a study has them.
AXIS_COLUMNS = list(AXES)

# Below this many records to parse, a process pool costs more than it saves.
_POOL_MIN = 2000
# Records whose files are opened and asked for ahead of their parsing (at most one lot's descriptors are open at once).
_READ_AHEAD = 128
_FADVISE = hasattr(os, "posix_fadvise")


@dataclass
class LoadReport:
    loaded: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    parsed: int = 0  # records read from JSON this time (the rest came from the cache)


def without_raw(text: str) -> str:
    """The record's text with its `raw` per-batch times left out.

    `raw` is an object of number lists only (no braces inside), written as the key `"raw": {`; a
    string value can never contain that sequence unescaped. The caller parses the full text if the
    cut text does not parse.
    """
    i = text.find('"raw": {')
    if i < 0:
        return text
    j = text.find("}", i)
    return text[:i] + '"raw": null' + text[j + 1 :] if j > 0 else text


def _open_ahead(paths: list[str]) -> list[int | OSError]:
    """A descriptor of each of `paths` (or why it did not open), the kernel asked to start reading each file into
    the page cache without waiting for it."""
    fds: list[int | OSError] = []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            fds.append(exc)
            continue
        fds.append(fd)
        if _FADVISE:
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            except OSError:
                pass  # only a hint
    return fds


def _read(fd: int | OSError) -> bytes | OSError:
    """The whole file behind `fd` (closed after), or why it could not be read."""
    if isinstance(fd, OSError):
        return fd
    try:
        with open(fd, "rb") as fh:
            return fh.read()
    except OSError as exc:
        return exc


def _parse(path: str, size: int, mtime_ns: int, data: bytes | OSError) -> tuple[dict | None, str | None]:
    """One record's row from its file's bytes (`data`, or why they could not be read), or why it is skipped."""
    try:
        if isinstance(data, OSError):
            raise data
        text = data.decode()
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"unreadable ({type(exc).__name__})"
    try:
        try:
            record = json.loads(without_raw(text))
        except ValueError:
            record = json.loads(text)
    except ValueError as exc:
        return None, f"unreadable or truncated JSON ({type(exc).__name__})"
    why = record_problem(record)
    if why:
        return None, why
    try:
        row = flatten(record, path)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        return None, f"malformed record ({type(exc).__name__}: {exc})"
    row["_size"], row["_mtime_ns"] = size, mtime_ns
    row["_digest"] = hashlib.blake2b(data, digest_size=16).hexdigest()  # the file's content, raw times included
    return row, None


def _parse_many(items: list[tuple[str, int, int]]) -> tuple[list[dict], list[tuple[str, str]]]:
    """Rows of `items`. The files of the next _READ_AHEAD are opened and asked for before this lot is parsed: a
    file not in the page cache (records written weeks ago, a network file system) costs a round trip to the disk or
    server, and one at a time those round trips added up to more than the parsing."""
    rows, skipped = [], []
    lots = [items[i : i + _READ_AHEAD] for i in range(0, len(items), _READ_AHEAD)]
    ahead = _open_ahead([path for path, _, _ in lots[0]]) if lots else []
    for i, lot in enumerate(lots):
        datas = [_read(fd) for fd in ahead]  # every descriptor closed before anything can go wrong in parsing
        ahead = _open_ahead([path for path, _, _ in lots[i + 1]]) if i + 1 < len(lots) else []
        for (path, size, mtime), data in zip(lot, datas):
            row, why = _parse(path, size, mtime, data)
            if row is None:
                skipped.append((path, why))
            else:
                rows.append(row)
    return rows, skipped


def _rows_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows) if rows else pd.DataFrame()


def _parse_frame(items: list[tuple[str, int, int]]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """`items` parsed into one frame, in the worker: a frame crosses the pipe as a few arrays per column, where the
    rows as dicts would cost the parent as much to unpickle and tabulate as the worker spent parsing them."""
    rows, skipped = _parse_many(items)
    return _rows_frame(rows), skipped


def _parse_pool(items: list[tuple[str, int, int]], workers: int) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    if workers <= 1 or len(items) < _POOL_MIN:
        return _parse_frame(items)
    chunk = max(500, len(items) // (workers * 4))
    parts = [items[i : i + chunk] for i in range(0, len(items), chunk)]
    frames, skipped = [], []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for frame, sk in pool.map(_parse_frame, parts):
            frames.append(frame)
            skipped += sk
    frames = [f for f in frames if not f.empty]
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), skipped


def record_files(results: Path) -> list[Path]:
    """Every candidate record: <results>/<study>/*.json, skipping temp files of writes in progress."""
    return [Path(p) for p, _, _ in _scan(Path(results))]


def _scan(results: Path) -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of every candidate record, sorted by path."""
    out = []
    try:
        studies = [e for e in os.scandir(results) if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return out
    for d in studies:
        try:
            entries = list(os.scandir(d.path))
        except OSError:
            continue
        for e in entries:
            if e.name.endswith(".json") and not e.name.startswith("."):
                try:
                    st = e.stat()
                except OSError:
                    continue
                out.append((e.path, st.st_size, st.st_mtime_ns))
    out.sort()
    return out


def _read_cache(cache_path: Path) -> pd.DataFrame | None:
    try:
        old = pd.read_parquet(cache_path)
    except Exception:  # noqa: BLE001 - a cache unreadable for any reason is rebuilt, never trusted
        return None
    if not {"path", "_size", "_mtime_ns", "_cache_version"} <= set(old.columns):
        return None
    if (old["_cache_version"] != table_version()).any():  # written by other code: every record is read again
        return None
    return old.drop(columns=["_cache_version"])


def _write_cache(df: pd.DataFrame, cache_path: Path) -> None:
    tmp = cache_path.with_name(f".{cache_path.name}.{os.getpid()}.tmp")
    try:
        df.assign(_cache_version=table_version()).to_parquet(tmp, index=False)
        os.replace(tmp, cache_path)
    except Exception:  # noqa: BLE001 - the cache is an optimisation: any failure to write it leaves no partial file
        try:
            tmp.unlink()
        except OSError:
            pass  # the cache is an optimisation; analysis goes on without it


def load_records(
    results: str | os.PathLike, use_cache: bool = True, workers: int | None = None, progress: Stages | None = None
) -> tuple[pd.DataFrame, LoadReport]:
    """All usable records under `results` as a tidy table; the cache is keyed by each file's size and mtime.

    `workers`: processes that parse new records (default: the CPUs this process may use; a pool is
    started only for 2000 records or more). `progress`: told of the parsing when it is that long.
    """
    results = Path(results)
    report = LoadReport()
    cache_path = results / CACHE_NAME
    files = _scan(results)
    listing = pd.DataFrame(files, columns=["path", "_size", "_mtime_ns"])
    cached = _read_cache(cache_path) if use_cache and cache_path.exists() else None

    if cached is not None and not cached.empty:
        # a file is a hit when the cache has a row of its path, size and mtime: one join each way, no per-row Python
        stamp = ["path", "_size", "_mtime_ns"]
        hit = (listing.merge(cached[stamp], on=stamp, how="left", indicator=True)["_merge"] == "both").to_numpy()
        kept = (cached[stamp].merge(listing, on=stamp, how="left", indicator=True)["_merge"] == "both").to_numpy()
        stale = not kept.all()
        keep = cached[kept] if stale else cached  # no copy of a table that holds every row it had
        del cached  # at 100,000 records each copy of the table is a third of a GiB: hold as few at once as can be
        todo = [files[i] for i in range(len(files)) if not hit[i]]
    else:
        keep = None
        todo = files
        stale = True

    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    parsing = None
    if progress is not None and len(todo) >= _POOL_MIN:  # seconds of parsing, not a blink
        parsing = progress.stage(f"parsing {len(todo):,} of {len(files):,} records", 1)
    new, skipped = _parse_pool(todo, workers)
    if parsing:
        parsing(1)
    report.skipped = skipped
    report.parsed = len(new)

    parts = [p for p in (keep, new) if p is not None and not p.empty]
    del keep, new
    if report.parsed >= _POOL_MIN:
        trim_memory()  # what the parsing and the workers' frames took, freed: given back before the table is built
    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else (parts[0] if parts else pd.DataFrame())
    merged = len(parts) > 1
    del parts
    if merged:
        df = df.sort_values("path", kind="stable", ignore_index=True)
    report.loaded = len(df)
    # Files that were skipped are parsed again next time (they may have been completed since).
    if use_cache and (stale or report.parsed) and not df.empty:
        _write_cache(df, cache_path)
    if not df.empty:
        # kept (renamed): which file version each row came from; the digest of its bytes keys the per-study cache
        # of figures (loaderbench.analysis.figures.draw_all), so a record rewritten with the same content
        # redraws nothing. The table is then copied once, into a block per dtype: the workers' frames joined and
        # the Parquet cache read back hold a block per few columns, and on such a table every column a reader adds
        # costs a slower insert and pandas' PerformanceWarning ("highly fragmented")
        df = (
            df.rename(columns={"_size": "record_bytes", "_mtime_ns": "record_mtime_ns", "_digest": "record_digest"})
            .reset_index(drop=True)
            .copy()
        )
    return df, report


# ----------------------------------------------------------------------------------------------
# reading the table: every reader of the tidy table picks its rows and reads its values through these


def ok_mask(df: pd.DataFrame) -> np.ndarray:
    """Which rows carry metrics: status ok (every row of a table without a status column)."""
    return (df["status"] == OK).to_numpy() if "status" in df else np.ones(len(df), dtype=bool)


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that carry metrics: status ok (every row of a table without a status column). Failed and
    timed-out rows are kept in the table for the reports that count and explain them."""
    return df[df["status"] == OK] if "status" in df else df


def col(rows: pd.DataFrame, name: str, default=None) -> pd.Series:
    """The column `name`, or `default` in every row when the table has no such column (an axis no study of these
    records set, a metric no record carried)."""
    return rows[name] if name in rows else pd.Series(default, index=rows.index, dtype=object)


def is_true(v) -> bool:
    """A boolean axis value that is true: bool, numpy bool, or 1.0 after a round trip through a float column (a
    column mixing booleans and missing values comes back from Parquet as floats)."""
    return (
        v is True
        or v is np.True_
        or (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and v == 1)
    )


def plain(v):
    """A table value as plain Python: None for a missing one (None, NaN), int, float or bool for a numpy scalar, so
    values from different columns and dtypes compare and print alike."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def as_objects(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its string columns as plain objects (str or None): Parquet gives back Arrow-backed strings,
    which are slow to compare row by row. Changes `frame` in place and returns it."""
    for c in frame.columns:
        if frame[c].dtype == "str" or str(frame[c].dtype).startswith("string"):
            frame[c] = frame[c].astype(object).where(frame[c].notna(), None)
    return frame


def keep_dtypes(out: pd.DataFrame, like: pd.DataFrame, columns) -> pd.DataFrame:
    """`out`'s `columns` in the dtypes they have in `like`: the keys of a table built group by group come back as
    objects or floats (an int axis as 2.0). A column that cannot take its old dtype (missing values in an int
    column) is left as it is. Changes `out` in place and returns it."""
    for c in columns:
        try:
            out[c] = out[c].astype(like[c].dtype)
        except (TypeError, ValueError):
            pass
    return out

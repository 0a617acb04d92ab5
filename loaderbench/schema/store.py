"""The results store: one JSON record per cell repetition, written atomically, never duplicated.

Layout: <root>/<study>/<cell_id>-r<repetition>.json. A record is replaced only by a new attempt
at the same (cell, repetition) when the earlier one did not succeed or was disturbed (the machine's speed moved,
loaderbench.schema.disturbance); the earlier attempt's status and error, and a disturbed one's throughput and
machine speed, are kept inside the new record under `previous_attempts`, so nothing measured is lost.
Records go in and come out as loaderbench.schema.record.Record.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loaderbench.schema.record import Record, RecordError, RecordVersionError


class Store:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, study: str, cell_id: str, repetition: int) -> Path:
        return self.root / study / f"{cell_id}-r{repetition}.json"

    def read(self, study: str, cell_id: str, repetition: int) -> Record | None:
        """The record, or None when there is none or its file is torn or malformed (as good as none: measured
        again). RecordError when it is a record of another loaderbench version, which is never overwritten."""
        path = self.path(study, cell_id, repetition)
        try:
            return Record.load(path)
        except RecordVersionError as exc:
            raise RecordVersionError(
                f"{exc}; this folder holds records of another loaderbench version: measure into another "
                f"--results folder, or move {path.parent} away"
            ) from None
        except (OSError, RecordError):
            return None

    def status(self, study: str, cell_id: str, repetition: int) -> str | None:
        record = self.read(study, cell_id, repetition)
        return record.status if record is not None else None

    def is_done(self, study: str, cell_id: str, repetition: int) -> bool:
        record = self.read(study, cell_id, repetition)
        return record is not None and record.ok

    def write(self, record: Record) -> Path:
        """Write atomically (temp file in the same folder, fsync, rename); keep the history of failed attempts."""
        target = self.path(record.study, record.cell_id, record.repetition)
        target.parent.mkdir(parents=True, exist_ok=True)
        previous = self.read(record.study, record.cell_id, record.repetition)
        if previous is not None and previous.ok and not previous.disturbed:
            raise FileExistsError(f"{target}: an ok record exists already; refusing to measure it twice")
        atomic_write_json(target, record.next_attempt(previous).to_json())
        return target

    def records(self, study: str | None = None) -> Iterator[tuple[Path, Record | None]]:
        """Every record file (of `study`), each with its record or None when it is not one this version reads."""
        pattern = f"{study}/*.json" if study else "*/*.json"
        for p in sorted(self.root.glob(pattern)):
            try:
                yield p, Record.load(p)
            except (OSError, RecordError):
                yield p, None


def atomic_write_json(target: Path, obj: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=1, sort_keys=False, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

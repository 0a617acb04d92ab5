"""The results store: one JSON record per cell repetition, written atomically, never duplicated.

Layout: <root>/<study>/<cell_id>-r<repetition>.json. A record is replaced only by a new attempt
at the same (cell, repetition) when the earlier one did not succeed; the earlier attempt's status
and error are kept inside the new record under `previous_attempts`, so nothing measured is lost.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from suite.record import FAILED, OK, SCHEMA, TIMEOUT  # noqa: F401 - the store speaks the record's statuses


class Store:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, study: str, cell_id: str, repetition: int) -> Path:
        return self.root / study / f"{cell_id}-r{repetition}.json"

    def read(self, study: str, cell_id: str, repetition: int) -> dict[str, Any] | None:
        """The record, or None when there is none or it cannot be read (a torn file is as good as none)."""
        try:
            return json.loads(self.path(study, cell_id, repetition).read_text())
        except (OSError, ValueError):
            return None

    def status(self, study: str, cell_id: str, repetition: int) -> str | None:
        rec = self.read(study, cell_id, repetition)
        return rec.get("status") if isinstance(rec, dict) else None

    def is_done(self, study: str, cell_id: str, repetition: int) -> bool:
        return self.status(study, cell_id, repetition) == OK

    def write(self, record: dict[str, Any]) -> Path:
        """Write atomically (temp file in the same folder, fsync, rename); keep the history of failed attempts."""
        target = self.path(record["study"], record["cell_id"], record["repetition"])
        target.parent.mkdir(parents=True, exist_ok=True)
        previous = self.read(record["study"], record["cell_id"], record["repetition"])
        if previous is not None:
            if previous.get("status") == OK:
                raise FileExistsError(f"{target}: an ok record exists already; refusing to measure it twice")
            history = list(previous.get("previous_attempts", []))
            history.append({k: previous.get(k) for k in ("status", "error", "started_at", "finished_at", "launcher")})
            record = {**record, "previous_attempts": history, "attempt": len(history) + 1}
        else:
            record = {**record, "attempt": 1}
        atomic_write_json(target, record)
        return target

    def records(self, study: str | None = None) -> Iterator[tuple[Path, dict[str, Any] | None]]:
        pattern = f"{study}/*.json" if study else "*/*.json"
        for p in sorted(self.root.glob(pattern)):
            try:
                yield p, json.loads(p.read_text())
            except (OSError, ValueError):
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

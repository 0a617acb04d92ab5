"""The results store: atomic records, resume, failed attempts kept, nothing measured twice."""

import json

import pytest

from loaderbench.schema.record import Record
from loaderbench.schema.store import Store


def rec(status="ok", rep=0, **kw):
    times = {"launcher": {"kind": "local"}, "started_at": "2026-01-01T00:00:00+00:00"}
    return Record(study="s", cell_id="c1", repetition=rep, status=status, config={}, **times, finished_at="", **kw)


def test_write_read_and_done(tmp_path):
    store = Store(tmp_path)
    assert store.status("s", "c1", 0) is None
    path = store.write(rec())
    assert path == tmp_path / "s" / "c1-r0.json"
    assert store.is_done("s", "c1", 0)
    assert not list((tmp_path / "s").glob(".*.tmp"))


def test_ok_record_never_overwritten(tmp_path):
    store = Store(tmp_path)
    store.write(rec())
    with pytest.raises(FileExistsError):
        store.write(rec())


def test_failed_attempt_history_kept(tmp_path):
    store = Store(tmp_path)
    store.write(rec("failed", error={"kind": "worker_killed", "message": "x"}))
    store.write(rec("timeout", error={"kind": "timeout", "message": "y"}))
    store.write(rec("ok"))
    final = store.read("s", "c1", 0)
    assert final.status == "ok" and final.attempt == 3
    assert [a["status"] for a in final.previous_attempts] == ["failed", "timeout"]


def test_torn_record_counts_as_missing(tmp_path):
    store = Store(tmp_path)
    p = tmp_path / "s" / "c1-r0.json"
    p.parent.mkdir(parents=True)
    p.write_text('{"schema": "loaderbench.rec')
    assert store.status("s", "c1", 0) is None
    store.write(rec())
    assert json.loads(p.read_text())["status"] == "ok"

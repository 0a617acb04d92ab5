"""Result folders with bad things in them: truncated or corrupt records, records of a newer schema, records of
the wrong shape, stray files and folders. Analysis reports each path it skips and never crashes, in the
library (fuzzed) and through the CLI (`python -m loaderbench.analysis`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loaderbench.analysis.table.records import load_records
from tests.conftest import REPO

_N = int(os.environ.get("LOADERBENCH_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_N or 100, deadline=None, suppress_health_check=list(HealthCheck), derandomize=not _N, database=None
)


def good_record(cell="c0123456789abcde", rep=0, sps=100.0, status="ok", study="s") -> dict:
    rec = {
        "schema": "loaderbench.record/2",
        "study": study,
        "cell_id": cell,
        "repetition": rep,
        "status": status,
        "attempt": 1,
        "config": {"workload": "sleep", "num_workers": 2, "cores": 1, "batch_size": 4},
        "metrics": {"samples_per_s": sps, "time_to_first_batch_s": 0.1, "memory_bytes": {"uss_peak": 100}},
        "env": {"torch": "2.14.1", "cpus_allowed": [0]},
        "started_at": "2026-01-01T00:00:00.000+00:00",
        "finished_at": "2026-01-01T00:00:01.000+00:00",
        "launcher": {"kind": "local"},
    }
    if status != "ok":
        rec["error"] = {"kind": "worker_killed", "message": "DataLoader worker 0 (pid 1) was killed by signal 9"}
    return rec


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False),
        st.text(max_size=12),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=15,
)
FIELDS = [
    "schema",
    "study",
    "cell_id",
    "repetition",
    "status",
    "config",
    "metrics",
    "env",
    "error",
    "attempt",
    "previous_attempts",
    "started_at",
    "launcher",
    "raw",
]


@st.composite
def broken_record(draw) -> bytes:
    rec = good_record()
    for key in draw(st.lists(st.sampled_from(FIELDS), max_size=4, unique=True)):
        if draw(st.booleans()):
            rec[key] = draw(json_values)
        else:
            rec.pop(key, None)
    text = json.dumps(rec)
    how = draw(st.sampled_from(["whole", "cut", "bytes", "inf"]))
    if how == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif how == "inf":  # JSON as Python writes it: NaN and Infinity are allowed
        text = text.replace('"repetition": 0', '"repetition": Infinity').replace("100.0", "NaN")
    data = text.encode()
    if how == "bytes":
        data = draw(st.binary(max_size=200))
    return data


@FUZZ
@given(st.lists(broken_record(), min_size=1, max_size=5))
def test_any_files_load_or_are_skipped(tmp_path_factory, blobs):
    root = tmp_path_factory.mktemp("results")
    (root / "s").mkdir()
    good = root / "s" / "c0000000000000000-r0.json"
    good.write_text(json.dumps(good_record(cell="c0000000000000000")))
    paths = [good]
    for i, data in enumerate(blobs):
        p = root / "s" / f"c{i:016d}x-r0.json"
        p.write_bytes(data)
        paths.append(p)
    df, report = load_records(root, use_cache=False)
    skipped = {p for p, _ in report.skipped}
    assert len(df) + len(skipped) == len(paths), "every file is either a row or reported"
    assert str(good) in set(df["path"])
    for p, why in report.skipped:
        assert why and p.startswith(str(root))


BAD_FILES = {
    "s/c1-r0.json": b'{"schema": "loaderbench.record/2", "study": "s", "cell_id": "c1", "repet',  # truncated
    "s/c2-r0.json": b"\xff\xfe\x00garbage\x00",  # corrupt bytes
    "s/c3-r0.json": b"",  # empty
    "s/notes.json": b'["a stray list"]',
    "s/README.txt": b"not a record",
    "s/sub/c5-r0.json": b"{}",  # a stray folder
    "top.json": b"{}",  # a stray file at the top
}


def test_analysis_cli_skips_bad_files_and_names_them(tmp_path):
    root = tmp_path / "results"
    for name, data in BAD_FILES.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    for rep, sps in enumerate([100.0, 110.0, 90.0]):
        (root / "s" / f"c0123456789abcde-r{rep}.json").write_text(json.dumps(good_record(rep=rep, sps=sps)))
    (root / "s" / "c0123456789abcde-r3.json").write_text(json.dumps(good_record(rep=3, status="failed")))
    newer = good_record(cell="c4")
    newer["schema"] = "loaderbench.record/9"
    (root / "s" / "c4-r0.json").write_text(json.dumps(newer))
    shaped = good_record(cell="c6")
    shaped["config"], shaped["env"], shaped["repetition"] = ["not", "a", "table"], "x", "zero"
    (root / "s" / "c6-r0.json").write_text(json.dumps(shaped))
    typed = good_record(cell="c7", study=7)
    (root / "s" / "c7-r0.json").write_text(json.dumps(typed))
    (root / "s" / ".c8-r0.json.abc.tmp").write_text('{"schema": "loaderbench.record/2", "status": "ok"')
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench.analysis", str(root), "--figures", str(tmp_path / "fig")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    for name in ("c1-r0.json", "c2-r0.json", "c3-r0.json", "notes.json", "c4-r0.json", "c6-r0.json", "c7-r0.json"):
        line = next((ln for ln in out.stderr.splitlines() if ln.startswith("skipped") and name in ln), None)
        assert line, f"{name} not reported:\n{out.stderr}"
    assert "record/9" in out.stderr
    assert ".tmp" not in out.stderr  # a write in progress is not a record, not even a bad one
    assert (tmp_path / "fig" / "s" / "summary.csv").exists()


@pytest.mark.parametrize("content", [b"", b"{", b"\x00" * 10])
def test_records_store_ignores_torn_files(tmp_path, content):
    """The suite's own view (resume) treats a torn record as no record."""
    from loaderbench.schema.store import Store

    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "c1-r0.json").write_bytes(content)
    store = Store(tmp_path)
    assert store.status("s", "c1", 0) is None and not store.is_done("s", "c1", 0)

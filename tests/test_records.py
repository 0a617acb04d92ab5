"""Analysis input: records -> tidy table, bad files skipped with their path, cache kept honest."""

import json

from analysis.records import load_records
from analysis.tables import cell_summary


def record(cell, rep, sps, status="ok", **config):
    cfg = {"workload": "sleep", "num_workers": 2, "cores": 1, **config}
    return {"schema": "loaderbench.record/1", "study": "s", "cell_id": cell, "repetition": rep, "status": status,
            "config": cfg, "metrics": {"samples_per_s": sps, "memory_bytes": {"uss_peak": 100}},
            "env": {"torch": "2.14.1", "cpus_allowed": [0]}}


def put(root, rec, name=None):
    p = root / rec["study"] / (name or f"{rec['cell_id']}-r{rec['repetition']}.json")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(rec))
    return p


def test_tidy_rows_and_skips(tmp_path):
    for rep, v in enumerate([100.0, 110.0, 90.0]):
        put(tmp_path, record("a", rep, v))
    put(tmp_path, record("b", 0, None, status="failed"))
    (tmp_path / "s" / "trunc-r0.json").write_text('{"schema": "loaderbench.record/1", "stu')
    newer = record("c", 0, 1.0)
    newer["schema"] = "loaderbench.record/9"
    put(tmp_path, newer)
    (tmp_path / "s" / "notes.json").write_text('["stray"]')
    df, report = load_records(tmp_path)
    assert len(df) == 4
    assert sorted(df["status"]) == ["failed", "ok", "ok", "ok"]
    skipped = dict(report.skipped)
    assert any("trunc" in p and "truncated" in why for p, why in skipped.items())
    assert any("record/9" in why for why in skipped.values())
    assert any("notes.json" in p for p in skipped)
    assert df.loc[df["cell_id"] == "a", "env_cpus_allowed_n"].eq(1).all()


def test_cache_reflects_changes(tmp_path):
    put(tmp_path, record("a", 0, 100.0))
    df1, _ = load_records(tmp_path)
    assert (tmp_path / ".records-cache.parquet").exists()
    put(tmp_path, record("a", 1, 120.0))
    df2, _ = load_records(tmp_path)
    assert len(df1) == 1 and len(df2) == 2
    (tmp_path / "s" / "a-r0.json").unlink()
    df3, _ = load_records(tmp_path)
    assert list(df3["repetition"]) == [1]


def test_cell_summary_median_and_failures(tmp_path):
    for rep, v in enumerate([100.0, 110.0, 90.0, 105.0]):
        put(tmp_path, record("a", rep, v))
    put(tmp_path, record("a", 4, None, status="timeout"))
    df, _ = load_records(tmp_path)
    s = cell_summary(df)
    row = s.iloc[0]
    assert row["n"] == 4 and row["n_not_ok"] == 1
    assert row["median"] == 102.5
    assert row["ci_low"] <= 102.5 <= row["ci_high"]

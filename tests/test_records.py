"""Analysis input: records -> tidy table, bad files skipped with their path, cache kept honest."""

import json
import warnings

import pandas as pd

from loaderbench.analysis.claims import claims_table
from loaderbench.analysis.table.records import load_records
from loaderbench.analysis.table.summary import cell_summary
from loaderbench.fake_records.questions import COW_OK, cow_records
from loaderbench.fake_records.studies import study_cells, study_records, write_records


def record(cell, rep, sps, status="ok", **config):
    cfg = {"workload": "sleep", "num_workers": 2, "cores": 1, **config}
    return {
        "schema": "loaderbench.record/2",
        "study": "s",
        "cell_id": cell,
        "repetition": rep,
        "status": status,
        "config": cfg,
        "metrics": {"samples_per_s": sps, "memory_bytes": {"uss_peak": 100}},
        "env": {"torch": "2.14.1", "cpus_allowed": [0]},
    }


def put(root, rec, name=None):
    p = root / rec["study"] / (name or f"{rec['cell_id']}-r{rec['repetition']}.json")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(rec))
    return p


def test_tidy_rows_and_skips(tmp_path):
    for rep, v in enumerate([100.0, 110.0, 90.0]):
        put(tmp_path, record("a", rep, v))
    put(tmp_path, record("b", 0, None, status="failed"))
    (tmp_path / "s" / "trunc-r0.json").write_text('{"schema": "loaderbench.record/2", "stu')
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


def test_cached_load_parses_nothing_and_returns_the_same_table(tmp_path):
    for rep, v in enumerate([100.0, 110.0, 90.0]):
        put(tmp_path, record("a", rep, v))
    df1, r1 = load_records(tmp_path)
    df2, r2 = load_records(tmp_path)
    assert r1.parsed == 3 and r2.parsed == 0
    assert list(df2["samples_per_s"]) == list(df1["samples_per_s"])
    assert list(df2.columns) == list(df1.columns)


def test_stale_cache_version_is_rebuilt(tmp_path):
    import pandas as pd

    put(tmp_path, record("a", 0, 100.0))
    load_records(tmp_path)
    cache = tmp_path / ".records-cache.parquet"
    old = pd.read_parquet(cache).assign(_cache_version="0", samples_per_s=-1.0)
    old.to_parquet(cache, index=False)
    df, rep = load_records(tmp_path)
    assert rep.parsed == 1 and df["samples_per_s"].tolist() == [100.0]


def test_a_table_made_by_other_code_is_made_again(tmp_path, monkeypatch):
    """The cache is kept only under the version of the code that makes its rows (the record's schema, the table
    module, pandas and pyarrow): another version reads every record again."""
    from loaderbench.analysis.table import records as table

    put(tmp_path, record("a", 0, 100.0))
    put(tmp_path, record("a", 1, 101.0))
    assert load_records(tmp_path)[1].parsed == 2
    assert load_records(tmp_path)[1].parsed == 0
    monkeypatch.setattr(table, "table_version", lambda: "other code")
    assert load_records(tmp_path)[1].parsed == 2
    assert load_records(tmp_path)[1].parsed == 0


def test_raw_times_are_skipped_but_everything_else_is_read(tmp_path):
    rec = record("a", 0, 123.0)
    rec["raw"] = {"t_iter": [0.0], "got": [[0.1, 0.2]], "done": [[0.11, 0.21]]}
    rec["error"] = {"kind": "x", "message": 'a message quoting "raw": {"got": 1} in it'}
    put(tmp_path, rec)
    df, rep = load_records(tmp_path)
    assert not rep.skipped
    assert df.loc[0, "samples_per_s"] == 123.0
    assert df.loc[0, "error_message"] == 'a message quoting "raw": {"got": 1} in it'


def test_process_pool_gives_the_same_table(tmp_path, monkeypatch):
    import loaderbench.analysis.table.records as records

    for cell in "abcdef":
        for rep in range(3):
            put(tmp_path, record(cell, rep, 100.0 + rep))
    serial, _ = load_records(tmp_path, use_cache=False, workers=1)
    monkeypatch.setattr(records, "_POOL_MIN", 2)
    pooled, _ = load_records(tmp_path, use_cache=False, workers=2)
    assert serial.equals(pooled)


def test_env_columns_for_the_report(tmp_path):
    rec = record("a", 0, 1.0)
    rec["env"].update(
        shm_size=2**30,
        mem_total=2**34,
        ulimit_nofile=[1024, 4096],
        container_image="img:1",
        slurm={"job_id": "7", "array_task_id": "3", "partition": "cpu"},
    )
    put(tmp_path, rec)
    df, _ = load_records(tmp_path)
    row = df.iloc[0]
    assert row["env_shm_size"] == 2**30 and row["env_mem_total"] == 2**34
    assert row["env_ulimit_nofile"] == 1024 and row["env_container_image"] == "img:1"
    assert row["env_slurm_job_id"] == "7" and row["env_slurm_array_task_id"] == "3"


def test_a_loaded_table_takes_new_columns_without_a_fragmentation_warning(tmp_path):
    """The table as loaded (parsed in a pool and joined; then read back from the Parquet cache) holds a block per
    dtype: the claims decided on it, and the dozens of columns questions and figures add to their rows, cost pandas
    no PerformanceWarning ("highly fragmented")."""
    write_records(tmp_path, study_records("scaling", study_cells(), repetitions=3, raw=False))
    write_records(tmp_path, cow_records(COW_OK))
    for parsed in (True, False):
        df, report = load_records(tmp_path, workers=2)
        assert (report.parsed > 2000) == parsed  # over 2000 new records: parsed in a pool of 2
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.PerformanceWarning)
            claims = claims_table(df)
            added = df.assign(**{f"derived_{i}": float(i) for i in range(70)})
        assert set(claims["verdict"]) - {"not measured yet"}
        assert added.shape == (len(df), df.shape[1] + 70)

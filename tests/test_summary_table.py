"""A study's summary table reads the same whether its records came from their JSON files or from the records cache:
an axis a cell does not have (None in JSON, NaN after a parquet round trip) is blank in both."""

import math

import pandas as pd

from loaderbench.analysis.table.summary import write_summary


def _summary(missing):
    return pd.DataFrame(
        {
            "cell_id": ["a", "b", "c"],
            "workload": ["jpeg", "shards", "shards"],
            "sharding": [missing, "by-worker", "by-rank"],
            "n": [3, 3, 3],
            "median": [100.0, 120.0, 110.0],
        }
    )


def test_an_absent_axis_reads_blank_from_json_and_from_the_cache(tmp_path):
    (tmp_path / "json").mkdir(), (tmp_path / "cache").mkdir()
    write_summary(_summary(None), tmp_path / "json", "storage")
    write_summary(_summary(math.nan), tmp_path / "cache", "storage")
    from_json, from_cache = ((tmp_path / d / "summary.md").read_text() for d in ("json", "cache"))
    assert from_json == from_cache
    table = from_cache[from_cache.index("| workload") :]
    assert "| sharding" in table and "by-worker" in table and "nan" not in table

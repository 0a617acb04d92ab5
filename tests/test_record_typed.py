"""Records are typed when read back: one class reads and writes them (loaderbench.schema.record.Record), refuses
other schemas, and declares every metric the measuring side writes; the analysis's columns come from those
declarations; a cell's settings reach its process typed (loaderbench.schema.cell.CellConfig), and the config the
record keeps is the cell's, unchanged."""

from __future__ import annotations

import json
import types
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from loaderbench.analysis.table import records as table
from loaderbench.schema import record_row
from loaderbench.schema.cell import CELL_SETTINGS, CellConfig
from loaderbench.schema.metrics import Metrics
from loaderbench.schema.record import SCHEMA, Record, RecordError, RecordVersionError
from loaderbench.schema.store import Store
from tests.reference_checks import assert_every_record, failures


def a_record(**kw) -> Record:
    fields: dict[str, Any] = dict(
        study="s",
        cell_id="c1",
        repetition=0,
        config={"workload": "sleep", "num_workers": 2},
        status="ok",
        launcher={"kind": "local"},
        started_at="2026-01-01T00:00:00.000+00:00",
        finished_at="2026-01-01T00:00:02.500+00:00",
        metrics={"samples_per_s": 120.0, "memory_bytes": {"uss_peak": 2**20}},
    )
    return Record(**{**fields, **kw})


# --- one class reads and writes -----------------------------------------------------------------------------


def test_a_record_reads_back_as_it_was_written(tmp_path):
    rec = a_record(warnings=["w"], env={"host": "h"})
    path = tmp_path / "r.json"
    rec.dump(path)
    back = Record.load(path)
    assert back == rec and Record.load(json.loads(path.read_text())) == rec
    assert back.to_json() == json.loads(path.read_text()) and back.to_json()["schema"] == SCHEMA
    assert (back.samples_per_s, back.uss_peak_bytes, back.wall_s, back.ok) == (120.0, 2**20, 2.5, True)


def _reads_back(path) -> str | None:
    stored, back = json.loads(path.read_text()), Record.load(path).to_json()
    differ = sorted(k for k in stored.keys() | back.keys() if stored.get(k, ...) != back.get(k, ...))
    return f"read back, these keys differ: {', '.join(differ)}" if differ else None


def test_every_reference_record_reads_back_to_its_own_json():
    assert_every_record(_reads_back)


def test_a_record_that_reads_back_otherwise_is_named(tmp_path):
    """The check on the shipped records can fail: an unknown key is dropped on reading, a torn file unreadable."""
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps({**a_record().to_json(), "colour": "red"}))
    torn = tmp_path / "torn.json"
    torn.write_text('{"schema": ')
    good = tmp_path / "good.json"
    a_record().dump(good)
    wrong = failures(_reads_back, [extra, good, torn])
    assert len(wrong) == 2 and wrong[0].endswith("extra.json: read back, these keys differ: colour"), wrong
    assert "torn.json: JSONDecodeError" in wrong[1], wrong


def test_another_schema_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**a_record().to_json(), "schema": "loaderbench.record/1"}))
    with pytest.raises(RecordVersionError, match=rf"{path}: schema 'loaderbench.record/1'"):
        Record.load(path)
    path.write_text(json.dumps({**a_record().to_json(), "schema": "loaderbench.record/9"}))
    with pytest.raises(RecordVersionError, match="written by another version of loaderbench"):
        Record.load(path)


@pytest.mark.parametrize(
    "change, why",
    [
        ({"schema": None}, "not a loaderbench record"),
        ({"repetition": "0"}, r"malformed record \(repetition is a str\)"),
        ({"status": "done"}, "malformed record"),
        ({"status": "ok", "error": {"kind": "x", "message": "y"}}, "malformed record"),
        ({"config": None}, r"config is a NoneType"),
    ],
)
def test_a_malformed_record_is_refused_whole(change, why):
    with pytest.raises(RecordError, match=why) as info:
        Record.load({**a_record().to_json(), **change})
    assert not isinstance(info.value, RecordVersionError)


def test_a_torn_file_is_an_error_to_load_and_no_record_to_the_store(tmp_path):
    path = Store(tmp_path).path("s", "c1", 0)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": "loaderbench.rec')
    with pytest.raises(RecordError, match="unreadable or truncated JSON"):
        Record.load(path)
    assert Store(tmp_path).read("s", "c1", 0) is None


def test_the_store_never_reads_or_overwrites_a_record_of_another_version(tmp_path):
    store = Store(tmp_path)
    path = store.path("s", "c1", 0)
    path.parent.mkdir(parents=True)
    old = {**a_record(status="failed", error={"kind": "x", "message": "y"}).to_json(), "schema": "loaderbench.record/1"}
    path.write_text(json.dumps(old))
    with pytest.raises(RecordVersionError, match="another --results folder"):
        store.status("s", "c1", 0)
    with pytest.raises(RecordVersionError):
        store.write(a_record())
    assert json.loads(path.read_text()) == old
    assert [r for _, r in store.records("s")] == [None]  # listed, not read as a record of this version


def test_readers_ask_for_declared_metrics_and_settings_only():
    rec = a_record()
    assert rec.metric("samples_per_s") == 120.0 and rec.metric("end_to_end_samples_per_s") is None
    assert rec.setting("num_workers") == 2 and rec.setting("prefetch_factor") is None
    with pytest.raises(KeyError, match="not a metric"):
        rec.metric("samples_per_second")
    with pytest.raises(KeyError, match="not a setting"):
        rec.setting("workers")


# --- every metric declared; the analysis's columns from the declarations ------------------------------------


def _plain(hint: Any) -> list[Any]:
    """The types a hint allows (X | None gives X and NoneType)."""
    return list(get_args(hint)) if get_origin(hint) in (Union, types.UnionType) else [hint]


def undeclared(values: dict, block: Any = Metrics, path: str = "") -> list[str]:
    """Keys of `values` (a record's metrics) that its TypedDict `block` does not declare, blocks inside included."""
    hints = get_type_hints(block)
    out = []
    for key, value in values.items():
        if key not in hints:
            out.append(path + key)
            continue
        for t in _plain(hints[key]):
            if is_typeddict(t) and isinstance(value, dict):
                out += undeclared(value, t, f"{path}{key}.")
            elif get_origin(t) is list and is_typeddict(get_args(t)[0]) and isinstance(value, list):
                for item in value:
                    out += undeclared(item, get_args(t)[0], f"{path}{key}[].")
    return out


def test_the_check_for_undeclared_metrics_finds_them():
    metrics = {"samples_per_s": 1.0, "cpu_s": {"main": 1.0, "threads": 2.0}, "ranks": [{"samples_per_s": 1, "x": 0}]}
    assert undeclared({**metrics, "speed": 3}) == ["cpu_s.threads", "ranks[].x", "speed"]


def test_every_metric_of_the_reference_records_is_declared():
    """The reference records were measured on a GPU: the model consumer's copy metrics are in them."""

    def declared(path) -> str | None:
        missing = undeclared(Record.load(path).metrics or {})
        return f"undeclared metrics: {', '.join(missing)}" if missing else None

    assert_every_record(declared)


def test_the_analysis_columns_are_the_declared_metrics():
    assert table.flatten is record_row.flatten
    for column, path in record_row.METRIC_PATHS.items():
        block: Any = Metrics
        for key in path[:-1]:
            block = next(t for t in _plain(get_type_hints(block)[key]) if is_typeddict(t))
        assert path[-1] in get_type_hints(block), (column, path)
    row = record_row.flatten(a_record().to_json(), "p.json")
    assert set(record_row.METRIC_PATHS) <= set(row) and row["samples_per_s"] == 120.0
    assert row["uss_peak_bytes"] == 2**20


def test_a_zero_worker_row_has_no_worker_settings_whoever_wrote_it():
    """Records written before start_method and sharing_strategy became worker-only hold their defaults at
    num_workers = 0; their rows read as the records written now."""
    old = a_record(config={"workload": "sleep", "num_workers": 0, "start_method": "fork", "prefetch_factor": None})
    row = record_row.flatten(old.to_json(), "p.json")
    assert row["start_method"] is None and row["prefetch_factor"] is None
    with_workers = a_record(config={"workload": "sleep", "num_workers": 2, "start_method": "spawn"})
    assert record_row.flatten(with_workers.to_json(), "p.json")["start_method"] == "spawn"


# --- the typed cell ------------------------------------------------------------------------------------------


def test_a_config_with_a_key_no_cell_has_is_refused_naming_it():
    with pytest.raises(ValueError, match="not settings of a cell: workers"):
        CellConfig.of({"workers": 2, "warmup_batches": 1, "measure_batches": 1, "seed": 0})
    with pytest.raises(ValueError, match="measure_batches"):
        CellConfig.of({"warmup_batches": 1, "seed": 0})


# --- real cells: what the runner writes -------------------------------------------------------------------------

CELLS = {  # studies whose records carry every block of metrics the measuring side writes on a CPU
    "ranks": {
        "study": {"target_precision": 0.5, "min_windows": 10, "max_windows": 10, "max_measure_s": 5},
        "matrix": {"workload": "sleep", "sleep_ms": 0.5, "num_workers": 1, "ranks": 2},
    },
    "rng": {"study": {"epochs": 2}, "matrix": {"workload": "rng", "num_workers": 2, "cores": 1}},
    "model": {"matrix": {"workload": "tutorial", "sleep_ms": 0.0, "model": "tutorial", "device": "cpu"}},
    "stream": {"matrix": {"workload": "custom", "factory": "stream:unsharded", "num_workers": 2}},
    "shards": {
        "dataset": {"images": 16},
        "matrix": {"workload": "shards", "storage": "http", "num_workers": 1, "shards": 4, "shard_samples": 4},
    },
}
STREAM = """
import torch
from torch.utils.data import IterableDataset


class Stream(IterableDataset):
    def __iter__(self):
        for i in range(100_000):
            yield torch.full((4,), float(i))


def unsharded():
    return Stream()
"""


@pytest.mark.slow
def test_every_metric_a_cell_writes_is_declared_and_its_config_is_the_cells(tmp_path):
    from loaderbench.launch.local import run_local
    from loaderbench.storage.host_tools import find_program
    from loaderbench.study.study_file import parse_study

    (tmp_path / "stream.py").write_text(STREAM)
    store = Store(tmp_path / "results")
    seen: set[str] = set()
    for name, tables in CELLS.items():
        if name == "shards" and find_program("nginx") is None:
            continue  # tests/test_storage_cells.py says what is missing
        raw = {
            **tables,
            "study": {
                "name": name,
                "repetitions": 1,
                "warmup_batches": 1,
                "measure_batches": 4,
                **tables.get("study", {}),
            },
            "matrix": {"batch_size": 2, **tables["matrix"]},
        }
        study = parse_study(raw, where=name, path=tmp_path / f"{name}.toml")
        (cell,) = study.cells
        assert not run_local(study, store).failed, name
        (rec,) = [r for _, r in store.records(name)]
        assert rec is not None and rec.ok, (name, rec and rec.error)
        assert undeclared(rec.metrics or {}) == [], name
        assert json.dumps(rec.config) == json.dumps(cell.config)  # the record keeps the cell's config as it was
        assert CellConfig.of(rec.config) == cell.typed and set(rec.config) <= CELL_SETTINGS
        seen |= set(rec.metrics or {})
    assert {"ranks", "precision", "rng_duplicates", "model", "duplicate_samples"} <= seen

"""Cell ids never change: every shipped study expands into the cells it always did (tests/shipped_cell_ids.json,
computed before the axis table was typed), and every shipped reference record's id is its config's. One list
of worker-only axes serves the study expansion and the analysis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import loaderbench.study.factory_check as factory_check
from loaderbench.analysis.table import scaling as aggregate
from loaderbench.schema.axes import AXES, WORKER_ONLY_AXES
from loaderbench.schema.cell import cell_id_of
from loaderbench.schema.record import Record
from loaderbench.study.study_file import load_study, normalize
from tests.conftest import REPO
from tests.reference_checks import REFERENCE, assert_every_record, failures

PINNED = json.loads((Path(__file__).parent / "shipped_cell_ids.json").read_text())["studies"]
CONTEXT = ("factory_root", "factory_file", "question")  # travels with a cell, no part of its id


def _bound_without_importing(spec_text, args, study_dir, timeout_s, pickled_by):
    """A custom factory checked as if its module file hashed to zeros: the ids then depend on the study alone."""
    module = spec_text.split(":")[0]
    return factory_check.CheckedFactory(
        spec_text, str(study_dir), str(study_dir / f"{module}.py"), "0" * 64, "map-style"
    )


def shipped_studies() -> list[str]:
    return sorted(
        str(p.relative_to(REPO))
        for p in [*(REPO / "loaderbench" / "studies").glob("*.toml"), *(REPO / "examples").glob("*/study.toml")]
    )


def test_every_shipped_study_is_pinned():
    assert shipped_studies() == sorted(PINNED), "a study was added or removed: pin its ids in shipped_cell_ids.json"


@pytest.mark.parametrize("study", sorted(PINNED))
def test_a_shipped_study_expands_into_the_cells_it_always_did(study, monkeypatch):
    monkeypatch.setattr(factory_check, "check_factory", _bound_without_importing)
    ids = {c.cell_id for c in load_study(REPO / study, max_cores=4096).cells}
    pinned = set(PINNED[study])
    assert ids == pinned, f"new: {sorted(ids - pinned)}; gone: {sorted(pinned - ids)}"


def _id_is_its_configs(path: Path) -> str | None:
    record = Record.load(path)
    axes = {k: v for k, v in record.config.items() if k in AXES}
    measure = {k: v for k, v in record.config.items() if k not in AXES and k not in CONTEXT}
    made, normalized = cell_id_of(axes, measure), cell_id_of(normalize(axes), measure)
    if made != record.cell_id:
        return f"cell_id {record.cell_id}, its config's {made}"
    if normalized != record.cell_id:  # as a study expanded now would make it
        return f"cell_id {record.cell_id}, its config's once normalized {normalized}"
    return None


def test_every_reference_records_id_is_its_configs_and_survives_normalizing():
    assert_every_record(_id_is_its_configs)


def test_a_record_whose_id_is_not_its_configs_is_named(tmp_path):
    (first, *_) = REFERENCE
    moved = json.loads(first.read_text())
    moved["config"]["num_workers"] = (moved["config"].get("num_workers") or 0) + 3
    path = tmp_path / "moved.json"
    path.write_text(json.dumps(moved))
    (why,) = failures(_id_is_its_configs, [first, path])
    assert why.startswith(f"{path}: cell_id {moved['cell_id']}, its config's "), why


def test_the_reference_records_are_there():
    assert len(REFERENCE) >= 50


def test_one_list_of_worker_only_axes_for_the_expansion_and_the_analysis():
    assert set(WORKER_ONLY_AXES) == {name for name, a in AXES.items() if a.needs_workers}
    assert aggregate.WORKER_ONLY_AXES is WORKER_ONLY_AXES
    defaults = {name: a.default for name, a in AXES.items()} | {"start_method": "forkserver"}
    with_workers, without = normalize(defaults | {"num_workers": 2}), normalize(defaults | {"num_workers": 0})
    assert [a for a in AXES if without[a] is None and with_workers[a] is not None] == list(WORKER_ONLY_AXES)


def test_an_axis_blanked_by_another_blanks_what_depends_on_it():
    defaults = {name: a.default for name, a in AXES.items()}
    thread = normalize(defaults | {"num_workers": 2, "worker_method": "thread", "start_method": "forkserver"})
    assert thread["start_method"] is None and thread["forkserver_preload"] is None  # no start method, no preload
    process = normalize(defaults | {"num_workers": 2, "start_method": "forkserver", "forkserver_preload": True})
    assert process["forkserver_preload"] is True
    on_cpu = normalize(defaults | {"model": "resnet18", "device": "cpu", "step_ms": 25.0})
    assert on_cpu["step_ms"] == 0.0 and on_cpu["step_kind"] is None  # the model runs: nothing is simulated
    no_model = normalize(defaults | {"device": "cpu", "step_ms": 25.0})
    assert no_model["device"] is None and no_model["step_ms"] == 25.0

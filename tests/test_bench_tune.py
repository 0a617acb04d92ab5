"""suite.bench.tune_vs_grid without measuring: the matrices it builds are valid studies of one workload, and a
tune.json scenario is scored against the grid's records as documented."""

import pytest

from suite.bench.tune_vs_grid import grid_cells, matrix_study_text, scenario_row, summary
from suite.record import Record
from suite.study import load_study
from suite.tune.space import scenarios


@pytest.mark.parametrize("quick, workers, n_cores", [(False, [0, 1, 2, 3, 4, 6, 8], [1, 2]), (True, [0, 1, 2, 4], [1])])
def test_matrices_are_the_quick_study_per_workload(tmp_path, quick, workers, n_cores):
    path = tmp_path / "m.toml"
    path.write_text(matrix_study_text("cpu", quick))
    study = load_study(path, max_cores=2)
    assert {c["workload"] for c in study.cells} == {"cpu"}
    assert sorted({c["num_workers"] for c in study.cells}) == workers
    assert sorted({c["cores"] for c in study.cells}) == n_cores
    assert study.settings.repetitions == 3 and study.settings.measure_batches == 30
    assert len(scenarios(study.cells)) == len(n_cores)


def _records(cell_values: dict[str, list[float]], seconds: float):
    workers = {"a": 4, "b": 2, "c": 0}
    out = []
    for cid, values in cell_values.items():
        for rep, v in enumerate(values):
            rec = Record(study="s", cell_id=cid, repetition=rep, config={"num_workers": workers[cid]}, status="ok",
                         launcher={},
                         started_at="2026-01-01T00:00:00+00:00", finished_at=f"2026-01-01T00:00:0{int(seconds)}+00:00",
                         metrics={"samples_per_s": v})
            out.append(rec.to_json())
    return out


def _scenario(answer_cell: str, cell_seconds: float):
    return {"label": "workload=cpu cores=1", "answer": {"cell_id": answer_cell, "settings": {"num_workers": 2},
                                                       "median": 100.0},
            "cost": {"cell_seconds": cell_seconds, "measurements": 4, "grid_cell_seconds_estimate": 30.0}}


def test_scenario_row_scores_the_tuned_cell_on_the_grids_records():
    grid = grid_cells(_records({"a": [100, 101, 102], "b": [90, 91, 92], "c": [50, 51, 52]}, seconds=2))
    row = scenario_row(_scenario("b", 6.0), ["a", "b", "c"], grid)
    assert row["fraction_of_best"] == pytest.approx(91 / 101)
    assert row["grid_best_cell"] == "a" and row["grid_best_num_workers"] == 4
    assert row["verdict"] == "slower"  # 3 v 3, every b below every a by more than 5%
    assert row["grid_cell_seconds"] == pytest.approx(18.0) and row["fraction_of_cost"] == pytest.approx(6 / 18)
    best = scenario_row(_scenario("a", 6.0), ["a", "b", "c"], grid)
    assert best["fraction_of_best"] == 1.0 and best["verdict"] == "the grid's best"
    s = summary([{"scenarios": [row, best]}])
    assert s["met_best"] == 1 and s["met_cost"] == 0 and s["min_fraction_of_best"] == pytest.approx(91 / 101)

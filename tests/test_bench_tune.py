"""loaderbench.bench.tune_vs_grid without measuring: the matrices it builds are valid studies of one workload, and a
tune.json scenario is scored against the grid's records as documented."""

import pytest

from loaderbench.bench.tune_vs_grid import (
    control_row,
    control_scores,
    grid_cells,
    holdout_scores,
    matrix_study_text,
    over_runs,
    scenario_row,
    summary,
)
from loaderbench.schema.record import Record
from loaderbench.study.study_file import load_study
from loaderbench.tune.space import scenarios


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


def test_the_doubled_grid_of_the_control_has_the_same_cells(tmp_path):
    one, two = tmp_path / "one.toml", tmp_path / "two.toml"
    one.write_text(matrix_study_text("jpeg", False))
    two.write_text(matrix_study_text("jpeg", False, repetitions=6))
    a, b = load_study(one, max_cores=2), load_study(two, max_cores=2)
    assert a.name == b.name and b.settings.repetitions == 6
    assert [c.cell_id for c in a.cells] == [c.cell_id for c in b.cells]


def _records(cell_values: dict[str, list[float]], seconds: float, first_rep: int = 0):
    workers = {"a": 4, "b": 2, "c": 0}
    out = []
    for cid, values in cell_values.items():
        for rep, v in enumerate(values, start=first_rep):
            rec = Record(
                study="s",
                cell_id=cid,
                repetition=rep,
                config={"num_workers": workers[cid]},
                status="ok",
                launcher={},
                started_at="2026-01-01T00:00:00+00:00",
                finished_at=f"2026-01-01T00:00:0{int(seconds)}+00:00",
                metrics={"samples_per_s": v},
            )
            out.append(rec)
    return out


def _scenario(answer_cell: str, cell_seconds: float):
    return {
        "label": "workload=cpu cores=1",
        "answer": {"cell_id": answer_cell, "settings": {"num_workers": 2}, "median": 100.0},
        "cost": {"cell_seconds": cell_seconds, "measurements": 4, "grid_cell_seconds_estimate": 30.0},
    }


def test_scenario_row_scores_the_tuned_cell_on_the_grids_records_and_on_fresh_repetitions():
    grid = grid_cells(_records({"a": [100, 101, 102], "b": [90, 91, 92], "c": [50, 51, 52]}, seconds=2))
    row = scenario_row(_scenario("b", 6.0), ["a", "b", "c"], grid)
    assert row["fraction_of_best_in_grid"] == pytest.approx(91 / 101)
    assert row["fraction_of_best"] is None  # the two choices differ: scored on fresh repetitions only
    assert row["in_grid_comparison"].startswith("slower")  # 3 v 3, every b below every a by more than 5%
    assert row["grid_best_cell"] == "a" and row["grid_best_num_workers"] == 4 and row["tuned_cell"] == "b"
    assert row["grid_cell_seconds"] == pytest.approx(18.0) and row["fraction_of_cost"] == pytest.approx(6 / 18)

    # measured again, the grid's best read high (winner's curse) and b is as good: scored on the fresh values
    tied = holdout_scores(row, tuned=[95, 96, 97, 98, 99], best=[94, 96, 97, 99, 100])
    assert tied["fraction_of_best"] == pytest.approx(97 / 97) and tied["verdict"] != "slower"
    assert tied["grid_best_over_holdout"] == pytest.approx(101 / 97)
    slower = holdout_scores(row, tuned=[80, 81, 82, 83, 84], best=[100, 101, 102, 103, 104])
    assert slower["fraction_of_best"] == pytest.approx(82 / 102) and slower["verdict"] == "slower"
    failed = holdout_scores(row, tuned=[], best=[100, 101])
    assert failed["fraction_of_best"] is None and failed["verdict"] == "a re-measurement failed"

    best = scenario_row(_scenario("a", 6.0), ["a", "b", "c"], grid)
    assert best["fraction_of_best"] == 1.0 and best["fraction_of_best_in_grid"] == 1.0
    assert best["verdict"] == "the grid's best"
    s = summary([{"workload": "cpu", "scenarios": [slower, best]}])
    assert s["met_best"] == 1 and s["met_cost"] == 0 and s["min_fraction_of_best"] == pytest.approx(82 / 102)
    assert s["min_fraction_of_best_in_grid"] == pytest.approx(91 / 101)
    assert s["per_matrix"]["cpu"] == {
        "fraction_of_cost": pytest.approx(12 / 36),
        "min_fraction_of_best": pytest.approx(82 / 102),
    }


def test_a_second_grid_is_scored_like_tune_against_the_first():
    records = _records({"a": [100, 101, 102], "b": [90, 91, 92], "c": [50, 51, 52]}, seconds=2) + _records(
        {"a": [95, 96, 97], "b": [99, 100, 98], "c": [50, 51, 52]}, seconds=2, first_rep=3
    )
    first, second = grid_cells(records, range(3)), grid_cells(records, range(3, 6))
    assert first["a"]["values"] == [100, 101, 102] and second["a"]["values"] == [95, 96, 97]
    assert first["a"]["cell_s"] == pytest.approx(6.0)  # the cost is the first grid's alone
    row = control_row(scenario_row(_scenario("a", 6.0), ["a", "b", "c"], first), ["a", "b", "c"], first, second)
    assert row["control"] == {"cell": "b", "num_workers": 2, "fraction_of_best": None}  # the second grid chose b
    scored = control_scores(row, chosen=[90, 91, 92, 93, 94], best=[100, 101, 102, 103, 104])
    assert scored["control"]["fraction_of_best"] == pytest.approx(92 / 102)
    assert scored["control"]["verdict"] == "slower"
    assert scored["fraction_of_best"] == 1.0  # tune chose the first grid's best: its own score is unchanged
    same = control_row(row, ["a", "b", "c"], first, first)
    assert same["control"]["fraction_of_best"] == 1.0 and same["control"]["verdict"] == "the grid's best"
    s = summary([{"workload": "cpu", "scenarios": [scored]}])
    assert s["per_matrix"]["cpu"]["control_min_fraction_of_best"] == pytest.approx(92 / 102)
    o = over_runs([s, summary([{"workload": "cpu", "scenarios": [same]}])])
    assert o["per_matrix"]["cpu"]["control_runs_met_best"] == 1
    assert o["per_matrix"]["cpu"]["control_min_fraction_of_best"] == [pytest.approx(92 / 102), 1.0]

    import io

    from rich.console import Console

    from loaderbench.bench.result_tables import tune_vs_grid

    out = io.StringIO()
    run = {"matrices": [{"workload": "cpu", "scenarios": [scored]}], "summary": s}
    tune_vs_grid(
        {
            "targets": {"fraction_of_best": 0.95, "fraction_of_cost": 0.30},
            "confidence": 0.9,
            "holdout_repetitions": 5,
            "control": True,
            "runs": [run, run],
            "over_runs": over_runs([s, s]),
        },
        Console(file=out, width=250),
    )
    text = out.getvalue()
    assert "2nd grid of best" in text and "0.902" in text and "(a second grid: 0.902)" in text
    assert "a second grid reached 95% of the first one's best in 0 of 2 runs" in text


def test_the_table_shows_both_fractions_and_the_per_matrix_cost():
    import io

    from rich.console import Console

    from loaderbench.bench.result_tables import tune_vs_grid

    grid = grid_cells(_records({"a": [100, 101, 102], "b": [90, 91, 92], "c": [50, 51, 52]}, seconds=2))
    row = holdout_scores(
        scenario_row(_scenario("b", 6.0), ["a", "b", "c"], grid),
        tuned=[96, 97, 98, 99, 100],
        best=[97, 98, 99, 100, 101],
    )
    matrices = [{"workload": "cpu", "scenarios": [row]}]
    out = io.StringIO()
    run = {"matrices": matrices, "summary": summary(matrices), "load": {"start": [0.4, 1, 1], "end": [3, 2, 1]}}
    tune_vs_grid(
        {
            "targets": {"fraction_of_best": 0.95, "fraction_of_cost": 0.30},
            "confidence": 0.9,
            "holdout_repetitions": 5,
            "runs": [run],
            "over_runs": over_runs([run["summary"]]),
        },
        Console(file=out, width=250),
    )
    text = out.getvalue()
    assert "0.990" in text and "0.901" in text  # fresh repetitions 98/99; the grid's own records 91/101
    assert "cpu: 0.33 of the grid's cell-seconds" in text and "load average 0.4 at its start" in text
    assert "over 1 runs" not in text  # one run: no table over runs


def _matrix_summary(per_matrix: dict[str, tuple[float, float]]) -> dict:
    return {"per_matrix": {w: {"fraction_of_cost": c, "min_fraction_of_best": b} for w, (c, b) in per_matrix.items()}}


def test_over_runs_counts_the_runs_that_met_both_targets_per_matrix_and_everywhere():
    runs = [
        _matrix_summary({"cpu": (0.28, 1.0), "jpeg": (0.32, 1.0)}),  # jpeg over the cost
        _matrix_summary({"cpu": (0.26, 0.946), "jpeg": (0.25, 1.0)}),  # cpu under 95% of the best
        _matrix_summary({"cpu": (0.30, 0.95), "jpeg": (0.27, 1.0)}),
    ]  # both at their targets: met
    o = over_runs(runs)
    assert o["runs"] == 3 and o["runs_met_both_everywhere"] == 1
    assert o["per_matrix"]["cpu"] == {
        "fraction_of_cost": [0.28, 0.26, 0.30],
        "min_fraction_of_best": [1.0, 0.946, 0.95],
        "median_fraction_of_cost": pytest.approx(0.28),
        "median_min_fraction_of_best": pytest.approx(0.95),
        "runs_met_both": 2,
        "runs": 3,
    }
    assert o["per_matrix"]["jpeg"]["runs_met_both"] == 2
    assert over_runs([_matrix_summary({"cpu": (None, None)})])["per_matrix"]["cpu"]["runs_met_both"] == 0


def test_the_table_over_runs_shows_each_run_and_the_count():
    import io

    from rich.console import Console

    from loaderbench.bench.result_tables import tune_vs_grid

    grid = grid_cells(_records({"a": [100, 101, 102], "b": [90, 91, 92]}, seconds=2))
    row = scenario_row(_scenario("a", 6.0), ["a", "b"], grid)
    run = {"matrices": [{"workload": "cpu", "scenarios": [row]}]}
    run["summary"] = summary(run["matrices"])
    out = io.StringIO()
    tune_vs_grid(
        {
            "targets": {"fraction_of_best": 0.95, "fraction_of_cost": 0.30},
            "confidence": 0.9,
            "holdout_repetitions": 8,
            "runs": [run, run],
            "over_runs": over_runs([run["summary"]] * 2),
        },
        Console(file=out, width=250),
    )
    text = out.getvalue()
    assert "run 1 of 2" in text and "run 2 of 2" in text and "over 2 runs" in text
    assert "0.50 0.50" in text and "0 of 2" in text  # 6 of 12 cell-s each run: over the cost, not met
    assert "for every matrix in 0 of 2 runs" in text


def test_tune_runs_below_one_is_one_clear_error(capsys):
    from loaderbench.bench.run_all import main

    with pytest.raises(SystemExit) as exit_:
        main(["--tune-runs", "0", "--skip-overhead"])
    assert exit_.value.code == 2
    assert "--tune-runs 0: allowed: 1 or more" in capsys.readouterr().err

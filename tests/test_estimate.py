"""How long a study will take (loaderbench.study.estimate), checked against real records: the shipped reference
records of a GPU node, each cell estimated from the records of the other cells of its study (as a study whose
first cells are done estimates the rest), lands within a stated factor of the time it really took."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from loaderbench.schema.cell import CellConfig, Task
from loaderbench.schema.record import Record
from loaderbench.study.estimate import Estimator, estimate_study, modelled_seconds
from loaderbench.study.study_file import load_study
from tests.conftest import REPO

#: a cell's estimate from its study's other cells lies within this factor of its recorded wall time, either way
CELL_FACTOR = 2.5
#: the study's total (every cell estimated from the others) lies within this factor of the recorded total
STUDY_FACTOR = 1.25


def records(study: str) -> list[Record]:
    folder = REPO / "results" / "reference" / "h100" / study
    return [Record.load(p) for p in sorted(folder.glob("*.json"))]


class RecordedCell:
    """What the estimator reads of a study's cell (its id, axes and typed config), from a record's config."""

    def __init__(self, cell_id: str, config: dict) -> None:
        self.cell_id, self.config = cell_id, config
        self.typed = CellConfig.of(config)

    def __getitem__(self, key: str):
        return self.config[key]


def wall_s(rec: Record) -> float:
    wall = rec.wall_s
    assert wall is not None and wall > 0, rec.cell_id
    return wall


def leave_one_cell_out(recs: list[Record]) -> list[tuple[float, float, float]]:
    """(estimate from the other cells, recorded median wall time, uncalibrated model) per cell."""
    ok = [r for r in recs if r.ok]
    out = []
    for cell in sorted({r.cell_id for r in ok}):
        mine = [r for r in ok if r.cell_id == cell]
        others = Estimator.from_records(r for r in ok if r.cell_id != cell)
        config = mine[0].config
        cell_ = RecordedCell(cell, config)
        assert cell not in others.per_cell
        recorded = statistics.median(wall_s(r) for r in mine)
        out.append((others.seconds(cell_), recorded, modelled_seconds(CellConfig.of(config))))
    return out


@pytest.mark.parametrize("study", ["ladder", "gpu-feed"])
def test_an_estimate_calibrated_on_records_lands_near_the_recorded_times(study):
    cells = leave_one_cell_out(records(study))
    assert len(cells) >= 6
    for est, recorded, _ in cells:
        assert 1 / CELL_FACTOR <= est / recorded <= CELL_FACTOR, (est, recorded)
    total_est, total_rec = sum(c[0] for c in cells), sum(c[1] for c in cells)
    assert 1 / STUDY_FACTOR <= total_est / total_rec <= STUDY_FACTOR, (total_est, total_rec)
    # calibration is what brings it there: the bare model is further off than the calibrated estimate
    bare = sum(c[2] for c in cells)
    assert abs(bare / total_rec - 1) > abs(total_est / total_rec - 1)


def test_a_cell_with_records_of_its_own_takes_their_median(tmp_path):
    study = load_study(REPO / "loaderbench" / "studies" / "ladder.toml", max_cores=16)
    recs = records("ladder")
    est = Estimator.from_records(recs)
    tasks = [Task(study.name, c, r) for c in study.cells for r in range(study.settings.repetitions)]
    plan = estimate_study(study, tasks, est)
    by_cell: dict[str, list[float]] = {}
    for r in recs:
        by_cell.setdefault(r.cell_id, []).append(wall_s(r))
    measured = [c for c in study.cells if c.cell_id in by_cell]
    assert measured, "the shipped ladder records are cells of the shipped ladder study"
    for c in measured:
        assert est.seconds(c) == pytest.approx(statistics.median(by_cell[c.cell_id]))
    assert plan.calibrated == len(tasks)  # every ladder task rests on records (its own, or its workload's)
    assert plan.longest_s == pytest.approx(max(est.seconds(c) for c in study.cells))


def test_records_that_cannot_calibrate_are_ignored(tmp_path: Path):
    ok = records("ladder")[0]
    failed = {"kind": "worker_killed", "message": "killed"}
    broken = [
        replace(ok, status="failed", error=failed),
        replace(ok, finished_at=ok.started_at),  # no wall time
        replace(ok, config={"workload": "no such workload"}),
        None,  # a file that is not a record
    ]
    est = Estimator.from_records(broken)
    assert est.per_cell == {} and est.per_workload == {}

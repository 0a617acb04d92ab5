"""`loaderbench run --repetitions N --cells IDS`: more repetitions of some cells, joining those measured."""

from __future__ import annotations

import pytest

from loaderbench.errors import StudyError
from loaderbench.study.study_file import load_study
from loaderbench.study.subset import only_cells, with_repetitions


def test_a_subset_keeps_its_cells_ids_and_takes_the_repetitions_asked_for():
    study = load_study("in-order", max_cores=2)
    ids = [c.cell_id for c in study.cells][:2]
    part = with_repetitions(only_cells(study, ids[::-1]), 7)
    assert [c.cell_id for c in part.cells] == ids  # the study's order, the same ids
    assert part.settings.repetitions == 7 and study.settings.repetitions != 7
    assert part.name == study.name


def test_unknown_cells_and_bad_counts_are_one_clear_error():
    study = load_study("in-order", max_cores=2)
    with pytest.raises(StudyError, match="--cells: nope: not a cell of study 'in-order'"):
        only_cells(study, ["nope"])
    with pytest.raises(StudyError, match="--repetitions 0: allowed: an integer from 1 to 1000"):
        with_repetitions(study, 0)

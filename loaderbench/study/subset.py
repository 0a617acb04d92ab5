"""Part of a study, for measuring more of it: more repetitions than its file asks for, and only some of its cells.
The cells keep their ids, so the records join those already measured."""

from __future__ import annotations

from dataclasses import replace

from loaderbench.errors import StudyError
from loaderbench.study.study_file import Study

MAX_REPETITIONS = 1000


def with_repetitions(study: Study, repetitions: int) -> Study:
    """The study with `repetitions` per cell instead of its file's."""
    if not 1 <= repetitions <= MAX_REPETITIONS:
        raise StudyError(f"--repetitions {repetitions}: allowed: an integer from 1 to {MAX_REPETITIONS}")
    return replace(study, settings=study.settings.model_copy(update={"repetitions": repetitions}))


def only_cells(study: Study, cell_ids: list[str]) -> Study:
    """The study reduced to the cells `cell_ids` (their order in the study kept)."""
    known = {c.cell_id for c in study.cells}
    unknown = [c for c in cell_ids if c not in known]
    if unknown:
        raise StudyError(
            f"--cells: {', '.join(unknown)}: not a cell of study {study.name!r} ({study.path}); allowed: the ids "
            "`loaderbench plan` lists for it"
        )
    wanted = set(cell_ids)
    return replace(study, cells=tuple(c for c in study.cells if c.cell_id in wanted))

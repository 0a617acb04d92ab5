"""A study file names its question (`[study] question`): checked against the known questions, carried into every
record (no part of the cell id), and read by the analysis before any guess by name or axes."""

from __future__ import annotations

import tomllib

import pandas as pd
import pytest

from loaderbench.analysis.claims import QUESTIONS, question_of, studies_by_question
from loaderbench.errors import StudyError
from loaderbench.locations import shipped_studies
from loaderbench.schema.cell import Task
from loaderbench.schema.questions import CLAIM_QUESTIONS, SCALING, STUDY_QUESTIONS
from loaderbench.schema.record import Record
from loaderbench.schema.record_row import flatten
from loaderbench.study.study_file import parse_study


def _raw(question: str | None = "rng", name: str = "q") -> dict:
    study = {"name": name} | ({"question": question} if question is not None else {})
    return {"study": study, "matrix": {"workload": "sleep", "num_workers": [0, 1]}}


def test_the_questions_a_study_may_name_are_those_the_analysis_answers():
    assert set(CLAIM_QUESTIONS) == set(QUESTIONS) and len(CLAIM_QUESTIONS) == len(QUESTIONS)
    assert STUDY_QUESTIONS == (SCALING, *CLAIM_QUESTIONS)


def test_every_shipped_study_names_a_known_question():
    files = shipped_studies()
    assert len(files) > 20
    for path in files.values():
        settings = tomllib.loads(path.read_text())["study"]
        assert settings.get("question") in STUDY_QUESTIONS, path.name
        # records made before they carried the key read it from the shipped study file of their study's name
        assert (question_of(settings["name"]) or SCALING) == settings["question"], path.name


@pytest.mark.parametrize("bad", ["shm-sise", "", "scaling-64c"])
def test_an_unknown_question_is_one_error_naming_the_key_and_the_allowed_values(tmp_path, bad):
    with pytest.raises(StudyError) as err:
        parse_study(_raw(bad), where="q.toml", path=tmp_path / "q.toml")
    said = str(err.value)
    assert f"[study] question = {bad!r}: unknown question; allowed: one of scaling, batch-size, " in said
    assert "gpu-batch-size" in said and "Traceback" not in said


def test_a_question_of_the_wrong_type_names_the_allowed_values(tmp_path):
    raw = _raw()
    raw["study"]["question"] = 3
    with pytest.raises(StudyError, match=r"\[study\] question = 3: .*allowed: one of scaling, "):
        parse_study(raw, where="q.toml", path=tmp_path / "q.toml")


def test_the_question_is_carried_into_every_record_and_not_into_the_cell_id(tmp_path):
    study = parse_study(_raw("rng"), where="q.toml", path=tmp_path / "q.toml")
    plain = parse_study(_raw(None), where="q.toml", path=tmp_path / "q.toml")
    assert [c.cell_id for c in study.cells] == [c.cell_id for c in plain.cells]
    assert all(c.config["question"] == "rng" for c in study.cells)
    assert all("question" not in c.config for c in plain.cells)
    assert study.cells[0].typed.question == "rng"
    record = Record.for_task(Task(study.name, study.cells[0], 0), "failed", error={"kind": "x", "message": "y"})
    written = record.to_json()
    assert written["config"]["question"] == "rng"
    assert Record.load(written).config["question"] == "rng"
    assert flatten(written, "q/a.json")["question"] == "rng"


def _rows(question=None, n: int = 2, **axes) -> pd.DataFrame:
    rows = pd.DataFrame({"num_workers": range(n), **{k: [v] * n for k, v in axes.items()}})
    if question is not None:
        rows["question"] = question
    return rows


def test_the_declared_question_else_the_shipped_study_file_and_never_a_guess():
    # its name says start-method, its axes say rng: the declared question wins
    assert question_of("start-method", _rows("sharing", workload="rng")) == "sharing"
    assert question_of("rng", _rows(SCALING, workload="rng")) is None  # scaling asks no claim question
    # records made before the key existed: the shipped study file of the study's name (less a machine's)
    assert question_of("gpu-feed-small", _rows(workload="cpu")) == "gpu-feed"
    assert question_of("gpu-feed (h200)", _rows([None, None])) == "gpu-feed"
    # nothing declares one: no question, whatever the name or the axes suggest
    assert question_of("mine", _rows(workload="rng")) is None
    assert question_of("start-method-64c", _rows(workload="cpu")) is None
    # records of one study declaring two questions (its file changed): none
    assert question_of("rng", _rows(["sharing", "threads"], workload="cpu")) is None


def test_studies_are_listed_under_their_declared_question():
    df = pd.concat(
        [
            _rows("sharing", study="mine", workload="cpu"),
            _rows(None, study="rng", workload="rng"),
            _rows(SCALING, study="quick", workload="cpu"),
        ],
        ignore_index=True,
    )
    by = studies_by_question(df)
    assert by["sharing"] == ["mine"] and by["rng"] == ["rng"]
    assert all("quick" not in studies for studies in by.values())

"""`make figures` says what it is doing while it works: a line per long stage on stderr, counted in place on a
terminal, written at its start and end elsewhere; nothing when asked to be quiet."""

from __future__ import annotations

import io

from loaderbench.analysis.figures.draw_all import map_tasks, run
from loaderbench.analysis.figures.stages import Stages
from loaderbench.fake_records.studies import study_cells, study_records, write_records


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_stage_in_a_log_is_a_line_at_its_start_and_one_at_its_end():
    log = io.StringIO()
    done = Stages(log).stage("drawing 2 studies", 3, "parts")
    assert log.getvalue() == "drawing 2 studies ...\n"
    done(1)
    done(2)
    assert log.getvalue() == "drawing 2 studies ...\n"
    done(3)
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("drawing 2 studies: done in ") and lines[1].endswith(" s")


def test_a_stage_on_a_terminal_counts_in_place():
    term = _Terminal()
    done = Stages(term).stage("drawing 2 studies", 3, "parts")
    for n in (1, 2, 3):
        done(n)
    shown = term.getvalue()
    assert shown.count("\n") == 1 and shown.endswith("\n")
    steps = shown.split("\r")
    assert steps[:3] == ["drawing 2 studies ...", "drawing 2 studies: 1/3 parts", "drawing 2 studies: 2/3 parts"]
    assert len(steps) == 4 and steps[3].startswith("drawing 2 studies: done in ")


def test_the_count_reaches_every_task_in_one_process_and_in_several():
    for jobs in (1, 2):
        seen: list[int] = []
        assert map_tasks(abs, [-3, -1, -2, -5], jobs, seen.append) == [3, 1, 2, 5]
        assert seen == [1, 2, 3, 4]


def test_make_figures_reports_its_stages_unless_quiet(tmp_path, capsys):
    cells = study_cells(workloads=(("cpu", None),), cores=(1,), n_sweep=(0, 1, 2), start_methods=("fork",))
    write_records(tmp_path / "r", study_records("a", cells, repetitions=3, raw=False, random_failures=False))
    assert run(tmp_path / "r", tmp_path / "f", use_cache=False, jobs=1)[0] == 0
    said = capsys.readouterr().err.splitlines()
    assert said[0] == "analysing 1 study ..." and said[1].startswith("analysing 1 study: done in ")
    assert said[2] == "drawing 1 study ..." and said[3].startswith("drawing 1 study: done in ")
    assert run(tmp_path / "r", tmp_path / "g", use_cache=False, jobs=1, quiet=True)[0] == 0
    assert capsys.readouterr().err == ""

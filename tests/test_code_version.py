"""The figures' caches are keyed on all the code they are made with: the analysis, what it imports from the package,
the shipped study files and the drawing and statistics libraries' versions; a change to any redraws everything."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import loaderbench
from loaderbench.analysis.table import code_version as cv

PACKAGE = Path(loaderbench.__file__).resolve().parent


def _tree(root: Path) -> None:
    (root / "analysis" / "__pycache__").mkdir(parents=True)
    (root / "analysis" / "a.py").write_text("X = 1\n")
    (root / "analysis" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\x00")
    (root / "studies").mkdir()
    (root / "studies" / "s.toml").write_text("[study]\n")
    (root / "errors.py").write_text("E = 1\n")
    (root / "measure.py").write_text("M = 1\n")


def test_any_source_file_or_library_version_changes_the_version_and_nothing_else_does(tmp_path, monkeypatch):
    _tree(tmp_path)
    sources, libs = ("analysis", "studies", "errors.py"), ("matplotlib",)
    first = cv.source_digest(tmp_path, sources, libs)
    assert cv.source_digest(tmp_path, sources, libs) == first
    # not part of it: compiled files, and code outside the sources
    (tmp_path / "analysis" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\x01")
    (tmp_path / "measure.py").write_text("M = 2\n")
    assert cv.source_digest(tmp_path, sources, libs) == first
    seen = {first}
    for path, text in (("analysis/a.py", "X = 2\n"), ("studies/s.toml", "[study]\nname = 'x'\n"), ("errors.py", "")):
        (tmp_path / path).write_text(text)
        now = cv.source_digest(tmp_path, sources, libs)
        assert now not in seen, f"a change to {path} kept the version"
        seen.add(now)
    (tmp_path / "analysis" / "b.py").write_text("")  # a new module
    assert cv.source_digest(tmp_path, sources, libs) not in seen
    seen.add(cv.source_digest(tmp_path, sources, libs))
    monkeypatch.setattr(cv.metadata, "version", lambda name: "99.0")  # another matplotlib
    assert cv.source_digest(tmp_path, sources, libs) not in seen


def _imported(module: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.startswith("loaderbench.")}


def test_every_part_of_the_package_the_analysis_imports_is_part_of_the_version():
    """Followed from the analysis through what each module imports: every loaderbench module reached is under one
    of SOURCES (a module added to the analysis's imports without it would let a stale cache be trusted)."""
    todo, reached = [PACKAGE / "analysis"], set()
    while todo:
        path = todo.pop()
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            for name in _imported(f):
                parts = name.split(".")[1:]
                target = PACKAGE.joinpath(*parts)
                target = target if target.is_dir() else target.with_suffix(".py")
                if target.exists() and target not in reached:
                    reached.add(target)
                    todo.append(target)
    assert reached, "the analysis imports nothing from the package?"
    outside = sorted(str(t.relative_to(PACKAGE)) for t in reached if t.relative_to(PACKAGE).parts[0] not in cv.SOURCES)
    assert not outside, f"imported by the analysis but not in code_version.SOURCES: {outside}"
    assert {"stats", "schema"} <= {t.relative_to(PACKAGE).parts[0] for t in reached}


@pytest.mark.parametrize("source", cv.SOURCES)
def test_every_source_named_exists_in_the_package(source):
    assert (PACKAGE / source).exists()


def test_a_study_drawn_by_other_code_is_drawn_again(tmp_path, monkeypatch):
    from loaderbench.analysis.figures import draw_all, study_cache
    from loaderbench.analysis.table.records import load_records
    from loaderbench.fake_records.studies import study_cells, study_records, write_records

    cells = study_cells(workloads=(("cpu", None),), cores=(1,), n_sweep=(0, 1), start_methods=("fork",))
    write_records(tmp_path / "r", study_records("a", cells, repetitions=2, raw=False, random_failures=False))
    df, _ = load_records(tmp_path / "r")
    assert draw_all.process_all(df, tmp_path / "f", jobs=1)[2] == []
    assert draw_all.process_all(df, tmp_path / "f", jobs=1)[2] == ["a"]
    monkeypatch.setattr(study_cache, "code_version", lambda: "other code")  # what a study's key is made of
    assert draw_all.process_all(df, tmp_path / "f", jobs=1)[2] == []

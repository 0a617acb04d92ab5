"""`make figures` at scale: the figures show the same data as before they were drawn faster, and a study is drawn
again only when its records' content changed (its cache is never trusted blindly)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from loaderbench.analysis.figures.draw_all import process_all
from loaderbench.analysis.figures.study_cache import STUDY_CACHE
from loaderbench.analysis.table.records import load_records
from loaderbench.fake_records.studies import study_cells, study_records, write_records
from tests.figure_data import FIXTURE, differences, drawn, figure_study


def test_the_figures_show_the_data_they_showed_before(tmp_path):
    """Every figure's panels, labels, ticks, texts and the points of every line and marker are those captured from
    the drawing code before it was made faster (tests/figure_data.py)."""
    figure_study(tmp_path / "records")
    have = drawn(tmp_path / "records", tmp_path / "figures")
    want = json.loads(FIXTURE.read_text())
    assert set(have) == set(want)
    problems = differences(want, json.loads(json.dumps(have)))
    assert not problems, "\n".join(problems[:20])


def _two_studies(root: Path) -> None:
    cells = study_cells(workloads=(("cpu", None),), cores=(1,), n_sweep=(0, 1, 2), start_methods=("fork",))
    for study in ("a", "b"):
        write_records(root, study_records(study, cells, repetitions=3, raw=False, random_failures=False))


def _stamps(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()}


def test_a_study_is_drawn_again_only_when_its_records_content_changed(tmp_path):
    """Worker processes draw both studies whole; a record rewritten with the same bytes redraws nothing; a changed
    record redraws its study only; a damaged figure or a torn cache file is never trusted."""
    root, out = tmp_path / "r", tmp_path / "f"
    _two_studies(root)
    df, _ = load_records(root)
    analyses, figs, reused = process_all(df, out, jobs=2)
    assert reused == [] and [a.study for a in analyses] == ["a", "b"]
    names = {s: sorted(p.name for p in paths) for s, paths in figs.items()}
    assert names["a"] == names["b"] and {"throughput_vs_workers.png", "summary.csv"} <= set(names["a"])
    assert all(p.exists() for paths in figs.values() for p in paths)
    a_files, b_files = _stamps(out / "a"), _stamps(out / "b")
    # the same bytes written again (a new mtime): the content did not change, nothing is redrawn
    path = sorted((root / "a").glob("*.json"))[0]
    st = path.stat()
    path.write_bytes(path.read_bytes())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    df, load = load_records(root)
    assert load.parsed == 1
    again, figs2, reused = process_all(df, out, jobs=1)
    assert reused == ["a", "b"] and figs2 == figs
    assert [a.claims for a in again] == [a.claims for a in analyses]  # what each study says about the claims
    # one record of b changed: b alone is drawn again
    path = sorted((root / "b").glob("*.json"))[0]
    path.write_text(path.read_text().replace('"samples_per_s": ', '"samples_per_s": 1', 1))
    df, _ = load_records(root)
    assert process_all(df, out, jobs=1)[2] == ["a"]
    assert _stamps(out / "a") == a_files, "study a was drawn again"
    changed = _stamps(out / "b")
    assert all(changed[name] != t for name, t in b_files.items() if name.endswith(".png")), "b was not redrawn"
    # a figure damaged after it was drawn, and a torn cache file: those studies are drawn again
    png = out / "a" / "throughput_vs_workers.png"
    png.write_bytes(png.read_bytes()[:100])
    cache = out / "b" / STUDY_CACHE
    cache.write_bytes(cache.read_bytes()[:50])
    assert process_all(df, out, jobs=1)[2] == []
    assert png.stat().st_size > 100


def test_a_heavy_report_inlines_each_figure_once_with_256_colours(tmp_path, monkeypatch):
    import base64

    import numpy as np
    from PIL import Image

    from loaderbench.analysis.report import layout

    png = tmp_path / "s" / "throughput_vs_workers.png"
    png.parent.mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8)).save(png)
    assert layout.write_embed_copy(png) == layout.embed_path(png)  # as the drawing workers do
    figure = layout.Figure(png, "a caption")
    sections = [layout.Section("report", 1, [figure]), layout.Section("again", 2, [figure])]
    monkeypatch.setattr(layout, "EMBED_FULL_MAX", 0)  # every report is too heavy for full figures
    page = layout.render_html(sections)
    inlined = page.split('src="data:image/png;base64,')[1:]
    assert len(inlined) == 1, "a figure is inlined twice"
    assert base64.b64decode(inlined[0].split('"')[0]) == layout.embed_path(png).read_bytes()
    assert page.count('href="#figure-s-throughput-vs-workers"') == 1 and "256 colours" in page


def test_the_report_is_kept_only_while_nothing_it_shows_changed(tmp_path):
    """With every study from its cache and the report's inputs unchanged, the report and claims files are kept as
    written; a record changed, a file skipped, a report file damaged or a study drawn again writes them again."""
    from loaderbench.analysis.figures.draw_all import run

    root, out = tmp_path / "r", tmp_path / "f"
    _two_studies(root)
    files = [out / n for n in ("report.html", "report.md", "claims.csv", "claims.md")]

    def stamps() -> list[int]:
        return [p.stat().st_mtime_ns for p in files]

    def again() -> list[int]:
        assert run(root, out, jobs=1, quiet=True)[0] == 0
        return stamps()

    first = again()
    assert again() == first  # nothing changed: kept
    (out / "report.html").write_text((out / "report.html").read_text().replace("<body", "<body data-x", 1))
    second = again()  # damaged: written again, and then kept
    assert second[0] != first[0] and again() == second
    (root / "a" / "junk.json").write_text("{not json")  # a file the report lists as skipped
    third = again()
    assert third[0] != second[0] and "junk.json" in (out / "report.html").read_text()
    png = out / "a" / "throughput_vs_workers.png"
    png.write_bytes(png.read_bytes()[:100])  # study a drawn again: the report shows it afresh
    fourth = again()
    assert fourth[0] != third[0] and again() == fourth
    path = sorted((root / "b").glob("*.json"))[0]
    path.write_text(path.read_text().replace('"samples_per_s": ', '"samples_per_s": 1', 1))
    assert again()[0] != fourth[0]


def test_a_studys_report_sections_are_made_again_only_when_what_they_show_changed(tmp_path, monkeypatch):
    """The report's sections of a study whose records, files and folders did not change are read back from its
    folder; the changed study's are made again, as are every study's when the results folder is named otherwise;
    and the report is the one made from nothing."""
    import shutil

    from loaderbench.analysis.figures.draw_all import SECTIONS_CACHE, run
    from loaderbench.analysis.report import page as report

    root, out = tmp_path / "r", tmp_path / "f"
    _two_studies(root)
    made: list[str] = []
    real = report.study_sections

    def counted(a, *args, **kw):
        made.append(a.study)
        return real(a, *args, **kw)

    monkeypatch.setattr(report, "study_sections", counted)

    def again(results: Path = root) -> list[str]:
        made.clear()
        assert run(results, out, jobs=1, quiet=True)[0] == 0
        return sorted(made)

    def page() -> str:  # the report less the time it was generated
        return re.sub(r"Generated [^)]*? from", "", (out / "report.md").read_text())

    assert again() == ["a", "b"] and (out / "a" / SECTIONS_CACHE).exists()
    path = sorted((root / "b").glob("*.json"))[0]
    path.write_text(path.read_text().replace('"samples_per_s": ', '"samples_per_s": 1', 1))
    assert again() == ["b"]
    kept = page()
    for study in ("a", "b"):
        (out / study / SECTIONS_CACHE).unlink()
    (out / "report.md").unlink()
    assert again() == ["a", "b"] and page() == kept  # the same report as one made from nothing
    assert again() == []  # nothing changed: the report is kept whole
    (out / "a" / SECTIONS_CACHE).write_bytes(b"torn")
    (out / "report.md").unlink()
    assert again() == ["a"]  # the report written again: a torn file is never trusted
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    assert again(moved) == ["a", "b"] and str(moved) in (out / "report.md").read_text()

"""The figures' file formats (`--formats png,pdf,svg`, PNG always: the report shows it), the caches keyed on them,
and a folder of results folders (results/reference) named as such, with the folder to pass instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from loaderbench.analysis.figures import formats
from loaderbench.analysis.figures.draw_all import process_all
from loaderbench.analysis.figures.scaling import throughput_vs_workers
from loaderbench.analysis.table.records import load_records
from loaderbench.analysis.table.results_folder import not_a_results_folder
from loaderbench.analysis.table.scaling import analyze_study
from loaderbench.cli import main as cli
from loaderbench.errors import LoaderbenchError
from loaderbench.fake_records.studies import study_cells, study_records, write_records

CELLS = study_cells(workloads=(("cpu", None),), cores=(1,), n_sweep=(0, 1, 2), start_methods=("fork",))


def _study(root: Path, name: str = "a") -> None:
    write_records(root, study_records(name, CELLS, repetitions=3, raw=False, random_failures=False))


def test_formats_are_read_png_first_and_always():
    assert formats.parse_formats("png") == ("png",)
    assert formats.parse_formats("pdf") == ("png", "pdf")  # the report shows the PNG: it is always drawn
    assert formats.parse_formats(" SVG, pdf,png,pdf ") == ("png", "pdf", "svg")
    assert formats.current() == formats.DEFAULT == ("png",)


@pytest.mark.parametrize("text", ["jpg", "png,eps", "", " , "])
def test_an_unknown_format_is_one_error_naming_the_flag_and_the_allowed_values(text):
    with pytest.raises(LoaderbenchError) as err:
        formats.parse_formats(text)
    said = str(err.value)
    assert said.startswith("--formats: ") and "allowed: png, pdf, svg" in said and "\n" not in said
    if text.strip(" ,"):
        assert repr(text.split(",")[-1].strip()) in said


def test_a_figure_is_written_in_every_format_asked_for_and_only_those(tmp_path):
    root = tmp_path / "r"
    _study(root)
    df, _ = load_records(root)
    a = analyze_study(df, "a")
    assert [p.suffix for p in throughput_vs_workers(a, tmp_path / "png")] == [".png"]
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["throughput_vs_workers.png"]
    with formats.drawing_in(["svg", "pdf"]):
        paths = throughput_vs_workers(a, tmp_path / "all")
    assert [p.suffix for p in paths] == [".png", ".pdf", ".svg"]
    assert paths[0].read_bytes().startswith(b"\x89PNG")
    assert paths[1].read_bytes().startswith(b"%PDF")
    assert b"<svg" in paths[2].read_bytes()[:2000]
    assert formats.current() == ("png",)  # as before, after the block


def test_the_figures_cache_keys_on_the_formats_asked(tmp_path):
    """Drawn as PNG, then asked for PDF: drawn again with the PDFs; asked again the same: reused; PNG alone again:
    drawn again, and the PDFs, no longer asked for, removed (they would show older records beside new PNGs)."""
    root, out = tmp_path / "r", tmp_path / "f"
    _study(root)
    df, _ = load_records(root)
    _, figs, reused = process_all(df, out, jobs=1)
    assert reused == [] and not [p for p in figs["a"] if p.suffix == ".pdf"]
    _, figs, reused = process_all(df, out, jobs=1)
    assert reused == ["a"]
    _, figs, reused = process_all(df, out, jobs=1, formats=("png", "pdf"))
    pdfs = [p for p in figs["a"] if p.suffix == ".pdf"]
    assert reused == [] and pdfs and all(p.exists() for p in pdfs)
    assert {p.stem for p in pdfs} == {p.stem for p in figs["a"] if p.suffix == ".png"}
    _, _, reused = process_all(df, out, jobs=1, formats=("pdf",))  # the same formats: PNG is always among them
    assert reused == ["a"]
    _, figs, reused = process_all(df, out, jobs=2)
    assert reused == [] and not list((out / "a").glob("*.pdf"))
    assert all(p.exists() for p in figs["a"])


def test_the_figures_command_refuses_an_unknown_format_before_reading_anything(tmp_path, capsys):
    root = tmp_path / "r"
    _study(root)
    assert cli(["figures", str(root), "--figures", str(tmp_path / "f"), "--formats", "png,jpg"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --formats: unknown format 'jpg'; allowed: png, pdf, svg (comma-separated, e.g. png,pdf)"
    assert not (tmp_path / "f").exists()


def test_the_help_says_png_is_always_drawn(capsys):
    with pytest.raises(SystemExit):
        cli(["figures", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "--formats" in said and "PNG is always drawn too, since the report shows it" in said


def test_a_folder_of_results_folders_says_which_to_pass(tmp_path, capsys):
    """results/reference holds one results folder per machine (and a README, a stray JSON beside them): the
    figures command names them and the one to pass, and that one draws."""
    ref = tmp_path / "reference"
    _study(ref / "h100", "gpu")
    _study(ref / "vm-2cpu", "a")
    _study(ref / "vm-2cpu", "b")
    (ref / "README.md").write_text("machines\n")
    (ref / "vm-2cpu" / "reference.json").write_text("{}")
    (ref / "empty").mkdir()
    said = (
        f"{ref} holds 2 results folders (h100, vm-2cpu), not records of studies: pass one of them, e.g. {ref}/vm-2cpu"
    )
    assert not_a_results_folder(ref) == said
    assert cli(["figures", str(ref), "--figures", str(tmp_path / "f")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {said}"
    assert cli(["figures", str(ref / "vm-2cpu"), "--figures", str(tmp_path / "f")]) == 0
    assert (tmp_path / "f" / "report.html").exists()


def test_a_folder_with_records_or_with_nothing_is_not_taken_for_one_of_results_folders(tmp_path, capsys):
    _study(tmp_path / "results")
    assert not_a_results_folder(tmp_path / "results") is None  # its studies hold records, not results folders
    (tmp_path / "nothing" / "study").mkdir(parents=True)
    assert not_a_results_folder(tmp_path / "nothing") is None
    assert cli(["figures", str(tmp_path / "nothing"), "--figures", str(tmp_path / "f")]) == 1
    assert "no usable records under" in capsys.readouterr().err

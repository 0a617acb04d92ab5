"""The floor `make bench` part 6 prints under the cold stages: what the libraries alone cost (json.loads of every
record, matplotlib's savefig of every figure), measured on the same records and figures as the stages."""

from __future__ import annotations

import time

from loaderbench.analysis.figures.draw_all import analyze_all, draw_all
from loaderbench.analysis.stage_costs import TARGETS, floor_text, parse_floor, stage_lines
from loaderbench.analysis.table.records import load_records
from loaderbench.fake_records.studies import study_cells, study_records, write_records, write_synthetic_records


def test_the_parse_floor_reads_every_record_once(tmp_path):
    paths = write_synthetic_records(tmp_path, 60, seed=3, repetitions=2)
    (tmp_path / "notes.txt").write_text("not a record")
    assert parse_floor(tmp_path, 1) == len(paths) == 60
    assert parse_floor(tmp_path, 2) == 60


def test_the_savefig_floor_is_part_of_what_drawing_cost(tmp_path):
    """In one process the CPU seconds inside savefig are a part of the CPU seconds the whole drawing took; with
    worker processes each reports its own, so the sum is still counted."""
    cells = study_cells(workloads=(("cpu", None),), cores=(1,), n_sweep=(0, 1, 2), start_methods=("fork",))
    write_records(tmp_path / "r", study_records("a", cells, repetitions=3, raw=False, random_failures=False))
    df, _ = load_records(tmp_path / "r")
    costs: dict = {}
    before = time.process_time()
    _, paths = draw_all(analyze_all(df), df, tmp_path / "f", jobs=1, costs=costs, formats=("png", "pdf"))
    whole = time.process_time() - before
    assert any(p.suffix == ".pdf" for p in paths["a"])
    assert 0 < costs["savefig_cpu_s"] <= whole
    forked: dict = {}
    draw_all(analyze_all(df), df, tmp_path / "g", jobs=2, costs=forked)
    assert forked["savefig_cpu_s"] > 0


def _result(floor_s: float) -> dict:
    stage = {
        f"{k}_{u}": 1.0
        for k in (
            "first_load",
            "cached_load",
            "aggregate",
            "draw",
            "report",
            "cold",
            "unchanged_rerun",
            "one_study_changed",
        )
        for u in ("s", "cpu_s")
    }
    return {
        **stage,
        "jobs": 2,
        "figures": 4,
        "studies": 1,
        "parsed_when_cached": 0,
        "report_html_bytes": 2**20,
        "unchanged_rerun_reused_studies": 1,
        "one_study_changed_redrawn": 1,
        "peak_rss_main_bytes": 2**29,
        "peak_rss_largest_child_bytes": 2**29,
        "parse_floor_cpu_s": floor_s / 2,
        "savefig_cpu_s": floor_s * 1.5,
        "floor_cpu_s": floor_s * 2,
        "floor_s": floor_s,
        "targets": TARGETS,
    }


def test_the_floor_row_gives_its_parts_and_no_target_in_seconds():
    # the cold total is held to a multiple of the floor of the same run, never to seconds that would read the machine
    assert "target" not in floor_text(_result(40.0)) and "cold_s" not in TARGETS
    cold = next(line for line in stage_lines(_result(40.0)) if line.startswith("cold total"))
    assert "target" not in cold
    floor = [line for line in stage_lines(_result(40.0)) if line.startswith("floor")]
    assert len(floor) == 1 and "40.00" in floor[0] and "80.00" in floor[0]
    old = {k: v for k, v in _result(40.0).items() if not k.startswith(("floor", "parse_floor", "savefig"))}
    assert any(line.startswith("floor") and "not measured" in line for line in stage_lines(old))


def test_the_floor_and_draw_rows_name_the_formats_drawn():
    """The floor is that of the formats drawn: PNG alone by default, as make figures; PNG + PDF for a result from
    before the formats were a choice."""
    cases = ((["png"], "as PNG "), (["png", "pdf", "svg"], "as PNG + PDF + SVG "), (None, "as PNG + PDF "))
    for formats, said in cases:
        r = _result(10.0) | ({"formats": formats} if formats else {})
        assert said in floor_text(r)
        draw = [line for line in stage_lines(r) if line.startswith("draw")]
        assert said.removeprefix("as ").strip() + "," in draw[0]


def test_the_cold_total_is_printed_against_the_floor_of_the_same_run():
    """The cold total (cold_s) over the floor (floor_s) of one run, against TARGETS["cold_over_floor"]; a result
    without a floor says so."""
    r = _result(0.5) | {"cold_s": 0.6}  # 1.2x
    ratio = [line for line in stage_lines(r) if line.startswith("cold / floor")]
    assert len(ratio) == 1 and "1.20x" in ratio[0] and "met" in ratio[0] and "1.5x" in ratio[0]
    assert "MISSED" in next(line for line in stage_lines(_result(0.1)) if line.startswith("cold / floor"))
    old = {k: v for k, v in r.items() if k != "floor_s"}
    assert "not measured" in next(line for line in stage_lines(old) if line.startswith("cold / floor"))


def test_make_bench_prints_the_cold_over_floor_ratio():
    import io

    from rich.console import Console

    from loaderbench.bench.result_tables import scale

    out = io.StringIO()
    sc = {"available": True, "command": "python -m x", "wall_s": 1.0, "result": _result(0.5) | {"cold_s": 1.0}}
    scale(sc, Console(file=out, width=400))
    row = next(line for line in out.getvalue().splitlines() if "cold / floor" in line)
    assert "2.00x" in row and "missed" in row


def test_one_study_changed_is_printed_against_that_studys_floor():
    r = _result(0.5) | {"one_study_changed_s": 3.0, "one_study_floor_s": 1.5}
    r |= {"one_study_parse_floor_cpu_s": 0.5, "one_study_savefig_cpu_s": 2.5}
    row = next(line for line in stage_lines(r) if line.startswith("one study / floor"))
    assert "2.00x" in row and "MISSED" in row and "0.5 CPU-s json.loads + 2.5 CPU-s savefig" in row
    old = next(line for line in stage_lines(_result(0.5)) if line.startswith("one study / floor"))
    assert "not measured" in old

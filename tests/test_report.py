"""The report from synthetic records: sections present, problems listed, figures embedded, offline HTML,
and the missing-data paths (one num_workers value, every cell failed, no jpeg, no decode reference)."""

import re

import numpy as np
import pandas as pd
import pytest

from loaderbench.analysis.figures.draw_all import run
from loaderbench.analysis.report.page import Section, Table, build_report, render_html, render_markdown, study_file
from loaderbench.analysis.report.tables import reading
from loaderbench.analysis.table.records import load_records
from loaderbench.analysis.table.scaling import analyze_study
from loaderbench.fake_records.studies import study_cells, study_records, write_records, write_synthetic_records

SMALL = dict(
    workloads=(("sleep", None), ("cpu", None), ("jpeg", "pil")),
    cores=(1, 2),
    n_sweep=(0, 1, 2, 3, 4, 6),
    start_methods=("fork",),
    max_workers_per_core=6,
)
SECTIONS = [
    "Environment",
    "Readings and figures",
    "Recommendations: knee, best and the rules of thumb",
    "Scaling model (USL)",
    "Physical ceilings",
    "Unstable and failed cells",
    "Every cell",
    "How to reproduce",
    "Claims",
    "Methods",
]


def _small_study(root, study="small", fail_kind="too_many_open_files", unstable=True, **kw):
    cells = study_cells(**{**SMALL, **kw})
    # every repetition of the cpu cell with 6 workers on 1 core fails
    idx = next(i for i, c in enumerate(cells) if c["workload"] == "cpu" and c["num_workers"] == 6 and c["cores"] == 1)
    recs = list(
        study_records(
            study,
            cells,
            repetitions=3,
            seed=1,
            noisy_share=0.0,
            fail={idx: fail_kind},
            raw=False,
            random_failures=False,
        )
    )
    if unstable:  # sleep, 2 workers, 2 cores: IQR 20% of the median
        target = [
            r
            for r in recs
            if r["config"]["workload"] == "sleep" and r["config"]["num_workers"] == 2 and r["config"]["cores"] == 2
        ]
        for r, f in zip(target, (0.8, 1.0, 1.2)):
            r["metrics"]["samples_per_s"] = 400.0 * f
    write_records(root, recs)
    return cells


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    _small_study(root)
    out = tmp_path_factory.mktemp("figures")
    code, analyses, _paths = run(root, out, jobs=1, quiet=True)
    assert code == 0
    return root, out, analyses


def test_report_files_and_sections(report_dir):
    _, out, _ = report_dir
    page = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    for title in SECTIONS:
        assert f">{title}</h" in page, title
        assert f" {title}\n" in md, title
    assert "Study small" in page and "## Study small" in md


def test_html_is_self_contained(report_dir):
    _, out, _ = report_dir
    page = (out / "report.html").read_text()
    pngs = sorted((out / "small").glob("*.png"))
    assert {p.stem for p in pngs} >= {"throughput_vs_workers", "usl_fit", "rules_of_thumb", "oversubscription"}
    assert page.count('src="data:image/png;base64,') == len(pngs)
    # no external references: every src/href is inline data or an in-page anchor, no URL anywhere
    for m in re.finditer(r'(?:src|href)\s*=\s*"([^"]*)"', page):
        assert m.group(1).startswith(("data:", "#")), m.group(1)
    assert not re.search(r"https?://|<link\b|<script\b|@import|url\(", page)


def test_markdown_links_figures_by_relative_path(report_dir):
    _, out, _ = report_dir
    md = (out / "report.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert "small/throughput_vs_workers.png" in links
    for link in links:
        assert not link.startswith("/") and (out / link).exists()


def test_no_interval_is_called_95_percent_unless_it_is(report_dir):
    # 3 repetitions per cell: every interval of a median is [min, max] (75%), every comparison at most 90%;
    # "95%" may appear only as the nominal target ("nominal 95%"), never as what an interval is
    _, out, _ = report_dir
    texts = {name: (out / name).read_text() for name in ("report.md", "report.html")}
    texts["summary.md"] = (out / "small" / "summary.md").read_text()
    texts["claims.md"] = (out / "claims.md").read_text()
    for name, text in texts.items():
        assert "95%" not in text.replace("nominal 95%", ""), name
    md = texts["report.md"]
    assert "n = 3 repetitions per cell" in md
    assert "interval [min, max] of 3 repetitions, 75% coverage" in md  # the study, the cells table, the caption
    caption = md.split("![throughput_vs_workers]")[1].split("\n\n")[1]
    assert "75% coverage" in caption and "bootstrap" not in caption
    assert "(90%, 3 v 3)" in md  # comparisons print their real coverage and n


def test_claims_are_decided_from_quick_shaped_records(report_dir):
    _, out, _ = report_dir
    claims = (out / "claims.md").read_text()
    row = next(line for line in claims.splitlines() if "CPU-bound throughput peaks near the core count" in line)
    assert "**holds**" in row and "| small |" in row and "study small:" in row
    assert "make local STUDY=loaderbench/studies/start-method.toml" in claims  # what is missing says how to measure it


def test_unstable_and_failed_cells_are_listed(report_dir):
    _, out, analyses = report_dir
    md = (out / "report.md").read_text()
    section = md.split("### Unstable and failed cells")[1].split("\n### ")[0]
    assert "too_many_open_files" in section and "synthetic too_many_open_files" in section
    assert "unstable: IQR is 20% of the median" in section  # 320, 400, 480: IQR 80
    a = analyses[0]
    cpu1 = a.curves[(a.curves["panel"] == "cpu") & (a.curves["cores"] == 1)].iloc[0]
    assert cpu1["cells_failed"] == 1


def test_readings_and_tables_come_from_the_data(report_dir):
    _, out, analyses = report_dir
    a = analyses[0]
    md = (out / "report.md").read_text()
    for _, c in a.curves.iterrows():
        line = reading(c)
        assert line in md
        assert re.match(
            rf"{c['panel']} on {int(c['cores'])} cores?: best [\d,]+ samples/s at \d+ workers?"
            rf"( \(main-process loading\))?; knee at \d+ workers?",
            line,
        )
    # knee and best agree with the per-N medians
    cpu2 = a.curves[(a.curves["panel"] == "cpu") & (a.curves["cores"] == 2)].iloc[0]
    med = a.cells[(a.cells["panel"] == "cpu") & (a.cells["cores"] == 2)].set_index("num_workers")["median"]
    assert cpu2["best_x"] == pytest.approx(med.max())
    assert med[cpu2["knee_n"]] >= 0.95 * med.max()
    assert all(med[n] < 0.95 * med.max() for n in med.index if n < cpu2["knee_n"])
    # every rule appears for every curve, and the decode ceiling was used for jpeg
    assert len(a.rules) == 5 * len(a.curves)
    jpeg = a.curves[a.curves["workload"] == "jpeg"]
    assert jpeg["decode_ceiling"].notna().all()
    assert "decode ceiling" in md and "ceiling not measured" not in md
    assert "make local STUDY=" in md


def test_reproduce_names_the_study_file_when_it_exists(tmp_path):
    assert study_file("quick").name == "quick.toml"
    assert study_file("no-such-study-here") is None


def test_missing_data_paths(tmp_path):
    root = tmp_path / "results"
    # one num_workers value only; no jpeg
    write_records(
        root,
        study_records(
            "one-n",
            study_cells(workloads=(("cpu", None),), cores=(1,), n_sweep=(2,), start_methods=("fork",)),
            repetitions=3,
            raw=False,
            random_failures=False,
        ),
    )
    # every cell failed
    cells = study_cells(workloads=(("sleep", None),), cores=(1,), n_sweep=(0, 1, 2), start_methods=("fork",))
    write_records(
        root,
        study_records(
            "all-failed", cells, repetitions=2, raw=False, fail={i: "worker_killed" for i in range(len(cells))}
        ),
    )
    # jpeg without a decode-only reference cell
    write_records(
        root,
        study_records(
            "no-ref",
            study_cells(
                workloads=(("jpeg", "pil"),),
                cores=(1,),
                n_sweep=(0, 1, 2, 4),
                start_methods=("fork",),
                decode_reference=False,
            ),
            repetitions=3,
            raw=False,
            random_failures=False,
        ),
    )
    out = tmp_path / "figures"
    code, analyses, _ = run(root, out, jobs=1, quiet=True)
    assert code == 0
    by = {a.study: a for a in analyses}
    md = (out / "report.md").read_text()
    html_text = (out / "report.html").read_text()

    one = by["one-n"]
    assert "only one num_workers value measured" in reading(one.curves.iloc[0])
    assert "only 1 distinct N" in one.curves.iloc[0]["usl_reason"]
    assert "No jpeg workload in this study" in md
    assert (out / "one-n" / "throughput_vs_workers.png").exists()

    failed = by["all-failed"]
    assert failed.ok.empty
    assert not list((out / "all-failed").glob("*.png"))
    section = md.split("## Study all-failed")[1].split("\n## ")[0]
    assert "No figure: no repetition of this study has a throughput value" in section
    assert section.count("worker_killed") >= 3

    noref = by["no-ref"]
    assert noref.curves["decode_ceiling"].isna().all()
    assert "Decode ceiling not measured" in md
    assert any("ceiling not measured" in n for n in noref.notes)
    assert 'src="data:image/png;base64,' in html_text


def test_claims_section_shows_the_claims_table(tmp_path):
    root = tmp_path / "r"
    write_records(
        root,
        study_records(
            "c",
            study_cells(workloads=(("sleep", None),), cores=(1,), n_sweep=(0, 1, 2), start_methods=("fork",)),
            repetitions=3,
            raw=False,
            random_failures=False,
        ),
    )
    df, load = load_records(root)
    a = analyze_study(df, "c")

    given = pd.DataFrame({"claim": ["workers help I/O-bound loading"], "holds": ["yes"], "records": [len(df)]})
    md = render_markdown(build_report([a], {}, df, load, root, tmp_path, claims_table=given), tmp_path)
    assert "workers help I/O-bound loading" in md.split("## Claims")[1]

    # not given: decided here, every claim with the command that measures it when no records carry it
    md = render_markdown(build_report([a], {}, df, load, root, tmp_path), tmp_path)
    claims = md.split("## Claims")[1]
    assert "workers help I/O-bound loading" not in claims
    assert "spawn pays an interpreter start-up per worker" in claims
    assert "make local STUDY=loaderbench/studies/start-method.toml" in claims


def test_renderers_escape_text():
    sections = [Section("t <x>", level=1, blocks=[Table(pd.DataFrame({"a|b": ["<script>1</script>"]}))])]
    page = render_html(sections)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "a\\|b" in render_markdown(sections, __import__("pathlib").Path("."))


def test_synthetic_records_load_in_the_real_schema(tmp_path):
    paths = write_synthetic_records(tmp_path, 60, seed=3, repetitions=2)
    assert len(paths) == 60
    df, load = load_records(tmp_path)
    assert len(df) == 60 and not load.skipped
    for col in (
        "samples_per_s",
        "uss_peak_bytes",
        "env_cpu_model",
        "env_shm_size",
        "env_mem_total",
        "env_slurm_job_id",
        "env_container_image",
        "jpeg_stage",
        "decoder",
        "num_workers",
        "cores",
    ):
        assert col in df, col
    ok = df[df["status"] == "ok"]
    assert np.isfinite(ok["samples_per_s"]).all() and (ok["samples_per_s"] > 0).all()


def test_unchanged_studies_are_not_redrawn(tmp_path):
    from loaderbench.analysis.figures.draw_all import process_all

    root, out = tmp_path / "r", tmp_path / "f"
    cells = study_cells(workloads=(("cpu", None),), cores=(1,), n_sweep=(0, 1, 2), start_methods=("fork",))
    for study in ("a", "b"):
        write_records(root, study_records(study, cells, repetitions=3, raw=False, random_failures=False))
    df, _ = load_records(root)
    _, figs, reused = process_all(df, out)
    assert reused == [] and figs["a"]
    _, figs2, reused = process_all(df, out)
    assert reused == ["a", "b"] and figs2 == figs
    # one record of study b changes: b is analysed and drawn again, a is not
    path = next((root / "b").glob("*.json"))
    text = path.read_text()
    path.write_text(text.replace('"samples_per_s": ', '"samples_per_s": 1', 1))
    df, _ = load_records(root)
    _, _, reused = process_all(df, out)
    assert reused == ["a"]
    assert process_all(df, out, use_cache=False)[2] == []


def test_a_figure_that_fails_becomes_a_note_and_the_rest_is_drawn(tmp_path, monkeypatch):
    import loaderbench.analysis.figures.scaling as scaling

    def broken_figure(a, folder):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(scaling, "oversubscription", broken_figure)
    root, out = tmp_path / "r", tmp_path / "f"
    write_records(
        root,
        study_records(
            "c",
            study_cells(workloads=(("cpu", None),), cores=(1,), n_sweep=(0, 1, 2), start_methods=("fork",)),
            repetitions=3,
            raw=False,
            random_failures=False,
        ),
    )
    code, analyses, _ = run(root, out, jobs=1, quiet=True)
    assert code == 0
    assert "figure broken_figure could not be drawn (RuntimeError: drawing failed)" in analyses[0].notes
    assert (out / "c" / "throughput_vs_workers.png").exists() and not (out / "c" / "oversubscription.png").exists()
    md = (out / "report.md").read_text()
    assert "Note: figure broken_figure could not be drawn (RuntimeError: drawing failed)." in md


def test_the_report_does_not_score_a_gpu_rule_without_a_gpu(tmp_path):
    """The rules table says "n/a: no GPU" for 4 workers per GPU where the records say CUDA was not available,
    as the rules figure does."""
    from loaderbench.analysis.report.tables import rules_table
    from loaderbench.analysis.table.records import load_records
    from loaderbench.analysis.table.scaling import analyze_study
    from loaderbench.stats.rules_of_thumb import NO_GPU

    _small_study(tmp_path)
    df, _ = load_records(tmp_path)
    a = analyze_study(df, "small")
    assert a.no_gpu, "synthetic records are from a machine without CUDA"
    table = rules_table(a)
    gpu = table[table["rule"].str.contains("GPU")]
    assert len(gpu) and (gpu["samples/s"] == NO_GPU).all()
    assert (table[~table["rule"].str.contains("GPU")]["samples/s"] != NO_GPU).all()
    with_gpu = rules_table(analyze_study(df.assign(env_cuda_available=True), "small"))
    assert (with_gpu["samples/s"] != NO_GPU).all()

"""Figures from synthetic records: every figure writes its PNG (the other formats: test_figure_formats.py),
degrades to nothing without data,
and carries the study, machine and versions.

Every figure drawn here is also checked as a reader sees it (the `kept` fixture keeps each figure that
loaderbench.analysis.figures.style.save closes): every title, legend, label and footer lies on the saved canvas, panels
that share an x variable share its limits and ticks, each legend entry stands for something drawn, the number
of repetitions behind the points is printed, and no interval is called 95% (the helpers below are shared with
tests/test_questions.py)."""

import json
import re

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text

from loaderbench.analysis.figures.accelerator_busy import accelerator_utilization_vs_workers
from loaderbench.analysis.figures.rule_cost import NO_GPU, rules_of_thumb
from loaderbench.analysis.figures.scaling import oversubscription, throughput_vs_workers
from loaderbench.analysis.figures.style import PNG_MAX_PX, apply_theme, provenance, workers_axis
from loaderbench.analysis.figures.usl_fit import usl_fit
from loaderbench.analysis.report.tables import rules_table
from loaderbench.analysis.table.records import load_records
from loaderbench.analysis.table.scaling import analyze_study
from loaderbench.analysis.table.usl import MIN_DISTINCT_N
from loaderbench.fake_records.studies import study_cells, study_records, write_records
from loaderbench.stats.intervals import coverage_text
from tests.figure_data import QUESTION_FIXTURE, differences, questions_drawn

FIGURES = (throughput_vs_workers, usl_fit, rules_of_thumb, oversubscription)


# ------------------------------------------------------------------------------------------------
# what a reader sees, checked on a drawn figure (shared with tests/test_questions.py)


def _shown(artist) -> bool:
    ax = getattr(artist, "axes", None)
    return (
        artist.get_visible()
        and (ax is None or ax.get_visible())
        and (not isinstance(artist, Text) or bool(artist.get_text().strip()))
    )


def text_artists(fig) -> list:
    """Every piece of text a reader reads: figure texts (title, notes, footer), legends, and per panel its title,
    axis labels and texts (annotations, a colour bar's label)."""
    arts = list(fig.texts) + list(fig.legends)
    for ax in fig.axes:
        arts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        if ax.get_legend() is not None:
            arts.append(ax.get_legend())
    return [a for a in arts if _shown(a)]


def all_text(fig) -> str:
    out = []
    for a in text_artists(fig):
        out += [t.get_text() for t in a.get_texts()] if isinstance(a, Legend) else [a.get_text()]
    for ax in fig.axes:
        out += [t.get_text() for t in ax.get_yticklabels() + ax.get_xticklabels()]
    return "\n".join(out)


def outside_canvas(fig, png) -> list[str]:
    """Text, legends and panels' tick labels that do not lie wholly on the canvas, and a PNG that is not the
    figure's canvas (cropped or padded at save time)."""
    fig.canvas.draw()  # as the PNG was drawn: the PDF, saved last, left axis labels placed at 72 dpi
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    problems = []
    h, w = mpimg.imread(png).shape[:2]
    scale = w / canvas.width  # the PNG is the canvas at the DPI sized for the page (style.png_dpi): scaled, not cut
    if abs(h - canvas.height * scale) > 1 + scale or w > PNG_MAX_PX:
        problems.append(
            f"PNG {w}x{h} px is not the canvas {canvas.width:.0f}x{canvas.height:.0f} px scaled (at most "
            f"{PNG_MAX_PX} px wide)"
        )
    boxes = [(a, a.get_window_extent(renderer)) for a in text_artists(fig)]
    for ax in fig.axes:
        if ax.get_visible() and ax.axison:  # an axes drawn with its axis off draws no tick labels
            boxes += [
                (f"tick labels of {axis.axis_name} in {ax.get_title()!r}", axis.get_tightbbox(renderer))
                for axis in (ax.xaxis, ax.yaxis)
            ]
    for what, b in boxes:
        if b is None or not (np.isfinite(b.width) and b.width > 0):
            continue
        if b.x0 < canvas.x0 - 1 or b.y0 < canvas.y0 - 1 or b.x1 > canvas.x1 + 1 or b.y1 > canvas.y1 + 1:
            name = (
                what
                if isinstance(what, str)
                else (
                    f"legend {[t.get_text() for t in what.get_texts()][:3]}"
                    if isinstance(what, Legend)
                    else f"text {what.get_text()[:50]!r}"
                )
            )
            problems.append(f"{name} at {b.bounds} outside the canvas {canvas.bounds}")
    return problems


def unshared_x(fig) -> list[str]:
    """Panels whose x axis is labelled alike (the same variable) but whose limits or ticks differ."""
    groups: dict[str, list] = {}
    for ax in fig.axes:
        if ax.get_visible() and ax.get_xlabel().strip():
            groups.setdefault(ax.get_xlabel(), []).append(ax)
    problems = []
    for label, axes in groups.items():
        first = axes[0]
        for ax in axes[1:]:
            if not np.allclose(ax.get_xlim(), first.get_xlim()):
                problems.append(f"{label!r}: x limits {ax.get_xlim()} vs {first.get_xlim()}")
            ta, tb = np.asarray(ax.get_xticks(), float), np.asarray(first.get_xticks(), float)
            if ta.shape != tb.shape or not np.allclose(ta, tb):
                problems.append(f"{label!r}: x ticks {ta} vs {tb}")
    return problems


def _rgba(c):
    return np.asarray(to_rgba(c), float)


def _colours(artist) -> list:
    if isinstance(artist, Line2D):
        cs = [artist.get_color(), artist.get_markerfacecolor(), artist.get_markeredgecolor()]
    elif isinstance(artist, (PathCollection, LineCollection, PolyCollection)):
        cs = list(artist.get_facecolors()) + list(artist.get_edgecolors())
    else:
        cs = [artist.get_facecolor(), artist.get_edgecolor()]
    out = []
    for c in cs:
        try:
            rgba = _rgba(c)
        except (ValueError, TypeError):
            continue
        if rgba[3] > 0:
            out.append(rgba[:3])
    return out


def _drawn(fig) -> list:
    """The artists on the figure's panels that carry data."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        out += [ln for ln in ax.lines if ln.get_visible() and np.isfinite(np.asarray(ln.get_ydata(), float)).any()]
        for c in ax.collections:
            if not c.get_visible():
                continue
            n = (
                len(c.get_segments())
                if isinstance(c, LineCollection)
                else (len(c.get_offsets()) if isinstance(c, PathCollection) else len(c.get_paths()))
            )
            if n:
                out.append(c)
        out += [
            p
            for p in ax.patches
            if p.get_visible() and isinstance(p, Rectangle) and p.get_width() != 0 and p.get_height() != 0
        ]
    return out


def _dash_kind(collection: LineCollection) -> str:
    _offset, dashes = collection.get_linestyle()[0]
    if dashes is None:
        return "-"
    if len(dashes) >= 4:
        return "-."
    return "--" if dashes[0] > dashes[1] else ":"


def _same_marker(coll: PathCollection, marker) -> bool:
    style = MarkerStyle(marker)
    want = style.get_path().transformed(style.get_transform()).vertices
    have = coll.get_paths()[0].vertices
    return have.shape == want.shape and np.allclose(have, want)


def _white(rgb) -> bool:
    return np.allclose(rgb, 1)


def _stands_for(handle, artist) -> bool:
    """Whether a legend `handle` describes `artist`: the same kind of line and marker (hollow where it is hollow),
    and the same colour unless the handle is grey (a style entry, drawn in every colour)."""
    colours = _colours(artist)
    if isinstance(handle, Line2D):
        marker, ls = handle.get_marker(), handle.get_linestyle()
        has_marker, has_line = marker not in (None, "None", "", " "), ls not in ("None", "", " ")
        hollow = has_marker and _white(_rgba(handle.get_markerfacecolor())[:3])
        if isinstance(artist, Line2D):
            if (has_marker and artist.get_marker() != marker) or (has_line and artist.get_linestyle() != ls):
                return False
            if hollow and not _white(_rgba(artist.get_markerfacecolor())[:3]):
                return False
        elif isinstance(artist, LineCollection):
            if has_marker or not has_line or _dash_kind(artist) != ls:
                return False
        elif isinstance(artist, PathCollection):
            if not has_marker or has_line or not _same_marker(artist, marker):
                return False
            if hollow and not any(_white(c[:3]) for c in artist.get_facecolors()):
                return False
        else:
            return False
        want = _rgba(handle.get_color())[:3]
        return np.ptp(want) < 1e-6 or any(np.allclose(want, c, atol=2e-3) for c in colours)
    if isinstance(handle, Patch):
        want = _rgba(handle.get_facecolor())[:3]
        return any(np.allclose(want, c, atol=2e-3) for c in colours)
    return False


def legend_entries_not_drawn(fig) -> list[str]:
    """Legend entries (of the figure and of each panel) that stand for nothing drawn on the panels."""
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    drawn = _drawn(fig)
    labelled = {a.get_label() for a in drawn} | {c.get_label() for ax in fig.axes for c in ax.containers if len(c)}
    problems = []
    for leg in legends:
        for handle, text in zip(leg.legend_handles, leg.get_texts()):
            if handle is None or not handle.get_visible() or not text.get_text().strip():
                continue
            if text.get_text() in labelled or any(_stands_for(handle, a) for a in drawn):
                continue
            problems.append(f"legend entry {text.get_text()!r} stands for nothing drawn")
    return problems


N_PRINTED = re.compile(r"n = (\d+) repetitions? per \w+")
#: An interval called 95% (confidence, coverage or CI): these figures never have one at this n.
CALLED_95 = re.compile(
    r"95(\.0)?\s*%[^\n.;]{0,40}(interval|CI|confidence|coverage)|"
    r"(interval|CI|confidence|coverage)[^\n.;]{0,40}95(\.0)?\s*%",
    re.I,
)


def general_problems(fig, png) -> list[str]:
    """Every check above, and the number of repetitions printed, and no interval called 95%."""
    text = all_text(fig)
    problems = outside_canvas(fig, png) + unshared_x(fig) + legend_entries_not_drawn(fig)
    if not N_PRINTED.search(text):
        problems.append("no 'n = k repetitions per ...' printed")
    if CALLED_95.search(text):
        problems.append(f"an interval called 95%: {CALLED_95.search(text).group(0)!r}")
    return problems


# ------------------------------------------------------------------------------------------------
# synthetic studies


def _analysis(root, study, drop=None, **cells):
    """A synthetic study of `cells` (3 repetitions each), less the records for which `drop(record)` is true."""
    records = [
        r
        for r in study_records(study, study_cells(**cells), repetitions=3, raw=False, seed=2, random_failures=False)
        if not (drop and drop(r))
    ]
    write_records(root, records)
    df, _ = load_records(root)
    return analyze_study(df, study), df


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    apply_theme()
    return _analysis(
        tmp_path_factory.mktemp("r"),
        "figs",
        workloads=(("cpu", None), ("jpeg", "pil")),
        cores=(1, 2),
        n_sweep=(0, 1, 2, 4, 8),
        start_methods=("fork", "spawn"),
    )


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """One panel (the narrowest figure), one cell whose every repetition failed, one that lost a repetition."""
    apply_theme()
    root = tmp_path_factory.mktemp("r")
    cells = dict(
        workloads=(("cpu", None),),
        cores=(2,),
        n_sweep=(0, 1, 2, 3, 4, 6, 8),
        start_methods=("fork",),
        decode_reference=False,
    )
    failed = {i for i, c in enumerate(study_cells(**cells)) if c["num_workers"] == 3}
    records = [
        r
        for r in study_records(
            "one",
            study_cells(**cells),
            repetitions=3,
            raw=False,
            seed=2,
            random_failures=False,
            fail={i: "oom" for i in failed},
        )
        if not (r["config"]["num_workers"] == 4 and r["repetition"] == 0)
    ]
    write_records(root, records)
    df, _ = load_records(root)
    return analyze_study(df, "one"), df


@pytest.fixture(scope="module")
def fits(tmp_path_factory):
    """Curves with a good USL fit (its peak inside the range) and curves with too few distinct N to fit."""
    apply_theme()
    return _analysis(
        tmp_path_factory.mktemp("r"),
        "fit",
        workloads=(("sleep", None), ("cpu", None)),
        cores=(1, 4),
        n_sweep=(0, 1, 2, 4, 8, 16),
        start_methods=("fork",),
        decode_reference=False,
    )


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """Two panels measured at different num_workers."""
    apply_theme()
    root = tmp_path_factory.mktemp("r")
    cells = study_cells(
        workloads=(("cpu", None),), cores=(2,), n_sweep=(0, 1, 2), start_methods=("fork",), decode_reference=False
    ) + study_cells(
        workloads=(("jpeg", "pil"),),
        cores=(2,),
        n_sweep=(0, 1, 2, 4, 8),
        start_methods=("fork",),
        decode_reference=False,
    )
    write_records(root, study_records("mixed", cells, repetitions=3, raw=False, seed=3, random_failures=False))
    df, _ = load_records(root)
    return analyze_study(df, "mixed"), df


STUDIES = ("small", "single", "fits", "mixed")


# ------------------------------------------------------------------------------------------------
# every figure


@pytest.mark.parametrize("study", STUDIES)
@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f.__name__)
def test_each_figure_writes_a_png_a_reader_can_read(study, figure, request, kept, tmp_path):
    """PNG; on the canvas, the same x axis per variable, a legend of what is drawn, n printed, no 95%."""
    a, _ = request.getfixturevalue(study)
    paths = figure(a, tmp_path)
    assert [p.suffix for p in paths] == [".png"]
    for p in paths:
        assert p.stat().st_size > 1000
    img = mpimg.imread(paths[[p.suffix for p in paths].index(".png")])
    assert img.shape[0] > 300 and img.shape[1] > 500
    assert len(kept) == 1
    assert general_problems(*kept[0]) == []


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f.__name__)
def test_one_panel_figures_keep_title_legend_and_footer(single, figure, kept, tmp_path):
    a, df = single
    figure(a, tmp_path)
    fig, png = kept[0]
    assert outside_canvas(fig, png) == []
    texts = [t.get_text() for t in fig.texts]
    assert any(t.startswith(("Throughput", "Scaling", "Rules", "Oversubscription")) for t in texts)
    assert any(provenance(df[df["study"] == "one"], "one").split(" · ")[0] in t for t in texts)  # the footer


def test_a_failed_cell_is_explained_on_the_canvas(single, kept, tmp_path):
    a, _ = single
    throughput_vs_workers(a, tmp_path)
    fig, png = kept[0]
    legend = fig.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    assert any("every repetition failed" in t for t in labels)
    assert outside_canvas(fig, png) == []


def test_panels_measured_at_different_workers_share_the_x_axis(mixed, kept, tmp_path):
    a, _ = mixed
    throughput_vs_workers(a, tmp_path)
    usl_fit(a, tmp_path)
    for fig, _ in kept:
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert len(panels) == 2
        assert unshared_x(fig) == []
        assert 8 in panels[0].get_xticks()  # the cpu panel stops at 2 workers, its axis does not


def test_n_is_printed_and_stated_where_it_differs(single, kept, tmp_path):
    """One cell lost a repetition: the figures say 3 per point, 2 where stated, and state it at that point."""
    a, _ = single
    for figure in FIGURES:
        figure(a, tmp_path)
    assert len(kept) == len(FIGURES)
    for fig, _ in kept:
        text = all_text(fig)
        assert "n = 3 repetitions per" in text and "(2 where stated" in text, fig.texts[0].get_text()
        marked = [t for ax in fig.axes for t in ax.texts if re.search(r"\bn=2\b", t.get_text())]
        assert marked, fig.texts[0].get_text()  # at that point ("n=2"), or in that cell ("... (n=2)")


def test_interval_coverage_is_the_real_one(small, kept, tmp_path):
    a, _ = small
    throughput_vs_workers(a, tmp_path)
    text = all_text(kept[0][0])
    assert coverage_text(a.cells["n"]) in text  # [min, max] of 3 repetitions: 75%, not 95%
    assert "75% coverage" in text and not CALLED_95.search(text)


# ------------------------------------------------------------------------------------------------
# usl_fit


def _usl_lines(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts if " core" in t.get_text().split(":")[0]]


def test_usl_legend_lists_the_fit_only_where_drawn(small, fits, kept, tmp_path):
    (poor, _), (good, _) = small, fits
    usl_fit(poor, tmp_path)
    usl_fit(good, tmp_path)
    (fig_poor, _), (fig_good, _) = kept
    assert not poor.curves["usl_good"].any() and good.curves["usl_good"].any()
    labels = [t.get_text() for t in fig_poor.legends[0].get_texts()]
    assert not any("USL fit" in t or "N*" in t for t in labels)
    labels = [t.get_text() for t in fig_good.legends[0].get_texts()]
    assert any("USL fit" in t for t in labels) and any("N*" in t for t in labels)
    for fig in (fig_poor, fig_good):
        assert legend_entries_not_drawn(fig) == []


def test_usl_quotes_r2_only_for_a_fit_it_draws(small, fits, kept, tmp_path):
    for a, _ in (small, fits):
        usl_fit(a, tmp_path)
    lines = [line for fig, _ in kept for line in _usl_lines(fig)]
    drawn = [t for t in lines if "no fit shown" not in t]
    not_drawn = [t for t in lines if "no fit shown" in t]
    too_few = [t for t in not_drawn if "distinct N" in t]
    assert drawn and too_few and len(not_drawn) > len(too_few)  # every case is present
    assert all(re.search(r"R²=\d", t) for t in drawn)
    assert not any("R²" in t for t in not_drawn), not_drawn
    assert all(f"need ≥ {MIN_DISTINCT_N}" in t for t in too_few)


# ------------------------------------------------------------------------------------------------
# oversubscription


def _span(ax) -> tuple[float, float]:
    (p,) = [p for p in ax.patches if isinstance(p, Rectangle)]
    return p.get_x(), p.get_x() + p.get_width()


def test_oversubscription_shades_only_more_workers_than_cores(small, kept, tmp_path):
    a, _ = small
    oversubscription(a, tmp_path)
    fig, _ = kept[0]
    ratios = sorted(set(a.cells["num_workers"] / a.cells["cores"]) - {0})
    above = [r for r in ratios if r > 1]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 3
    for ax in panels:
        lo, hi = _span(ax)
        assert 1 < lo < min(above) and hi >= max(ratios)  # a point at workers = cores is not shaded
        assert ax.get_xlabel() == "num_workers / cores"
        assert list(ax.get_xticks()) == ratios  # the measured ratios, no 1.5 nobody measured
    assert unshared_x(fig) == []


# ------------------------------------------------------------------------------------------------
# rules_of_thumb


def _cells(fig) -> dict:
    """The heat map's cell texts by (row label, column label)."""
    ax = max(fig.axes, key=lambda ax: len(ax.texts))
    rows = [t.get_text() for t in ax.get_yticklabels()]
    cols = [t.get_text() for t in ax.get_xticklabels()]
    return {(rows[int(t.get_position()[1])], cols[int(t.get_position()[0])]): t.get_text() for t in ax.texts}


def test_rules_of_thumb_loss_reads_as_the_report_writes_it(small, kept, tmp_path):
    a, _ = small
    rules_of_thumb(a, tmp_path)
    cells = _cells(kept[0][0])
    report = rules_table(a)
    label = {
        "workers = cores": "cores",
        "workers = cores - 1": "cores − 1",
        "workers = 2 x cores (I/O-bound advice)": "2 × cores",
        "Lightning: cpus // local_world_size - 1": "Lightning\ncpus//lws − 1",
    }
    compared = 0
    for _, r in report.iterrows():
        if r["rule"] not in label:
            continue
        cores = int(r["cores"])
        text = cells[(f"{r['curve']} · {cores} core{'s' if cores != 1 else ''}", label[r["rule"]])]
        assert text.split(": ")[1].lstrip("≈").split(" ")[0] == r["lost vs best"]
        compared += 1
    assert compared == 4 * len(a.rules[["panel", "cores"]].drop_duplicates())


def test_a_rule_that_needs_a_gpu_is_not_scored_without_one(small, kept, tmp_path):
    a, df = small
    assert (df["env_cuda_available"] == False).all()  # noqa: E712 - the records say: no GPU
    rules_of_thumb(a, tmp_path)
    with_gpu = analyze_study(df.assign(env_cuda_available=True), "figs")
    rules_of_thumb(with_gpu, tmp_path)
    (no, _), (yes, _) = kept
    gpu_no = {k: v for k, v in _cells(no).items() if k[1] == "4 per GPU"}
    gpu_yes = {k: v for k, v in _cells(yes).items() if k[1] == "4 per GPU"}
    assert gpu_no and all(v == NO_GPU for v in gpu_no.values())
    assert any("CUDA was not available" in t.get_text() for t in no.texts)
    assert gpu_yes and all("%" in v for v in gpu_yes.values())
    heat = max(no.axes, key=lambda ax: len(ax.texts)).collections[0].get_array()
    col = [t.get_text() for t in max(no.axes, key=lambda ax: len(ax.texts)).get_xticklabels()].index("4 per GPU")
    assert np.ma.getmaskarray(heat).reshape(len(gpu_no), -1)[:, col].all()  # no colour: not scored


# ------------------------------------------------------------------------------------------------
# other figures and the scaffolding


def test_accelerator_utilization_reads_as_the_others(kept, tmp_path):
    apply_theme()
    rng = np.random.default_rng(0)
    rows = [
        {
            "study": "feed",
            "status": "ok",
            "cell_id": f"m{m}c{c}n{n}",
            "model": m,
            "cores": c,
            "num_workers": n,
            "consumer": "simulated-gpu",
            "accelerator_busy_fraction": min(1.0, 0.2 * n * c / 2 + rng.normal(0, 0.02)),
        }
        for m in ("resnet18", "vit_b_16")
        for c in (2, 4)
        for n in ((0, 1, 2, 4) if m == "resnet18" else (0, 2, 8))
        for _ in range(3)
    ]
    accelerator_utilization_vs_workers(pd.DataFrame(rows), "feed", tmp_path)
    fig, png = kept[0]
    assert general_problems(fig, png) == []
    assert "middle half of the repetitions" in all_text(fig)


def test_panels_split_axes_that_vary_and_share_main_process_cells(small):
    a, _ = small
    assert a.panels == [
        "cpu · start_method=fork",
        "cpu · start_method=spawn",
        "jpeg · start_method=fork",
        "jpeg · start_method=spawn",
    ]
    # the num_workers = 0 cell has no start method: it is the 0 point of both start-method panels
    zero = a.cells[(a.cells["num_workers"] == 0) & (a.cells["cores"] == 1) & (a.cells["workload"] == "cpu")]
    assert sorted(zero["panel"]) == ["cpu · start_method=fork", "cpu · start_method=spawn"]
    assert zero["cell_id"].nunique() == 1


def test_provenance_names_study_machine_and_versions(small):
    a, df = small
    text = provenance(df[df["study"] == "figs"], "figs")
    assert "study figs" in text and "AMD EPYC" in text and "torch 2.14.1" in text
    assert a.provenance == text


def test_a_study_of_main_process_loading_only_draws_its_points_and_no_fits(tmp_path):
    apply_theme()
    root = tmp_path / "r"
    cells = study_cells(workloads=(("sleep", None),), cores=(1,), n_sweep=(0,), start_methods=("fork",))
    a, _ = _analysis(root, "zero-only", workloads=(("sleep", None),), cores=(1,), n_sweep=(0,), start_methods=("fork",))
    assert len(cells) == 1
    # only main-process loading: no worker curve to fit or oversubscribe, and those figures write nothing
    out = tmp_path / "figures"
    out.mkdir()
    assert usl_fit(a, out) == [] and oversubscription(a, out) == []
    assert not list(out.iterdir())
    # but the point is still drawn: the throughput figure and nothing else
    drawn = throughput_vs_workers(a, out)
    assert [p.suffix for p in drawn] == [".png"] and all(p.exists() for p in drawn)
    assert sorted(out.iterdir()) == sorted(drawn)


def test_workers_axis_is_log_for_wide_sweeps():
    fig, (ax1, ax2) = plt.subplots(1, 2)
    workers_axis(ax1, [0, 1, 2, 3, 4])
    workers_axis(ax2, [0, 1, 2, 4, 8, 16, 32, 64])
    assert ax1.get_xscale() == "linear" and ax2.get_xscale() == "symlog"
    plt.close(fig)


def test_question_figures_show_the_data_they_showed_before(tmp_path):
    """Each question's figure draws the marks, styles, labels, legends and texts captured from its drawing code
    before the figures were declared as kinds (tests/figure_data.py --questions)."""
    have = json.loads(json.dumps(questions_drawn(tmp_path)))
    want = json.loads(QUESTION_FIXTURE.read_text())
    assert set(have) == set(want)
    problems = differences(want, have)
    assert not problems, "\n".join(problems[:20])


def test_bar_dots_jitter_alike_whatever_drew_before_and_leave_the_global_generator_alone():
    from loaderbench.analysis.figures.questions.shared import bars

    data = pd.DataFrame({"w": ["a"] * 5 + ["b"] * 5, "v": np.arange(10.0)})
    dots, next_draws = [], []
    for seed in (1, 2):
        np.random.seed(seed)
        fig, ax = plt.subplots()
        bars(ax, data, "w", "v")
        dots.append(np.concatenate([c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]))
        next_draws.append(np.random.random())
        plt.close(fig)
        np.random.seed(seed)
        assert next_draws[-1] == np.random.random()  # the caller's stream goes on as if nothing had drawn
    assert len(dots[0]) == 10 and np.array_equal(dots[0], dots[1])
    assert len(set(np.round(dots[0][:, 0], 6))) > 2  # jittered: the dots are not all on the two bars' centres

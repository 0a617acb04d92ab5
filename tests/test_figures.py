"""Figures from synthetic records: every figure writes PNG + PDF, degrades to nothing without data,
and carries the study, machine and versions."""

import matplotlib.image as mpimg
import pytest

from analysis.aggregate import analyze_study
from analysis.figures.model import usl_fit
from analysis.figures.recommend import rules_of_thumb
from analysis.figures.scaling import oversubscription, throughput_vs_workers
from analysis.figures.style import apply_theme, provenance, workers_axis
from analysis.records import load_records
from analysis.synthetic import study_cells, study_records, write_records

FIGURES = (throughput_vs_workers, usl_fit, rules_of_thumb, oversubscription)


def _analysis(root, study, **cells):
    write_records(root, study_records(study, study_cells(**cells), repetitions=3, raw=False, seed=2,
                                      random_failures=False))
    df, _ = load_records(root)
    return analyze_study(df, study), df


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    apply_theme()
    return _analysis(tmp_path_factory.mktemp("r"), "figs", workloads=(("cpu", None), ("jpeg", "pil")),
                     cores=(1, 2), n_sweep=(0, 1, 2, 4, 8), start_methods=("fork", "spawn"))


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f.__name__)
def test_each_figure_writes_png_and_pdf(small, figure, tmp_path):
    a, _ = small
    paths = figure(a, tmp_path)
    assert sorted(p.suffix for p in paths) == [".pdf", ".png"]
    for p in paths:
        assert p.stat().st_size > 1000
    img = mpimg.imread(paths[[p.suffix for p in paths].index(".png")])
    assert img.shape[0] > 300 and img.shape[1] > 500


def test_panels_split_axes_that_vary_and_share_main_process_cells(small):
    a, _ = small
    assert a.panels == ["cpu · start_method=fork", "cpu · start_method=spawn",
                        "jpeg · start_method=fork", "jpeg · start_method=spawn"]
    # the num_workers = 0 cell has no start method: it is the 0 point of both start-method panels
    zero = a.cells[(a.cells["num_workers"] == 0) & (a.cells["cores"] == 1) & (a.cells["workload"] == "cpu")]
    assert sorted(zero["panel"]) == ["cpu · start_method=fork", "cpu · start_method=spawn"]
    assert zero["cell_id"].nunique() == 1


def test_provenance_names_study_machine_and_versions(small):
    a, df = small
    text = provenance(df[df["study"] == "figs"], "figs")
    assert "study figs" in text and "AMD EPYC" in text and "torch 2.14.1" in text
    assert a.provenance == text


def test_figures_without_data_write_nothing(tmp_path):
    apply_theme()
    root = tmp_path / "r"
    cells = study_cells(workloads=(("sleep", None),), cores=(1,), n_sweep=(0,), start_methods=("fork",))
    a, _ = _analysis(root, "zero-only", workloads=(("sleep", None),), cores=(1,), n_sweep=(0,),
                     start_methods=("fork",))
    assert len(cells) == 1
    # only main-process loading: no worker curve to fit or oversubscribe, but the point is still drawn
    assert usl_fit(a, tmp_path) == []
    assert oversubscription(a, tmp_path) == []
    assert len(throughput_vs_workers(a, tmp_path)) == 2


def test_workers_axis_is_log_for_wide_sweeps():
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2)
    workers_axis(ax1, [0, 1, 2, 3, 4])
    workers_axis(ax2, [0, 1, 2, 4, 8, 16, 32, 64])
    assert ax1.get_xscale() == "linear" and ax2.get_xscale() == "symlog"
    plt.close(fig)

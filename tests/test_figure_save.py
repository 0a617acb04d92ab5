"""style.save: the PNG drawn in one pass where it can be (what is drawn read from its pixels), laid out first where
it cannot, and either way every text on the canvas with the footer under everything (tests/test_figures.py checks
that on every figure)."""

from __future__ import annotations

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from loaderbench.analysis.figures import style


def _figure(**text):
    style.apply_theme()
    fig, axes = style.grid(2, ncols=2)
    for ax in axes:
        ax.plot([0, 1, 2], [3, 1, 2], marker="o")
        style.panel_title(ax, "a panel")
        ax.set_xlabel("num_workers")
    style.header(fig, "a title", [])
    if text:
        fig.text(**text)
    return fig


def _draws(monkeypatch) -> list:
    counted: list = []
    real = Figure.draw

    def draw(fig, renderer):
        counted.append(fig)
        return real(fig, renderer)

    monkeypatch.setattr(Figure, "draw", draw)
    return counted


def _ink_box(png) -> tuple[int, int, int, int]:
    img = mpimg.imread(png)
    ink = (img[..., :3] < 0.99).any(axis=2)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    return rows[0], img.shape[0] - rows[-1], cols[0], img.shape[1] - cols[-1]


def test_a_png_is_drawn_once_and_framed_as_written(tmp_path, monkeypatch):
    fig = _figure()
    draws = _draws(monkeypatch)
    monkeypatch.setattr(plt, "close", lambda fig=None: None)
    (png,) = style.save(fig, tmp_path, "f", "the footer · under everything")
    assert len(draws) == 1
    h, w = mpimg.imread(png).shape[:2]
    assert (w, h) == tuple(round(v) for v in fig.bbox.size)  # the figure is framed as the PNG
    top, bottom, left, right = _ink_box(png)
    assert min(top, bottom, left, right) > 0  # nothing cut
    footer = fig.texts[-1]
    assert footer.get_text() == "the footer · under everything"
    renderer = fig.canvas.get_renderer()
    assert footer.get_window_extent(renderer).y1 < min(ax.get_window_extent(renderer).y0 for ax in fig.axes)


def test_text_far_outside_the_canvas_grows_it(tmp_path, monkeypatch):
    """A figure text far out widens the room the one pass draws on; a panel's text far to the side makes the PNG
    wider than it may be at the dots per inch chosen first, and the figure is laid out first (get_tightbbox), then
    rendered. Either way the text is on the canvas."""
    passes = []
    real = style._png_in_one_pass
    monkeypatch.setattr(style, "_png_in_one_pass", lambda *a: passes.append(real(*a)) or passes[-1])
    monkeypatch.setattr(plt, "close", lambda fig=None: None)
    for far, one_pass in (
        (lambda fig: fig.text(0.5, -0.6, "far out"), True),
        (lambda fig: fig.axes[1].text(2.5, 0.5, "far out", transform=fig.axes[1].transAxes), False),
    ):
        fig = _figure()
        text = far(fig)
        size = fig.get_size_inches()
        (png,) = style.save(fig, tmp_path, "f", "footer")
        assert passes[-1] is one_pass
        assert max(fig.get_size_inches() / size) > 1.5
        renderer = fig.canvas.get_renderer()
        box = text.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y0 >= 0 and box.y1 <= fig.bbox.height
        assert mpimg.imread(png).shape[1] <= style.PNG_MAX_PX


def test_an_empty_unclipped_scatter_leaves_no_mark(tmp_path):
    style.apply_theme()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.scatter([], [], marker=style.FAILED_MARKER, clip_on=False)
    (png,) = style.save(fig, tmp_path, "f", "footer")
    assert min(_ink_box(png)) > 3  # nothing in a corner: matplotlib draws such a scatter's marker at (0, 0)


def test_a_heatmap_with_labels_set_after_it_is_not_drawn_to_turn_them(monkeypatch):
    style.apply_theme()
    fig, ax = plt.subplots()
    draws = _draws(monkeypatch)
    with style.heatmap_labels_set_after():
        sns.heatmap(pd.DataFrame(np.arange(6.0).reshape(2, 3)), ax=ax, annot=True)
    assert draws == []
    sns.heatmap(pd.DataFrame(np.arange(6.0).reshape(2, 3)), ax=ax)
    assert len(draws) == 1  # the context put seaborn back
    plt.close(fig)


def test_fixed_titles_sit_where_matplotlib_puts_them_and_only_where_nothing_reaches_them():
    style.apply_theme()
    fig, (a, b) = plt.subplots(1, 2)
    a.set_title("a")
    b.set_title("b")
    style.throughput_axis(a)  # no offset text
    b.plot([0, 1], [1e9, 1.000001e9])  # a ScalarFormatter's offset text may reach the title
    fig.canvas.draw()
    auto = a.title.get_window_extent().bounds
    style.fixed_titles(fig)
    fig.canvas.draw()
    assert a.title.get_window_extent().bounds == auto
    assert a._autotitlepos is False and b._autotitlepos is not False
    plt.close(fig)

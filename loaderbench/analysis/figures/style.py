"""The look shared by every figure: seaborn's paper theme, a fixed layout, a provenance footer, saved as PNG (and
PDF or SVG when asked: loaderbench.analysis.figures.formats).

Layout: figures made with `grid` are laid out in inches (title, note and legend block on top, panels,
footer at the bottom), not by constrained layout: it is several times faster on figures with dozens of
panels, and it cannot move a legend onto a title or the footer (constrained layout places "outside"
legends without regard to either). `header` measures the block it draws and sizes the top margin to it
(a title or note wider than the figure is broken into lines, a legend gets fewer columns).

Every figure is saved by `save`: the footer goes under everything drawn, broken into lines no wider than the
figure, and then the canvas grows on each side by what still lies outside it (`fit_canvas`), so the saved
canvas is the figure itself and no title, legend, label or footer is cut. The PNG is drawn once: what is drawn is
read from its pixels (on a canvas with room around it) rather than from a layout pass before the drawing.

Repetitions: `repetitions_text` says how many repetitions are behind each point ("n = 3 repetitions per
point"), and where that differs `mark_n` prints the other counts at their points.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.text import Annotation
from matplotlib.ticker import FuncFormatter, NullLocator, ScalarFormatter
from matplotlib.transforms import Bbox

from loaderbench.analysis.figures import formats
from loaderbench.analysis.table.environment import provenance  # noqa: F401  re-exported: figures name their data

#: Marker conventions, the same in every figure (and explained in every legend that uses them).
UNSTABLE_FACE = "white"  # hollow marker: the cell's IQR is over 10% of its median
MAIN_PROCESS_MARKER = "s"  # num_workers = 0: loading in the main process, not a point on the worker curve
FAILED_MARKER = "X"
DPI = 150
#: The widest PNG drawn, in pixels: a third more than the report's page (1200 px, report_layout.CSS) shows, so a
#: figure stays sharp when zoomed; wider figures get fewer dots per inch (their PDF beside them is exact).
PNG_MAX_PX = 1600
FOOTER_PT = 6.5
LEGEND_PT = 8
NOTE_PT = 8
TITLE_PT = 11
# Fixed margins, in inches.
_LEFT, _RIGHT, _WSPACE = 0.8, 0.2, 0.8
_BOTTOM, _HSPACE = 0.85, 1.15  # x tick labels + x label + footer; between rows: the same plus a panel title
_TITLE_H, _ROW_H = 0.34, 0.19  # the figure title, one row of legend entries
_PANEL_TITLES = 0.6  # above the first row of panels: their titles, up to two lines
_PAD = 0.06  # between what is drawn and the edge of the canvas
_NUMBER = FuncFormatter(lambda v, _: f"{v:g}")


def apply_theme() -> None:
    sns.set_theme(context="paper", style="ticks", palette="colorblind", font_scale=1.1)
    plt.rcParams.update(
        {
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
            "legend.frameon": False,
            "axes.titlesize": "medium",
            "axes.titleweight": "bold",
            "pdf.compression": 6,
        }
    )


def cores_palette(cores_values) -> dict:
    values = sorted(set(cores_values))
    colors = (
        sns.color_palette("colorblind", max(len(values), 1))
        if len(values) <= 10
        else sns.color_palette("viridis", len(values))
    )
    return dict(zip(values, colors))


def only(frame, *names: str):
    """The columns `names` of the table `frame` that it has: what a figure reads, so that cutting it by panel
    copies no more."""
    return frame[[c for c in names if c in frame]]


def legend_rows(n_handles: int, ncol: int) -> int:
    return max(1, math.ceil(n_handles / max(1, ncol)))


@dataclass
class _Layout:
    """A `grid` figure in inches: panels of `width` x `height`, `ncols` x `nrows`, `top` and `bottom` margins."""

    ncols: int
    nrows: int
    width: float
    height: float
    top: float
    bottom: float

    def apply(self, fig: plt.Figure) -> None:
        fw = _LEFT + self.ncols * self.width + (self.ncols - 1) * _WSPACE + _RIGHT
        fh = self.top + self.nrows * self.height + (self.nrows - 1) * _HSPACE + self.bottom
        fig.set_size_inches(fw, fh)
        fig.subplots_adjust(
            left=_LEFT / fw,
            right=1 - _RIGHT / fw,
            bottom=self.bottom / fh,
            top=1 - self.top / fh,
            wspace=_WSPACE / self.width,
            hspace=_HSPACE / self.height,
        )


def grid(
    n_panels: int,
    ncols: int = 3,
    width: float = 3.9,
    height: float = 2.8,
    legend_rows: int = 2,
    bottom: float = _BOTTOM,
):
    """A figure of `n_panels` axes, `ncols` to a row, each `width` x `height` inches (the plot area),
    with room on top for the title and about `legend_rows` rows of legend (`header` sets it to what it draws)."""
    ncols = max(1, min(ncols, n_panels))
    nrows = max(1, math.ceil(n_panels / ncols))
    layout = _Layout(ncols, nrows, width, height, _TITLE_H + _ROW_H * legend_rows + _PANEL_TITLES, bottom)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False)
    layout.apply(fig)
    fig._loaderbench_layout = layout
    flat = list(axes.ravel())
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


def _text_width(text: str, artist, renderer) -> float:
    return renderer.get_text_width_height_descent(text, artist.get_fontproperties(), ismath=False)[0]


def _split(line: str, room: float, width) -> list[str]:
    """`line` as lines no wider than `room` (as `width` measures): broken at " · " first, then between words."""
    if width(line) <= room:
        return [line]
    parts = line.split(" · ") if " · " in line else None
    if parts is None:
        words = line.split(" ")
        if len(words) == 1:
            return [line]
        parts, sep = words, " "
    else:
        sep = " · "
    out, cur = [], ""
    for part in parts:
        trial = f"{cur}{sep}{part}" if cur else part
        if cur and width(trial) > room:
            out.append(cur)
            cur = part
        else:
            cur = trial
    out.append(cur)
    return [piece for chunk in out for piece in (_split(chunk, room, width) if sep == " · " else [chunk])]


def fit_text(text, room_px: float, renderer) -> None:
    """Break each line of the text artist `text` into lines no wider than `room_px` pixels."""
    lines = []
    for line in text.get_text().split("\n"):
        lines += _split(line, room_px, lambda s: _text_width(s, text, renderer))
    text.set_text("\n".join(lines))


def _inches(artist, fig: plt.Figure, renderer) -> Bbox:
    return artist.get_window_extent(renderer).transformed(fig.dpi_scale_trans.inverted())


def panel_title(ax, text: str, width: int = 44) -> None:
    """A panel's title, on two lines (split at a " · ") when it would run into the next panel."""
    if len(text) > width and " · " in text:
        parts = text.split(" · ")
        best = min(range(1, len(parts)), key=lambda i: abs(len(" · ".join(parts[:i])) - len(text) / 2))
        text = " · ".join(parts[:best]) + "\n" + " · ".join(parts[best:])
    ax.set_title(text, fontsize=9.5 if "\n" in text else None)


def throughput_axis(ax) -> None:
    """samples/s on y, from 0, with short tick labels (25k, not 25000) so they never reach the next panel."""

    def compact(v, _pos=None) -> str:  # all in thousands when the axis reaches 10k, never mixed
        return f"{v / 1000:g}k" if ax.get_ylim()[1] >= 10_000 and v else f"{v:g}"

    ax.yaxis.set_major_formatter(FuncFormatter(compact))
    ax.set_ylabel("throughput (samples/s)")


def workers_axis(ax, ns) -> None:
    """num_workers on x: linear for short sweeps, log2-like (0 kept) when the sweep spans 16x or more."""
    ns = [float(n) for n in np.unique(np.asarray(ns, dtype=float)) if np.isfinite(n)]  # distinct first: ns is rows
    pos = [n for n in ns if n > 0]
    if pos and max(pos) / min(pos) >= 16:
        ax.set_xscale("symlog", base=2, linthresh=1, linscale=0.4)
        # labels at 0 and the powers of two only (they would overlap otherwise); the other measured
        # values get an unlabelled tick
        major = [n for n in ns if n == 0 or math.log2(n).is_integer()]
        ax.set_xticks(major)
        ax.set_xticklabels([f"{n:g}" for n in major], fontsize=7.5)
        ax.set_xticks([n for n in ns if n not in major], minor=True)
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    else:
        ax.set_xticks(ns)
        ax.set_xticklabels([f"{n:g}" for n in ns])
    lo, hi = (min(ns), max(ns)) if ns else (0, 1)
    span = (hi - lo) or 1
    if ax.get_xscale() == "linear":
        ax.set_xlim(lo - 0.05 * span - 0.3, hi + 0.05 * span + 0.3)
    else:
        ax.set_xlim(-0.3 if lo == 0 else lo / 1.25, hi * 1.25)


def log2_axis(axis) -> None:
    """A base-2 log axis labelled with plain numbers (0.5, 1, 2, 4), not powers."""
    axis.axes.set_xscale("log", base=2) if axis.axis_name == "x" else axis.axes.set_yscale("log", base=2)
    axis.set_major_formatter(_NUMBER)
    axis.set_minor_locator(NullLocator())


def header(fig: plt.Figure, title: str, handles: list, ncol: int = 5, note: str | None = None) -> None:
    """The figure's title, a `note` under it (what the points and bars are, n and coverage) and its legend, as one
    block above the panels: for a `grid` figure the top margin is set to the block's measured height; above any
    other figure the block is stacked over it (save grows the canvas to hold it)."""
    layout = getattr(fig, "_loaderbench_layout", None)
    renderer = fig.canvas.get_renderer()
    room = (fig.get_figwidth() - 2 * _PAD) * fig.dpi
    texts = [fig.text(0.5, 1, title, ha="center", va="top", fontsize=TITLE_PT)]
    if note:
        texts.append(fig.text(0.5, 1, note, ha="center", va="top", fontsize=NOTE_PT, color="0.25"))
    for t in texts:
        fit_text(t, room, renderer)
    leg = None
    cols = max(1, min(len(handles), ncol))
    while handles:
        leg = fig.legend(
            handles=handles,
            loc="upper center",
            ncol=cols,
            fontsize=LEGEND_PT,
            borderaxespad=0,
            handlelength=2.2,
            columnspacing=1.6,
            labelspacing=0.3,
        )
        if cols == 1 or leg.get_window_extent(renderer).width <= room:
            break
        leg.remove()
        cols -= 1
    heights = [_inches(t, fig, renderer).height for t in texts]
    leg_h = _inches(leg, fig, renderer).height + 0.12 if leg is not None else 0.0
    block = 0.08 + sum(heights) + 0.05 * (len(heights) - 1) + leg_h
    if isinstance(layout, _Layout):
        layout.top = block + _PANEL_TITLES
        layout.apply(fig)
        y = 0.08
    else:  # a figure laid out otherwise: the block goes above it, and save grows the canvas to hold it
        y = 0.08 - block - 0.35
    fh = fig.get_figheight()
    for t, h in zip(texts, heights):
        t.set_position((0.5, 1 - y / fh))
        y += h + 0.05
    if leg is not None:
        leg.set_bbox_to_anchor((0.5, 1 - (y + 0.07) / fh), transform=fig.transFigure)


@contextmanager
def heatmap_labels_set_after():
    """seaborn's `heatmap` without the draw of the whole figure it makes to see whether its tick labels overlap
    (and turns them if so): for a heat map whose tick labels are set, turned as they must be, after it."""
    import seaborn.matrix

    real = getattr(seaborn.matrix, "_draw_figure", None)
    if real is None:  # a seaborn that does not draw there
        yield
        return
    seaborn.matrix._draw_figure = lambda fig: None
    try:
        yield
    finally:
        seaborn.matrix._draw_figure = real


def fixed_titles(fig: plt.Figure) -> None:
    """Panel titles left where they are (on top of the panel) instead of matplotlib moving each one, on every draw,
    above what may reach into it: that check lays out the panel's y axis once more. Only where nothing can: the x
    axis ticked and labelled below, no twin or inset, and y tick labels that carry no offset text (not a
    ScalarFormatter)."""
    for ax in fig.axes:
        if (
            ax.xaxis.get_ticks_position() == "bottom"
            and ax.xaxis.get_label_position() == "bottom"
            and not ax.child_axes
            and len(ax._twinned_axes.get_siblings(ax)) == 1  # type: ignore[attr-defined]
            and not isinstance(ax.yaxis.get_major_formatter(), ScalarFormatter)
        ):
            ax._autotitlepos = False  # type: ignore[attr-defined]


def fit_canvas(fig: plt.Figure, drawn: Bbox) -> None:
    """Grow the canvas so that `drawn` (inches, what the figure draws) lies inside it with a small pad: by what
    sticks out on each side, moving everything placed in figure coordinates (axes, figure texts and legends) with
    it so nothing moves relative to anything else."""
    w, h = fig.get_size_inches()
    left, right = max(0.0, _PAD - drawn.x0), max(0.0, drawn.x1 + _PAD - w)
    bottom, top = max(0.0, _PAD - drawn.y0), max(0.0, drawn.y1 + _PAD - h)
    if left or right or bottom or top:
        reframe(fig, Bbox.from_extents(-left, -bottom, w + right, h + top))


def reframe(fig: plt.Figure, region: Bbox) -> None:
    """Make `region` (inches, in the figure as it is) the whole canvas, moving everything placed in figure
    coordinates (axes, figure texts and legends) with it so nothing moves relative to anything else."""
    w, h = fig.get_size_inches()
    w2, h2 = region.width, region.height

    def moved(b: Bbox) -> Bbox:  # a box in inches -> the same place, in the new figure's fractions
        return Bbox.from_extents(
            (b.x0 - region.x0) / w2, (b.y0 - region.y0) / h2, (b.x1 - region.x0) / w2, (b.y1 - region.y0) / h2
        )

    for ax in fig.axes:
        p = ax.get_position()
        ax.set_position(moved(Bbox.from_extents(p.x0 * w, p.y0 * h, p.x1 * w, p.y1 * h)))
    for t in fig.texts:
        if t.get_transform() is fig.transFigure:
            x, y = t.get_position()
            t.set_position(((x * w - region.x0) / w2, (y * h - region.y0) / h2))
    for leg in fig.legends:
        anchor = leg.get_bbox_to_anchor().transformed(fig.dpi_scale_trans.inverted())
        leg.set_bbox_to_anchor(moved(anchor), transform=fig.transFigure)
    fig.set_size_inches(w2, h2)


#: CPU seconds this process has spent in matplotlib's own rendering and writing of figures (`savefig`, every format;
#: for the PNG drawn in one pass, its draw and its writing): what no code of ours can make cheaper, read by the
#: scale bench as part of the floor under `make figures`.
_SAVEFIG_CPU_S = [0.0]


def savefig_cpu_s() -> float:
    """CPU seconds spent in `savefig` by this process so far (see _SAVEFIG_CPU_S)."""
    return _SAVEFIG_CPU_S[0]


#: Told (path, pixels) of each PNG drawn in one pass once it is written, while `after_png` sets it: the drawing
#: workers make the report's 256-colour copy from the pixels in hand instead of reading the file back.
_AFTER_PNG: list = [None]


@contextmanager
def after_png(told):
    """`told(path, pixels)` after each PNG drawn in one pass (see `save`) is written, the pixels as written (RGBA
    rows, top first), until the block ends."""
    _AFTER_PNG[0] = told
    try:
        yield
    finally:
        _AFTER_PNG[0] = None


def save(fig: plt.Figure, folder: Path, name: str, footer: str) -> list[Path]:
    """Write `folder/name.png` (and `.pdf`, `.svg` where formats.current() asks for them) with the provenance
    `footer` under everything else, the canvas grown to hold all that is drawn (`fit_canvas`); returns the files,
    the PNG first.

    The PNG is drawn once (`_png_in_one_pass`): on a canvas with room on every side, what it inked measured from
    its pixels, the footer drawn under that, and the canvas then cut to what `fit_canvas` would have grown it to.
    Where that cannot be (something reached the edge of the room, or the PNG would come out wider than PNG_MAX_PX
    at the dots per inch chosen first), the figure is laid out once to find what it draws (`get_tightbbox`) and
    then rendered."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.{ext}" for ext in formats.current()]
    _write_png(fig, paths[0], footer)
    for path in paths[1:]:
        _timed(fig.savefig, path, dpi=DPI)  # the vector formats at DPI, for what they rasterise
    plt.close(fig)
    return paths


def _write_png(fig: plt.Figure, path: Path, footer: str) -> None:
    """The PNG at `path` with the `footer`, the figure framed as written (see `save`)."""
    fixed_titles(fig)
    if _png_in_one_pass(fig, path, footer):
        return
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    drawn = fig.get_tightbbox(renderer)  # places tick labels and axis labels as a draw would, without one
    fit_canvas(fig, _footer_under(fig, drawn, footer, renderer, Bbox.from_extents(0, 0, *fig.get_size_inches()))[1])
    dpi = png_dpi(fig.get_figwidth())
    fig.set_dpi(dpi)
    # at the DPI sized for the page, not dpi="figure" (matplotlib reads that as the figure's original DPI)
    _timed(fig.savefig, path, dpi=dpi)


def _timed(savefig, *args, **kw) -> None:
    cpu = time.process_time()
    savefig(*args, **kw)
    _SAVEFIG_CPU_S[0] += time.process_time() - cpu


def _footer_under(fig: plt.Figure, drawn: Bbox, footer: str, renderer, canvas: Bbox):
    """The `footer` text placed under `drawn` (inches), as wide as `drawn` and the `canvas` it started on allow;
    returns the text and what the two take together (inches)."""
    w, h = fig.get_size_inches()
    x0 = max(drawn.x0, canvas.x0)
    text = fig.text(x0 / w, (drawn.y0 - 0.08) / h, footer, fontsize=FOOTER_PT, color="0.35", ha="left", va="top")
    fit_text(text, (max(canvas.x1, drawn.x1) - x0 - _PAD) * fig.dpi, renderer)
    return text, Bbox.union([drawn, _inches(text, fig, renderer)])


#: The room around the canvas the one-pass PNG is drawn on, in inches: the figure's texts and legends and the panels'
#: texts placed away from their panel that lie further out widen it; under the panels, room for the footer as well.
#: Ink within _EDGE of the room's edge may go on past it (what is drawn beside a panel is never further apart than
#: that: tick labels, axis labels, titles), and the figure is laid out first instead.
_ROOM, _FOOTER_ROOM, _EDGE = 1.0, 0.9, 0.3


def _room(fig: plt.Figure, dpi: float) -> Bbox:
    """The region (inches, in the figure as it is) to draw on: the canvas, the figure's texts and legends, the
    panels' texts and legends anchored away from their panel, and _ROOM on every side (_FOOTER_ROOM more below),
    in whole pixels at `dpi` from the canvas's corner."""
    w, h = fig.get_size_inches()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [Bbox.from_extents(0, 0, w, h)]
    far = [*fig.texts, *fig.legends]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        near = ax.bbox.padded(0.5 * fig.dpi)
        legend = ax.get_legend()
        far += [legend] if legend is not None else []
        far += [t for t in ax.texts if not near.contains(*_anchor(t, renderer))]
    boxes += [_inches(a, fig, renderer) for a in far if a.get_visible()]
    box = Bbox.union(boxes)
    x0, y0 = np.floor((box.x0 - _ROOM) * dpi) / dpi, np.floor((box.y0 - _ROOM - _FOOTER_ROOM) * dpi) / dpi
    x1, y1 = x0 + np.ceil((box.x1 + _ROOM - x0) * dpi) / dpi, y0 + np.ceil((box.y1 + _ROOM - y0) * dpi) / dpi
    return Bbox.from_extents(x0, y0, x1, y1)


def _anchor(text, renderer) -> tuple[float, float]:
    """Where `text` is anchored, in pixels: the point an annotation points at (its text lies a few points off it),
    else its position."""
    if isinstance(text, Annotation):
        return tuple(text._get_position_xy(renderer))  # type: ignore[attr-defined]
    return tuple(text.get_transform().transform(text.get_position()))


def _inked(pixels: np.ndarray, edge: int) -> tuple[int, int, int, int] | None:
    """(first row, last row + 1, first column, last column + 1) of the pixels that differ from the corner's
    (the background); None where nothing is inked or the ink comes within `edge` pixels of the edge (it may go on
    past it)."""
    flat = np.ascontiguousarray(pixels).view(np.uint32)[..., 0]
    ink = flat != flat[0, 0]
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if not len(rows):
        return None
    r0, r1, c0, c1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    if min(r0, c0, ink.shape[0] - r1, ink.shape[1] - c1) < edge:
        return None
    return r0, r1, c0, c1


def _png_in_one_pass(fig: plt.Figure, path: Path, footer: str) -> bool:
    """The PNG of `fig` drawn once (see `save`), the figure then framed as written; False, and the figure as it
    was, where it cannot be."""
    from matplotlib.image import imsave

    w, h = fig.get_size_inches()
    dpi = png_dpi(w)
    room = _room(fig, dpi)
    reframe(fig, room)
    fig.set_dpi(dpi)
    canvas = Bbox.from_extents(-room.x0, -room.y0, w - room.x0, h - room.y0)  # the canvas, in the room
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    cpu = time.process_time()
    fig.canvas.draw()
    _SAVEFIG_CPU_S[0] += time.process_time() - cpu
    pixels = np.asarray(renderer.buffer_rgba())
    rows, cols = pixels.shape[:2]
    inked = _inked(pixels, round(_EDGE * dpi))
    if inked is not None:
        r0, r1, c0, c1 = inked
        drawn = Bbox.from_extents(c0 / dpi, (rows - r1) / dpi, c1 / dpi, (rows - r0) / dpi)
        text, both = _footer_under(fig, drawn, footer, renderer, canvas)
        frame = Bbox.union([canvas, _padded(both)])
        px = np.round(np.array([frame.x0, frame.y0, frame.x1, frame.y1]) * dpi).astype(int)
        # the frame inside the room, and no wider than a PNG may be (else the dots per inch are chosen again)
        fits = px[0] >= 0 and px[1] >= 0 and px[2] <= cols and px[3] <= rows
        if fits and px[2] - px[0] <= PNG_MAX_PX:
            cpu = time.process_time()
            text.draw(renderer)
            cut = np.ascontiguousarray(pixels[rows - px[3] : rows - px[1], px[0] : px[2]])
            buffer: memoryview = memoryview(cut)  # type: ignore[arg-type]
            imsave(path, buffer, format="png", origin="upper", dpi=dpi)
            _SAVEFIG_CPU_S[0] += time.process_time() - cpu
            if _AFTER_PNG[0] is not None:
                _AFTER_PNG[0](path, cut)
            reframe(fig, Bbox.from_extents(*(px / dpi)))
            return True
        text.remove()
    reframe(fig, canvas)  # as it was
    return False


def _padded(b: Bbox) -> Bbox:
    return Bbox.from_extents(b.x0 - _PAD, b.y0 - _PAD, b.x1 + _PAD, b.y1 + _PAD)


def png_dpi(width_in: float) -> float:
    """Dots per inch of a figure `width_in` inches wide: DPI, or fewer where that would be wider than PNG_MAX_PX."""
    return min(float(DPI), PNG_MAX_PX / width_in) if width_in > 0 else float(DPI)


def repetitions_text(ns, per: str = "point") -> str:
    """How many ok repetitions are behind each point (`ns`, one count per point; 0, a point with none, is not
    drawn as a measurement): "n = 3 repetitions per point", or where the counts differ the most common one and
    the others, which `mark_n` prints at their points: "n = 3 repetitions per point (2 where stated)"."""
    usual = usual_n(ns)
    if usual is None:
        return f"no {per} has an ok repetition"
    others = sorted({int(n) for n in ns if _counted(n)} - {usual})
    text = f"n = {usual} repetition{'s' if usual != 1 else ''} per {per}"
    return text + (f" ({', '.join(map(str, others))} where stated)" if others else "")


def _counted(n) -> bool:
    return n is not None and np.isfinite(float(n)) and n > 0


def usual_n(ns) -> int | None:
    """The most common repetition count of the points (the larger on a tie); None when no point has any."""
    counts = Counter(int(n) for n in ns if _counted(n))
    return max(counts, key=lambda k: (counts[k], k)) if counts else None


def mark_n(ax, xs, ys, ns, usual: int | None, **kw) -> None:
    """Print "n=k" under each point whose repetition count k differs from the `usual` one (see repetitions_text)."""
    for x, y, n in zip(xs, ys, ns):
        if _counted(n) and int(n) != usual and np.isfinite(float(y)):
            ax.annotate(
                f"n={int(n)}",
                (x, y),
                textcoords="offset points",
                xytext=(0, -11),
                ha="center",
                va="center",
                fontsize=6.5,
                color="0.2",
                **kw,
            )

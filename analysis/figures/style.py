"""The look shared by every figure: seaborn's paper theme, a fixed layout, a provenance footer, PNG + PDF.

Layout: figures made with `grid` are laid out in inches, computed once (title and legend block on
top, panels, footer at the bottom), not by constrained layout: it is several times faster on
figures with dozens of panels, and it cannot move a legend onto a title or the footer (constrained
layout places "outside" legends without regard to either).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: E402

from analysis.environment import provenance  # noqa: E402,F401  (re-exported: figures name their data)

#: Marker conventions, the same in every figure (and explained in every legend that uses them).
UNSTABLE_FACE = "white"  # hollow marker: the cell's IQR is over 10% of its median
MAIN_PROCESS_MARKER = "s"  # num_workers = 0: loading in the main process, not a point on the worker curve
FAILED_MARKER = "X"
DPI = 150
FOOTER_PT = 6.5
LEGEND_PT = 8
TITLE_PT = 11
# Fixed margins, in inches.
_LEFT, _RIGHT, _WSPACE = 0.8, 0.2, 0.8
_BOTTOM, _HSPACE = 0.85, 1.15  # x tick labels + x label + footer; between rows: the same plus a panel title
_TITLE_H, _ROW_H = 0.34, 0.19  # the figure title, one row of legend entries
_NUMBER = FuncFormatter(lambda v, _: f"{v:g}")


def apply_theme() -> None:
    sns.set_theme(context="paper", style="ticks", palette="colorblind", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": DPI, "savefig.dpi": DPI, "legend.frameon": False,
                         "axes.titlesize": "medium", "axes.titleweight": "bold", "pdf.compression": 6})


def cores_palette(cores_values) -> dict:
    values = sorted(set(cores_values))
    colors = sns.color_palette("colorblind", max(len(values), 1)) if len(values) <= 10 else \
        sns.color_palette("viridis", len(values))
    return dict(zip(values, colors))


def legend_rows(n_handles: int, ncol: int) -> int:
    return max(1, math.ceil(n_handles / max(1, ncol)))


def grid(n_panels: int, ncols: int = 3, width: float = 3.9, height: float = 2.8, legend_rows: int = 2,
         bottom: float = _BOTTOM):
    """A figure of `n_panels` axes, `ncols` to a row, each `width` x `height` inches (the plot area),
    with room on top for the title and `legend_rows` rows of legend (see `header`)."""
    ncols = max(1, min(ncols, n_panels))
    nrows = max(1, math.ceil(n_panels / ncols))
    top = _TITLE_H + _ROW_H * legend_rows + 0.6  # + the first row's panel titles (up to two lines)
    fw = _LEFT + ncols * width + (ncols - 1) * _WSPACE + _RIGHT
    fh = top + nrows * height + (nrows - 1) * _HSPACE + bottom
    fig, axes = plt.subplots(nrows, ncols, figsize=(fw, fh), squeeze=False)
    fig.subplots_adjust(left=_LEFT / fw, right=1 - _RIGHT / fw, bottom=bottom / fh, top=1 - top / fh,
                        wspace=_WSPACE / width, hspace=_HSPACE / height)
    fig._loaderbench_layout = True  # save(): the footer's place is already free
    flat = list(axes.ravel())
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]




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
    ns = sorted({float(n) for n in ns if np.isfinite(n)})
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


def header(fig: plt.Figure, title: str, handles: list, ncol: int = 5) -> None:
    """The figure's title and its legend, as one block above the panels (room made by `grid`)."""
    fh = fig.get_figheight()
    fig.text(0.5, 1 - 0.08 / fh, title, ha="center", va="top", fontsize=TITLE_PT)
    if handles:
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - (0.08 + _TITLE_H) / fh),
                   ncol=max(1, min(len(handles), ncol)), fontsize=LEGEND_PT, borderaxespad=0, handlelength=2.2,
                   columnspacing=1.6, labelspacing=0.3)


def save(fig: plt.Figure, folder: Path, name: str, footer: str) -> list[Path]:
    """Write `folder/name.png` and `.pdf` with the provenance `footer` under everything else."""
    if getattr(fig, "_loaderbench_layout", False):
        fig.text(0.005, 0.06 / fig.get_figheight(), footer, fontsize=FOOTER_PT, color="0.35", ha="left",
                 va="bottom")
        kw: dict = {}
    else:  # someone else's layout (tight_layout, a FacetGrid): below the axes, and the canvas grows to include it
        fig.text(0.005, -0.02, footer, fontsize=FOOTER_PT, color="0.35", ha="left", va="top")
        kw = {"bbox_inches": "tight", "pad_inches": 0.08}
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        path = folder / f"{name}.{ext}"
        fig.savefig(path, dpi=DPI, **kw)
        paths.append(path)
    plt.close(fig)
    return paths

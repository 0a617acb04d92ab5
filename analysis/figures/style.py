"""The look shared by every figure: seaborn's paper theme, a provenance footer, PNG + PDF output."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

from analysis.environment import provenance  # noqa: E402,F401  (re-exported: figures name their data)

#: Marker conventions, the same in every figure (and explained in every legend that uses them).
UNSTABLE_FACE = "white"  # hollow marker: the cell's IQR is over 10% of its median
MAIN_PROCESS_MARKER = "s"  # num_workers = 0: loading in the main process, not a point on the worker curve
FAILED_MARKER = "X"


def apply_theme() -> None:
    sns.set_theme(context="paper", style="ticks", palette="colorblind", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "legend.frameon": False,
                         "axes.titlesize": "medium", "axes.titleweight": "bold"})


def cores_palette(cores_values) -> dict:
    values = sorted(set(cores_values))
    colors = sns.color_palette("colorblind", max(len(values), 1)) if len(values) <= 10 else \
        sns.color_palette("viridis", len(values))
    return dict(zip(values, colors))


def grid(n_panels: int, ncols: int = 3, width: float = 4.3, height: float = 3.3):
    ncols = max(1, min(ncols, n_panels))
    nrows = max(1, math.ceil(n_panels / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows + 0.9), squeeze=False,
                             layout="constrained")
    flat = list(axes.ravel())
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


def workers_axis(ax, ns) -> None:
    """num_workers on x: linear for short sweeps, log2-like (0 kept) when the sweep spans 16x or more."""
    ns = sorted({float(n) for n in ns if np.isfinite(n)})
    pos = [n for n in ns if n > 0]
    if pos and max(pos) / min(pos) >= 16:
        ax.set_xscale("symlog", base=2, linthresh=1, linscale=0.5)
        ax.set_xticks(ns)
        ax.set_xticklabels([f"{n:g}" for n in ns], fontsize=7, rotation=90 if len(ns) > 10 else 0)
        ax.minorticks_off()
    else:
        ax.set_xticks(ns)
        ax.set_xticklabels([f"{n:g}" for n in ns])
    lo, hi = (min(ns), max(ns)) if ns else (0, 1)
    span = (hi - lo) or 1
    if ax.get_xscale() == "linear":
        ax.set_xlim(lo - 0.05 * span - 0.3, hi + 0.05 * span + 0.3)


def save(fig: plt.Figure, folder: Path, name: str, footer: str) -> list[Path]:
    # The footer goes below everything already drawn (axes, tick labels, a legend under the panels):
    # bbox_inches="tight" then grows the canvas to include it, so it never overlaps anything.
    fig.canvas.draw()
    fig.set_layout_engine("none")  # freeze the layout: saving must not move the panels under the footer
    bottom = fig.get_tightbbox(fig.canvas.get_renderer()).y0 / fig.get_figheight()
    fig.text(0.005, bottom - 0.01, footer, fontsize=6.5, color="0.35", ha="left", va="top")
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        path = folder / f"{name}.{ext}"
        fig.savefig(path, dpi=150, bbox_inches="tight", pad_inches=0.08,
                    metadata={"Software": "loaderbench analysis"} if ext == "png" else None)
        paths.append(path)
    plt.close(fig)
    return paths

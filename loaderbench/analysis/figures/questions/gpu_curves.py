"""What the two GPU questions' figures share: samples/s and accelerator utilization (AU) of each series of cells
against a categorical x, repetitions as dots, and a cell all of whose repetitions failed drawn as a cross at zero
labelled with its failure kind (a failure is the answer there: out of GPU memory, CUDA in a forked worker)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.style import FAILED_MARKER
from loaderbench.analysis.table.records import col

PANELS = [("samples_per_s", "throughput (samples/s)"), ("accelerator_busy_fraction", "accelerator utilization (AU)")]


def failed_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell none of whose repetitions is ok, with its most common failure kind."""
    out = []
    for _, cell in rows.groupby("cell_id", sort=False):
        if (cell["status"] != "ok").all():
            kinds = col(cell, "error_kind").fillna("failed").astype(str)
            out.append(cell.iloc[0].to_dict() | {"kind": kinds.mode().iloc[0]})
    return pd.DataFrame(out)


def draw_curves(axes, rows: pd.DataFrame, x: str, series: Callable[[pd.Series], str]) -> list[tuple]:
    """On each of `axes` (one per PANELS entry), a line per `series` (a row's label) of median over ok repetitions
    against `x` at categorical positions, the repetitions as black dots and the all-failed cells as crosses at zero;
    returns the points drawn (ax, position, median, n) for the note's repetition counts."""
    xs = sorted(int(v) for v in pd.to_numeric(rows[x], errors="coerce").dropna().unique())
    at = {v: i for i, v in enumerate(xs)}
    rows = rows.assign(_series=rows.apply(series, axis=1), _x=pd.to_numeric(rows[x], errors="coerce").map(at))
    labels = list(dict.fromkeys(rows.sort_values("_x")["_series"]))
    pal = dict(zip(labels, sns.color_palette("colorblind", max(len(labels), 1))))
    ok, failed = rows[rows["status"] == "ok"], failed_cells(rows)
    points = []
    for ax, (column, label) in zip(axes, PANELS):
        for name in labels:
            line = ok[ok["_series"] == name]
            meds = []
            for pos, cell in line.groupby("_x", sort=True):
                v = pd.to_numeric(cell[column], errors="coerce").to_numpy(dtype=float)
                v = v[np.isfinite(v)]
                if v.size:
                    ax.plot([pos] * v.size, v, "o", color="black", ms=2.5, zorder=3)
                    meds.append((pos, float(np.median(v))))
                    points.append((ax, pos, meds[-1][1], int(v.size)))
            if meds:
                ax.plot(*zip(*meds), "-o", color=pal[name], label=name, zorder=2)
        if not failed.empty:
            for _, cell in failed.iterrows():
                ax.plot(cell["_x"], 0, FAILED_MARKER, color=pal[cell["_series"]], ms=9, mew=2, zorder=4)
                ax.annotate(
                    cell["kind"], (cell["_x"], 0), xytext=(0, 9), textcoords="offset points", ha="center", fontsize=7
                )
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        ax.set_xlabel(x)
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        sns.despine(ax=ax)
    return points

"""What the two GPU questions' figures share: samples/s and accelerator utilization (AU) of each series of cells
against a categorical x, repetitions as dots, and a cell all of whose repetitions failed drawn as a cross at zero
labelled with its failure kind (a failure is the answer there: out of GPU memory, CUDA in a forked worker)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, Curves
from loaderbench.analysis.figures.style import FAILED_MARKER
from loaderbench.analysis.table.records import col

PANELS = [
    ("samples_per_s", 1.0, "throughput (samples/s)"),
    ("accelerator_busy_fraction", 1.0, "accelerator utilization (AU)"),
]


def failed_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell none of whose repetitions is ok, with its most common failure kind."""
    out = []
    for _, cell in rows.groupby("cell_id", sort=False):
        if (cell["status"] != "ok").all():
            kinds = col(cell, "error_kind").fillna("failed").astype(str)
            out.append(cell.iloc[0].to_dict() | {"kind": kinds.mode().iloc[0]})
    return pd.DataFrame(out)


def draw_curves(
    rows: pd.DataFrame,
    x: str,
    series: Callable[[pd.Series], str],
    says: Answer,
    df: pd.DataFrame,
    study: str,
    out: Path,
) -> list[Path]:
    """Curves of PANELS, a line per `series` (a row's label) of medians over ok repetitions against `x` at
    categorical positions, and the all-failed cells as crosses at zero, saved as `says`."""
    rows = rows.assign(_series=rows.apply(series, axis=1), _x=pd.to_numeric(rows[x], errors="coerce"))
    xs = sorted(int(v) for v in rows["_x"].dropna().unique())
    labels = list(dict.fromkeys(rows.sort_values("_x")["_series"]))
    pal = dict(zip(labels, sns.color_palette("colorblind", max(len(labels), 1))))
    failed = failed_cells(rows)

    def crosses(ax) -> None:
        for _, cell in failed.iterrows():
            at = xs.index(cell["_x"])
            ax.plot(at, 0, FAILED_MARKER, color=pal[cell["_series"]], ms=9, mew=2, zorder=4)
            ax.annotate(cell["kind"], (at, 0), xytext=(0, 9), textcoords="offset points", ha="center", fontsize=7)

    return Curves(
        x="_x",
        y=PANELS,
        hue="_series",
        hues=labels,
        palette=list(pal.values()),
        gaps=False,
        xlabel=x,
        from_zero=True,
        says=says,
    ).answer(rows[rows["status"] == "ok"], df, study, out, xs=xs, mark=crosses)

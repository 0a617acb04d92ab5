"""The batch-size question's figure: loading time per batch and per sample against the batch size (claims:
loaderbench.analysis.questions.batch_size)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.questions.shared import NothingToDraw, claims_header, legend_top, save_with_note
from loaderbench.analysis.questions.batch_size import batch_rows

#: (column, y label, scale to the unit shown)
PANELS = [("s_per_batch", "loading time per batch (ms)", 1e3), ("s_per_sample", "loading time per sample (µs)", 1e6)]


def loading_time_by_batch_size(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Per num_workers: the median loading time of a batch and of a sample at each batch size, repetitions as dots."""
    rows = batch_rows(df)
    if rows.empty:
        raise NothingToDraw("no ok cpu cells without a training step")
    sizes = sorted(rows["batch_size"].unique())
    pal = sns.color_palette("colorblind", 4)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    points = []
    for ax, (column, label, scale) in zip(axes, PANELS):
        for k, (workers, line) in enumerate(rows.groupby("num_workers", sort=True)):
            med = []
            for x, size in enumerate(sizes):
                v = line[line["batch_size"] == size][column].to_numpy(dtype=float) * scale
                v = v[np.isfinite(v)]
                if not v.size:
                    med.append(np.nan)
                    continue
                med.append(float(np.median(v)))
                ax.plot([x] * v.size, v, "o", color="black", ms=2.5)
                points.append((ax, x, med[-1], int(v.size)))
            ax.plot(range(len(sizes)), med, "-o", color=pal[k], label=f"{int(workers)} workers")
        ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
        ax.set_xlabel("batch size")
        ax.set_ylabel(label)
        sns.despine(ax=ax)
    leg = legend_top(fig, axes[0], None, ncol=4)
    claims_header(fig, f"Loading time against batch size ({study})", df, study, "batch-size", legend=leg)
    return save_with_note(
        fig,
        df,
        study,
        out,
        "loading_time_by_batch_size",
        "Lines: median over repetitions; dots: repetitions. Loading time: batch size (or 1) over the measured "
        "samples/s, with no training step.",
        points,
        per="point",
    )

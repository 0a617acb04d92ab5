"""The batch-size question's figure: loading time per batch and per sample against the batch size (claims:
loaderbench.analysis.questions.batch_size)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, Curves
from loaderbench.analysis.figures.questions.shared import NothingToDraw
from loaderbench.analysis.questions.batch_size import batch_rows

#: (column, scale to the unit shown, y label)
PANELS = [("s_per_batch", 1e3, "loading time per batch (ms)"), ("s_per_sample", 1e6, "loading time per sample (µs)")]


def loading_time_by_batch_size(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Per num_workers: the median loading time of a batch and of a sample at each batch size, repetitions as dots."""
    rows = batch_rows(df)
    if rows.empty:
        raise NothingToDraw("no ok cpu cells without a training step")
    return Curves(
        x="batch_size",
        y=PANELS,
        hue="num_workers",
        hues=sorted(rows["num_workers"].unique()),
        palette=sns.color_palette("colorblind", 4),
        label=lambda workers: f"{int(workers)} workers",
        xlabel="batch size",
        says=Answer(
            "batch-size",
            f"Loading time against batch size ({study})",
            "loading_time_by_batch_size",
            "Lines: median over repetitions; dots: repetitions. Loading time: batch size (or 1) over the measured "
            "samples/s, with no training step.",
            ncol=4,
        ),
    ).answer(rows, df, study, out)

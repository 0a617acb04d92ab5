"""The gpu-batch-size question's figure: samples/s and AU of a model trained on the GPU by batch size, the sizes
that ran out of GPU memory drawn as crosses (claims: loaderbench.analysis.questions.gpu_batch_size)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from loaderbench.analysis.figures.questions.gpu_curves import draw_curves
from loaderbench.analysis.figures.questions.shared import claims_header, drawable, legend_top, save_with_note
from loaderbench.analysis.table.records import col


def samples_by_batch_size_on_the_gpu(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Samples/s and the GPU's busy share by batch size, per model; sizes whose every repetition failed as crosses."""
    drawable(df)
    rows = df.assign(model=col(df, "model", "none").astype(str))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    points = draw_curves(axes, rows, "batch_size", lambda row: f"{row['model']}, {row.get('decoder') or '?'} decoder")
    leg = legend_top(fig, axes[0], None, ncol=3)
    claims_header(fig, f"Batch size on the GPU ({study})", df, study, "gpu-batch-size", legend=leg)
    return save_with_note(
        fig,
        df,
        study,
        out,
        "samples_by_batch_size_on_the_gpu",
        "Lines: median over repetitions; dots: repetitions; a cross: a batch size whose every repetition failed, with "
        "its failure kind. AU: the share of the window the GPU spent on the step.",
        points,
        per="point",
    )

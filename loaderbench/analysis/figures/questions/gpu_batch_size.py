"""The gpu-batch-size question's figure: samples/s and AU of a model trained on the GPU by batch size, the sizes
that ran out of GPU memory drawn as crosses (claims: loaderbench.analysis.questions.gpu_batch_size)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from loaderbench.analysis.figures.kinds import Answer
from loaderbench.analysis.figures.questions.gpu_curves import draw_curves
from loaderbench.analysis.figures.questions.shared import drawable
from loaderbench.analysis.table.records import col


def samples_by_batch_size_on_the_gpu(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Samples/s and the GPU's busy share by batch size, per model; sizes whose every repetition failed as crosses."""
    drawable(df)
    rows = df.assign(model=col(df, "model", "none").astype(str))
    return draw_curves(
        rows,
        "batch_size",
        lambda row: f"{row['model']}, {row.get('decoder') or '?'} decoder",
        Answer(
            "gpu-batch-size",
            f"Batch size on the GPU ({study})",
            "samples_by_batch_size_on_the_gpu",
            "Lines: median over repetitions; dots: repetitions; a cross: a batch size whose every repetition "
            "failed, with its failure kind. AU: the share of the window the GPU spent on the step.",
            ncol=3,
        ),
        df,
        study,
        out,
    )

"""The gpu-decode question's figure: decoding on the GPU (nvJPEG) against CPU decoding workers, samples/s and AU by
num_workers, with the forked workers that use CUDA drawn as the failures they are (claims:
loaderbench.analysis.questions.gpu_decode)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from loaderbench.analysis.figures.kinds import Answer
from loaderbench.analysis.figures.questions.gpu_curves import draw_curves
from loaderbench.analysis.figures.questions.shared import drawable

_STARTED = {"fork": "forked", "spawn": "spawned", "forkserver": "forkserver"}


def _series(row: pd.Series) -> str:
    """A decoder and how its workers start; a cell without workers joins its decoder's forked line (its point at
    0 is the cell process decoding)."""
    method = row["start_method"] if row["num_workers"] else "fork"
    return f"{row['decoder']}, {_STARTED.get(method, method)} workers"


def decoding_on_the_gpu_against_cpu_workers(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Samples/s and the GPU's busy share by num_workers, per decoder and start method; all-failed cells as crosses."""
    drawable(df)  # something ran
    return draw_curves(
        df,
        "num_workers",
        _series,
        Answer(
            "gpu-decode",
            f"Decoding on the GPU against CPU workers ({study})",
            "decoding_on_the_gpu_against_cpu_workers",
            "Lines: median over repetitions; dots: repetitions; a cross: a cell whose every repetition failed, "
            "with its failure kind. At 0 workers the cell process decodes. AU: the share of the window the GPU "
            "spent on the step.",
            ncol=3,
        ),
        df,
        study,
        out,
    )

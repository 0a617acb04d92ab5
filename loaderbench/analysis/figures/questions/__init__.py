"""One figure per question the studies answer, each in the module named after its question (as the claims in
loaderbench.analysis.claims) and each function named after what it shows; `draw_question_figures` picks the figure
matching
a study (by its name, else by the axes it varies).

Every figure: bars are medians over repetitions, black dots the repetitions themselves (so the dots are the
spread); ratio whiskers are distribution-free intervals whose real coverage and n the note prints; the header
names the verdicts of the question's claims as computed by loaderbench.analysis.claims (never written by hand); the
footer says how many repetitions are behind each bar or point ("n=k" at those that differ) and names study,
machine and versions. A figure whose rows hold nothing to draw raises NothingToDraw, and a
placeholder saying why is drawn instead (parts.py holds what the figures share).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from loaderbench.analysis.claims import question_of
from loaderbench.analysis.figures.questions.batch_size import loading_time_by_batch_size
from loaderbench.analysis.figures.questions.cheap_work import crossover_by_sample_size
from loaderbench.analysis.figures.questions.checkpointing import snapshot_cost_against_replay
from loaderbench.analysis.figures.questions.cow_memory import memory_growth_by_backing
from loaderbench.analysis.figures.questions.gpu_batch_size import samples_by_batch_size_on_the_gpu
from loaderbench.analysis.figures.questions.gpu_decode import decoding_on_the_gpu_against_cpu_workers
from loaderbench.analysis.figures.questions.gpu_feed import pin_memory_by_workers
from loaderbench.analysis.figures.questions.in_order import tail_latency_in_order
from loaderbench.analysis.figures.questions.ladder import ladder_speedups
from loaderbench.analysis.figures.questions.oversubscription import oversubscription_ranks_x_workers
from loaderbench.analysis.figures.questions.persistence import epoch_gap_by_persistence
from loaderbench.analysis.figures.questions.rng import rng_duplicates
from loaderbench.analysis.figures.questions.shared import NothingToDraw, empty
from loaderbench.analysis.figures.questions.sharing import sharing_strategy_limits
from loaderbench.analysis.figures.questions.sharing_size import cost_per_tensor_by_size
from loaderbench.analysis.figures.questions.shm_size import shm_peak_by_setting
from loaderbench.analysis.figures.questions.start_method import time_to_first_batch_by_start_method
from loaderbench.analysis.figures.questions.storage import workers_hide_latency
from loaderbench.analysis.figures.questions.threads import thread_process_curves
from loaderbench.analysis.figures.style import apply_theme

#: question -> the function drawing its figure; each figure's files are named after its function.
FIGURES = {
    "start-method": time_to_first_batch_by_start_method,
    "cow-memory": memory_growth_by_backing,
    "persistence": epoch_gap_by_persistence,
    "sharing": sharing_strategy_limits,
    "ladder": ladder_speedups,
    "gpu-feed": pin_memory_by_workers,
    "oversubscription": oversubscription_ranks_x_workers,
    "rng": rng_duplicates,
    "in-order": tail_latency_in_order,
    "storage": workers_hide_latency,
    "cheap-work": crossover_by_sample_size,
    "shm-size": shm_peak_by_setting,
    "batch-size": loading_time_by_batch_size,
    "sharing-size": cost_per_tensor_by_size,
    "threads": thread_process_curves,
    "checkpointing": snapshot_cost_against_replay,
    "gpu-decode": decoding_on_the_gpu_against_cpu_workers,
    "gpu-batch-size": samples_by_batch_size_on_the_gpu,
}


def draw_question_figures(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """The figure(s) answering the question `study` was made for (by its name, else the axes it varies), as
    PNG (+ the other formats asked for: figures.formats) under `out`; [] for a study that answers none of the
    questions."""
    rows = df[df["study"] == study] if "study" in df else df.iloc[0:0]
    question = question_of(study, rows)
    if question is None or rows.empty:
        return []
    apply_theme()
    draw = FIGURES[question]
    try:
        return draw(rows, study, Path(out))
    except NothingToDraw as why:
        return empty(rows, study, Path(out), draw.__name__, str(why))
    except (KeyError, ValueError, TypeError, IndexError) as exc:  # records lacking what the figure reads
        plt.close("all")
        warnings.warn(f"{draw.__name__} ({study}): could not draw: {type(exc).__name__}: {exc}", stacklevel=2)
        return empty(rows, study, Path(out), draw.__name__, f"could not draw ({type(exc).__name__}: {exc})")

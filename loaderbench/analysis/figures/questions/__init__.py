"""One figure per question the studies answer, each in the module named after its question and each function named
after what it shows; a question's declaration (loaderbench.analysis.questions) names its figure, and
`draw_question_figures` draws the one of the question a study was made for.

Every figure: bars are medians over repetitions, black dots the repetitions themselves (so the dots are the
spread); ratio whiskers are distribution-free intervals whose real coverage and n the note prints; the header
names the verdicts of the question's claims as computed by loaderbench.analysis.claims (never written by hand); the
footer says how many repetitions are behind each bar or point ("n=k" at those that differ) and names study,
machine and versions. A figure whose rows hold nothing to draw raises NothingToDraw, and a
placeholder saying why is drawn instead. loaderbench.analysis.figures.kinds holds the kinds most figures are
declared as and the Answer every one ends with; shared.py the helpers they draw with.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from loaderbench.analysis.claims import BY_NAME, question_of
from loaderbench.analysis.figures.questions.shared import NothingToDraw, empty
from loaderbench.analysis.figures.style import apply_theme
from loaderbench.analysis.questions import QUESTIONS
from loaderbench.analysis.rules.claim import Question


def figure_of(question: Question) -> Callable[[pd.DataFrame, str, Path], list[Path]]:
    """The function drawing the question's figure, as its declaration names it ("module:function")."""
    module, _, name = question.figure.partition(":")
    return getattr(importlib.import_module(module), name)


def figures() -> dict[str, Callable[[pd.DataFrame, str, Path], list[Path]]]:
    """question -> the function drawing its figure; each figure's files are named after its function."""
    return {q.name: figure_of(q) for q in QUESTIONS if q.figure}


def draw_question_figures(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """The figure(s) answering the question `study` was made for (as its records or study file declare), as
    PNG (+ the other formats asked for: figures.formats) under `out`; [] for a study that answers none of the
    questions."""
    rows = df[df["study"] == study] if "study" in df else df.iloc[0:0]
    question = question_of(study, rows)
    if question is None or rows.empty:
        return []
    apply_theme()
    if not BY_NAME[question].figure:
        return []
    draw = figure_of(BY_NAME[question])
    try:
        return draw(rows, study, Path(out))
    except NothingToDraw as why:
        return empty(rows, study, Path(out), draw.__name__, str(why))
    except (KeyError, ValueError, TypeError, IndexError) as exc:  # records lacking what the figure reads
        plt.close("all")
        warnings.warn(f"{draw.__name__} ({study}): could not draw: {type(exc).__name__}: {exc}", stacklevel=2)
        return empty(rows, study, Path(out), draw.__name__, f"could not draw ({type(exc).__name__}: {exc})")

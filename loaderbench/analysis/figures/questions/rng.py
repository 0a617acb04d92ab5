"""The rng question's figure: which random sources repeat their draws across workers and epochs
(claims: loaderbench.analysis.questions.rng)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer
from loaderbench.analysis.figures.questions.shared import NothingToDraw
from loaderbench.analysis.figures.style import usual_n
from loaderbench.analysis.table.environment import env_one
from loaderbench.analysis.table.records import col, is_true, ok_rows

COLUMNS = [f"rng_dup_{s}_{p}" for p in ("within", "across") for s in ("python", "numpy", "torch")]


def rng_duplicates(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Fraction of random draws that repeat, per source (Python, NumPy, torch), within and across epochs."""
    ok = ok_rows(df).copy()
    if ok.empty or not any(c in ok for c in COLUMNS):
        raise NothingToDraw("no ok records with rng_duplicates")
    ok["config"] = [
        f"{int(n)} workers, {sm}, init={wi}, " + ("persistent" if is_true(p) else "restarted")
        if n
        else "0 workers (main process)"
        for n, sm, wi, p in zip(
            ok["num_workers"], col(ok, "start_method"), col(ok, "worker_init"), col(ok, "persistent_workers")
        )
    ]
    present = [c for c in COLUMNS if c in ok]
    med = ok.groupby("config")[present].median() * 100
    med = med.reindex(sorted(med.index, key=lambda s: (int(s.split()[0]), s)))
    # every cell of a row is the median of that configuration's repetitions with a value
    ns = ok.groupby("config")[present].count().max(axis=1).reindex(med.index)
    usual = usual_n(ns)
    med.index = [f"{c} (n={n})" if n != usual else c for c, n in zip(med.index, ns)]
    med.columns = [
        f"{c.split('_')[2]}\n{'same epoch' if c.endswith('within') else 'epoch before'}" for c in med.columns
    ]
    fig, ax = plt.subplots(figsize=(10.5, 0.42 * len(med) + 1.8))
    sns.heatmap(
        med,
        annot=med.map(lambda v: "n/a" if not np.isfinite(v) else f"{v:.0f}%"),
        fmt="",
        cmap="Reds",
        vmin=0,
        vmax=100,
        cbar_kws={"label": "draws that repeat (%, median of repetitions)"},
        ax=ax,
        linewidths=0.5,
        annot_kws={"fontsize": 8},
    )
    ax.set(xlabel="source of the draw / repeats another draw of the ...", ylabel="")
    ax.tick_params(axis="x", labelrotation=0)
    return Answer(
        "rng",
        f"Do workers draw the same random numbers? ({study}, torch {env_one(df, 'torch')})",
        "rng_duplicates",
        "same epoch: share of an epoch's draws equal to another draw of that epoch (the same "
        "augmentation in two workers); epoch before: share already drawn in the previous epoch. "
        "n/a: a single epoch.",
        per="row",
        width=120,
    ).save(fig, {}, [(None, 0, 0, n) for n in ns], df, study, out)

"""The persistence question's figure for the persistence-state study: what the workers hold with a second loader
beside the first, and the samples that saw a dataset attribute from before the main process changed it
(claims: loaderbench.analysis.questions.persistence)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import pyplot as plt

from loaderbench.analysis.figures.questions.shared import bars, claims_header, drawable, legend_top, save_with_note
from loaderbench.analysis.questions.persistence import workers_held_mib
from loaderbench.analysis.table.records import col, is_true

HUE_ORDER = ["one loader", "with a second loader"]
X_ORDER = ["persistent", "restarted each epoch"]


def is_state_study(rows: pd.DataFrame) -> bool:
    return bool(
        col(rows, "second_loader", False).map(is_true).any() or col(rows, "epoch_attribute", False).map(is_true).any()
    )


def persistent_state(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    ok = drawable(df, with_workers=True)
    ok["workers"] = np.where(ok["persistent_workers"].map(is_true), X_ORDER[0], X_ORDER[1])
    ok["loaders"] = np.where(col(ok, "second_loader", False).map(is_true), HUE_ORDER[1], HUE_ORDER[0])
    ok["held_mib"] = [workers_held_mib(t) for t in col(ok, "memory_timeline")]
    samples = pd.to_numeric(col(ok, "epoch_attr_samples"), errors="coerce")
    ok["stale_pct"] = 100 * pd.to_numeric(col(ok, "epoch_attr_stale"), errors="coerce") / samples
    pal = sns.color_palette("colorblind", 2)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    points = bars(axes[0], ok, "workers", "held_mib", "loaders", X_ORDER, HUE_ORDER, pal)
    axes[0].set_ylabel("workers' USS held over the run (MiB)")
    axes[0].set_title("memory the workers hold")
    points += bars(axes[1], ok, "workers", "stale_pct", "loaders", X_ORDER, HUE_ORDER, pal)
    axes[1].set_ylabel("samples that saw the old value (%)")
    axes[1].set_title("an attribute changed between epochs")
    for ax in axes:
        ax.set_xlabel("workers")
    leg = legend_top(fig, axes[0], None, ncol=2)
    if axes[1].get_legend():
        axes[1].get_legend().remove()
    claims_header(fig, f"What persistent workers hold and see ({study})", df, study, "persistence", legend=leg)
    return save_with_note(
        fig,
        df,
        study,
        out,
        "persistent_state",
        "Bars: median over repetitions; dots: repetitions. Held: the median of the workers' USS over the probe's "
        "samples with a worker alive. Old value: samples after the first epoch whose worker's copy of the dataset "
        "carried an epoch count older than the main process's.",
        points,
    )

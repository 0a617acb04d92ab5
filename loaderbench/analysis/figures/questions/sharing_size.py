"""The sharing-size question's figures: the time per tensor of each strategy against the tensor's size, and the
strategy batches arrived by after set_sharing_strategy (claims: loaderbench.analysis.questions.sharing_size)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, Curves, legend_of
from loaderbench.analysis.figures.questions.shared import NothingToDraw
from loaderbench.analysis.questions.sharing_size import STRATEGIES, kib, size_rows, switch_rows
from loaderbench.analysis.table.records import is_true


def cost_per_tensor_by_size(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """The study's own figure: time per tensor against its size, or, for the switch study, what later epochs used."""
    if not switch_rows(df).empty:
        return strategy_after_switch(df, study, out)
    rows = size_rows(df)
    if rows.empty:
        raise NothingToDraw("no ok sleep cells with workers")
    return Curves(
        x="sample_kb",
        y=[("us_per_tensor", 1.0, "time per tensor (µs)")],
        hue="sharing_strategy",
        hues=STRATEGIES,
        palette=sns.color_palette("colorblind", 2),
        tick=kib,
        xlabel="tensor size (one tensor per batch)",
        log=True,
        size=(7, 4.2, 0),
        says=Answer(
            "sharing-size",
            f"Sharing strategies by tensor size ({study})",
            "cost_per_tensor_by_size",
            "Lines: median over repetitions of 1 / tensors handed over per second (2 workers); dots: repetitions.",
        ),
    ).answer(
        rows.assign(us_per_tensor=1e6 / rows["samples_per_s"]),
        df,
        study,
        out,
        xs=sorted(rows["sample_kb"].dropna().unique()),
    )


def strategy_after_switch(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Per epoch, how many repetitions' first batch arrived by each strategy, persistent workers against fresh."""
    rows = switch_rows(df)
    pal = sns.color_palette("colorblind", 3)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    points = []
    for ax, persistent in zip(axes, (True, False)):
        cells = rows[rows["persistent_workers"].map(is_true) == persistent]
        seen = [json.loads(s) if isinstance(s, str) else list(s) for s in cells["sharing_seen"]]
        epochs = max((len(s) for s in seen), default=0)
        for k, strategy in enumerate((*STRATEGIES, "not shared")):
            counts = [sum(1 for s in seen if len(s) > e and s[e] == strategy) for e in range(epochs)]
            xs = np.arange(epochs) + (k - 1) * 0.27
            ax.bar(xs, counts, width=0.25, color=pal[k], label=strategy)
        for e in range(epochs):
            points.append((None, e, 0, len(seen)))
        ax.set_xticks(range(epochs), [f"epoch {e + 1}" + (" (before)" if e == 0 else "") for e in range(epochs)])
        ax.set_title("persistent workers" if persistent else "fresh workers each epoch")
        ax.set_xlabel("set_sharing_strategy is called after epoch 1")
        sns.despine(ax=ax)
    axes[0].set_ylabel("repetitions")
    return Answer(
        "sharing-size",
        f"set_sharing_strategy after the workers started ({study})",
        "strategy_after_switch",
        "Bars: repetitions whose epoch's first batch arrived by each strategy, seen in the main process's memory "
        "map (an unlinked /dev/shm segment: file_descriptor; a named one: file_system).",
        ncol=3,
        per="epoch",
    ).save(fig, legend_of(axes[0]), points, df, study, out)

"""The shm-size question's figures: the /dev/shm peak against workers, prefetch_factor and batch size with the
sizes that failed, and the segments a killed worker left behind (claims: loaderbench.analysis.questions.shm_size)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, legend_of
from loaderbench.analysis.figures.questions.shared import NothingToDraw, median_bar
from loaderbench.analysis.questions.shm_size import SWEEPS, cell_states, leak_rows, sized_rows
from loaderbench.analysis.table.records import col

LABELS = {"num_workers": "workers", "prefetch_factor": "prefetch_factor", "batch_size": "batch size"}


def shm_peak_by_setting(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """The study's own figure: /dev/shm use and failures per setting, or, for the leak study, what was left."""
    if not leak_rows(df).empty:
        return segments_left(df, study, out)
    states = cell_states(df)
    if states.empty:
        raise NothingToDraw("no cells with their own /dev/shm")
    rows = sized_rows(df)
    top = int(states["shm_size_mb"].max())
    centre = {k: states[k].mode().iloc[0] for k in SWEEPS}
    pal = sns.color_palette("colorblind", 8)
    fig, axes = plt.subplots(1, len(SWEEPS), figsize=(13, 4.2), sharey=True)
    points = []
    for ax, axis in zip(axes, SWEEPS):
        line = states
        for other in SWEEPS:
            if other != axis:
                line = line[line[other] == centre[other]]
        values = sorted(line[axis].unique())
        xs = {v: i for i, v in enumerate(values)}
        big = line[line["shm_size_mb"] == top]
        for _, c in big.iterrows():
            reps = rows[(rows["cell_id"] == c["cell_id"]) & (rows["status"] == "ok")]["shm_peak_bytes"] / 2**20
            x = xs[c[axis]]
            if len(reps):
                points.append(
                    median_bar(ax, x, reps, color=pal[0], width=0.6, label=f"peak used (own {top} MiB /dev/shm)")
                )
            if pd.notna(c["needed_mb"]):
                ax.plot([x - 0.3, x + 0.3], [c["needed_mb"]] * 2, "-", color=pal[2], lw=2, label="computed need")
        for size, colour in zip(sorted(states["shm_size_mb"].unique())[:-1], (3, 1, 4, 5)):
            ax.axhline(size, color=pal[colour], ls="--", lw=1, label=f"/dev/shm of {size} MiB")
            at = line[line["shm_size_mb"] == size]
            for _, c in at.iterrows():
                marker = "x" if c["state"] == "short" else "o" if c["state"] == "ok" else "d"
                ax.plot(xs[c[axis]] + 0.2, size, marker, color=pal[colour], ms=8, mew=2)
        ax.set_xticks(range(len(values)), [str(v) for v in values])
        ax.set_xlabel(LABELS[axis])
        ax.set_title(f"{LABELS[axis]} ({', '.join(f'{LABELS[o]} {centre[o]}' for o in SWEEPS if o != axis)})")
        sns.despine(ax=ax)
    axes[0].set_ylabel("/dev/shm (MiB)")
    return Answer(
        "shm-size",
        f"/dev/shm: what a setting uses and which sizes fail ({study})",
        "shm_peak_by_setting",
        "Bars: median peak /dev/shm use of the cell alone (its own tmpfs); dots: repetitions; green: the size "
        "computed from one measured batch. Dashed lines: smaller sizes; x: every repetition failed for want of "
        "/dev/shm there, o: every one ran, diamond: mixed.",
        ncol=4,
        per="bar",
    ).save(fig, legend_of(axes[0]), points, df, study, out)


def segments_left(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Segments left in the cell's own /dev/shm after all its processes ended, killed worker against control."""
    rows = leak_rows(df).copy()
    rows["case"] = np.where(col(rows, "fault").fillna("none") == "none", "healthy", "worker killed")
    pal = sns.color_palette("colorblind", 2)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    points = []
    strategies = sorted(rows["sharing_strategy"].dropna().unique())
    for j, case in enumerate(("healthy", "worker killed")):
        for i, s in enumerate(strategies):
            v = rows[(rows["case"] == case) & (rows["sharing_strategy"] == s)]["shm_left_segments"].astype(float)
            if v.empty:
                continue
            points.append(
                median_bar(ax, i + (j - 0.5) * 0.35, v, width=0.33, color=pal[j], label=case if i == 0 else None)
            )
    ax.set_xticks(range(len(strategies)), strategies)
    ax.set(xlabel="sharing strategy", ylabel="segments left in /dev/shm")
    sns.despine(ax=ax)
    return Answer(
        "shm-size",
        f"/dev/shm segments left after a worker was killed ({study})",
        "segments_left",
        "Bars: median over repetitions; dots: repetitions. Counted in the cell's own /dev/shm once every process "
        "of the cell had ended (torch_shm_manager on its own), before the runner removed them.",
        per="bar",
    ).save(fig, legend_of(ax), points, df, study, out)

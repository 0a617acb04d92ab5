"""The checkpointing question's figure: what snapshots every n steps cost in throughput against what a resume
replays, one point per n, so a user picks n from it (claims: loaderbench.analysis.questions.checkpointing)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, legend_of
from loaderbench.analysis.figures.questions.shared import NothingToDraw, drawable
from loaderbench.analysis.questions.checkpointing import resume_rows, throughput_rows
from loaderbench.analysis.table.records import ok_rows


def trade_off(rows: pd.DataFrame) -> pd.DataFrame:
    """Per workload, cores, num_workers > 0 and n >= 1: the throughput cost against the plain DataLoader (%,
    from medians) and the most samples a resume replayed at that num_workers and n (the median at the resume
    step that replays most), with the repetitions behind each."""
    ok = throughput_rows(rows)
    ok = ok[ok["num_workers"] > 0]
    res = ok_rows(resume_rows(rows))
    replay = (
        res.groupby(["num_workers", "snapshot_every_n_steps", "resume_at"])["resume_replayed_samples"]
        .median()
        .groupby(level=[0, 1])
        .max()
        if not res.empty
        else pd.Series(dtype=float)
    )
    out = []
    for (workload, cores, nw), grp in ok.groupby(["workload", "cores", "num_workers"], sort=True):
        rates = grp.groupby("snapshot_every_n_steps")["samples_per_s"]
        med, reps = rates.median(), rates.size()
        if 0 not in med.index:
            continue
        for n in med.index[med.index > 0]:
            out.append(
                {
                    "panel": f"{workload}, {int(cores)} core{'s' if cores != 1 else ''}",
                    "num_workers": int(nw),
                    "n": int(n),
                    "cost_pct": 100.0 * (med[0] / med[n] - 1.0),
                    "replayed": float(replay.get((nw, n), np.nan)),
                    "reps": int(min(reps[0], reps[n])),
                }
            )
    return pd.DataFrame(out)


def snapshot_cost_against_replay(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Per workload and core count: throughput cost of snapshots every n steps against the samples a resume
    replays, a line per num_workers through its n."""
    drawable(df, with_workers=True)
    t = trade_off(df)
    t = t[np.isfinite(t["replayed"])] if not t.empty else t
    if t.empty:
        raise NothingToDraw("no num_workers with plain, snapshot and resume cells together")
    panels = sorted(t["panel"].unique())
    workers = sorted(t["num_workers"].unique())
    pal = dict(zip(workers, sns.color_palette("colorblind", len(workers))))
    fig, axes = plt.subplots(1, len(panels), figsize=(max(6.5, 4.4 * len(panels)), 4.2), squeeze=False)
    points = []
    for ax, panel in zip(axes[0], panels):
        for nw in workers:
            line = t[(t["panel"] == panel) & (t["num_workers"] == nw)].sort_values("n")
            if line.empty:
                continue
            ax.plot(line["replayed"], line["cost_pct"], "o-", color=pal[nw], label=f"num_workers={nw}")
            for _, p in line.iterrows():
                ax.annotate(
                    f"n={p['n']}", (p["replayed"], p["cost_pct"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
                )
                points.append((ax, p["replayed"], p["cost_pct"], p["reps"]))
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlabel("samples a resume replays (most at any resume step)")
        ax.set_ylabel("throughput cost against the plain DataLoader (%)")
        ax.set_title(panel)
        sns.despine(ax=ax)
    return Answer(
        "checkpointing",
        f"Which snapshot_every_n_steps? Cost against replay ({study})",
        "snapshot_cost_against_replay",
        "Points: one per snapshot_every_n_steps n. Cost: the plain DataLoader's median samples/s over the "
        "StatefulDataLoader's, minus 1, uninterrupted. Replay: median samples the resumed process loaded only to "
        "fast-forward, in the study's resume cells at the same num_workers and n (the resume step that replays most).",
        ncol=4,
    ).save(fig, legend_of(axes[0][0]), points, df, study, out)

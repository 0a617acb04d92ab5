"""The oversubscription question's figure: CPU-bound loading against the core count, and ranks x workers
(DDP-like) (claims: loaderbench.analysis.questions.oversubscription)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer
from loaderbench.analysis.figures.questions.shared import drawable, median_line
from loaderbench.analysis.table.derive import ranks
from loaderbench.analysis.table.environment import env_one
from loaderbench.analysis.table.records import col

#: how the repetitions are drawn beside each line
DOTS = {"s": 9, "color": "0.1"}


def _past_the_cores(cores: float, ns) -> float | None:
    """Where more workers than cores starts on a linear num_workers axis: halfway between the cores and the
    smallest measured num_workers above them (a point at workers = cores is not oversubscribed); None when no
    num_workers is above the cores."""
    above = [float(n) for n in ns if n > cores]
    return (cores + min(above)) / 2 if above else None


def _workers_panel(ax, sub: pd.DataFrame, workload: str, ns: list) -> list[tuple]:
    """One loader's throughput against num_workers (`ns`: every panel's, so they share the axis), one line per
    core count, more workers than cores shaded; returns the medians drawn."""
    lo, hi = min(ns), max(ns)
    ax.set_xlim(lo - 0.4, hi + 0.4)
    points = []
    for c, g in sub.groupby("cores"):
        points += median_line(ax, g, "num_workers", "samples_per_s", DOTS, marker="o", lw=1.5, label=f"{c} cores")
        ax.axvline(c, color="0.3", ls=":", lw=1)
        start = _past_the_cores(c, g["num_workers"])
        if start is not None:
            ax.axvspan(start, hi + 0.4, color="0.93", zorder=-1)
        ax.text(c, 0.02, " workers = cores", transform=ax.get_xaxis_transform(), fontsize=7, color="0.3")
    ax.set_ylim(bottom=0)
    ax.set_xticks(ns)
    ax.set_xlabel("num_workers (one loader)")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_title(f"{workload}: more workers than cores (shaded)")
    sns.despine(ax=ax)
    return points


def _ranks_panel(ax, single: pd.DataFrame, multi: pd.DataFrame, cores: int) -> list[tuple]:
    """Throughput of all ranks against the workers in all, one line per workload, rank count and rank mode
    (side by side or DDP); returns the medians drawn."""
    points = []
    for w in sorted(set(multi["workload"])):
        both = pd.concat([single[single["workload"] == w], multi[multi["workload"] == w]])
        for (r, mode), g in both.groupby(["ranks", "rank_mode"]):
            label = f"{w}, {r} rank{'s' if r > 1 else ''}" + (" (DDP)" if mode == "ddp" else "")
            line = median_line(
                ax, g, "total_workers", "samples_per_s", DOTS, marker="o" if r == 1 else "s", lw=1.5, label=label
            )
            points += line
            medians = {x: median for _, x, median, _ in line}
            for n in sorted(set(g["num_workers"])) if r > 1 else []:
                ax.annotate(
                    f"W={n}", (n * r, medians.get(n * r, np.nan)), textcoords="offset points", xytext=(3, 4), fontsize=7
                )
    ax.axvline(cores, color="0.3", ls=":", lw=1)
    ax.text(cores, 0.02, " R x W = cores", transform=ax.get_xaxis_transform(), fontsize=7, color="0.3")
    ax.set_ylim(bottom=0)
    ax.set(xlabel="workers in all (ranks x num_workers)", ylabel="throughput of all ranks (samples/s)")
    modes = set(multi["rank_mode"])
    title = "ranks side by side and DDP" if "ddp" in modes else "DDP-like: ranks side by side"
    ax.set_title("real DDP ranks" if modes == {"ddp"} else title)
    ax.legend(fontsize=7, loc="lower right")
    sns.despine(ax=ax)
    return points


def oversubscription_ranks_x_workers(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """CPU-bound throughput from 1 to 4x the cores as workers, and ranks x workers (DDP-like)."""
    ok = drawable(df, with_workers=True)
    ok["ranks"] = ranks(ok).astype(int)
    ok["total_workers"] = ok["ranks"] * ok["num_workers"]
    ok["rank_mode"] = col(ok, "rank_mode", "side_by_side").fillna("side_by_side").astype(str)
    single = ok[ok["ranks"] == 1]
    workloads = [w for w in ("cpu", "jpeg", "sleep") if w in set(single["workload"])]
    multi = ok[ok["ranks"] > 1]
    n_panels = len(workloads) + (1 if not multi.empty else 0)
    fig, axes = plt.subplots(1, max(n_panels, 1), figsize=(4.6 * max(n_panels, 1), 3.9), squeeze=False)
    axes = axes[0]
    ns = sorted(single["num_workers"].unique())
    points = []
    for ax, w in zip(axes, workloads):
        points += _workers_panel(ax, single[single["workload"] == w], w, ns)
    if not multi.empty:
        points += _ranks_panel(axes[len(workloads)], single, multi, int(ok["cores"].max()))
    if workloads and axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7, loc="lower right")
    return Answer(
        "oversubscription",
        f"Oversubscription: CPU-bound loading past the cores ({study})",
        "oversubscription_ranks_x_workers",
        "Lines: median over repetitions; dots: repetitions. Cores = CPUs the cell may use "
        f"(affinity); physical cores reported by the machine: {env_one(df, 'physical_cores')}.",
    ).save(fig, {}, points, df, study, out)

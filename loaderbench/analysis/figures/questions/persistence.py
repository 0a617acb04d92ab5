"""The persistence question's figure: the cost paid at every epoch boundary when workers restart
(claims: loaderbench.analysis.questions.persistence)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer
from loaderbench.analysis.figures.questions.persistence_state import is_state_study, persistent_state
from loaderbench.analysis.figures.questions.shared import bars, drawable, line_points, plain_log, ratio_note, ratios
from loaderbench.analysis.table.records import is_true

HUE_ORDER = ["restarted each epoch", "persistent"]
#: The tutorial's whole-run speed-up with persistent workers (10 epochs, GPU), drawn for reference.
TUTORIAL_SPEEDUP = 1.13


def _per_epoch(many: pd.DataFrame) -> pd.DataFrame:
    """One row per epoch of every repetition: its time (epoch_s), start method and workers."""
    ep = []
    for _, r in many.iterrows():
        try:
            times = json.loads(r["epoch_s"]) if isinstance(r["epoch_s"], str) else r["epoch_s"]
        except (TypeError, ValueError):
            continue
        for i, t in enumerate(times or []):
            ep.append({"epoch": i + 1, "epoch_s": t, "start_method": r["start_method"], "workers": r["workers"]})
    return pd.DataFrame(ep)


def _epoch_panel(ax, ep: pd.DataFrame, order: list[str], pal: dict, top: int) -> list[tuple]:
    """Median time of each epoch, per workers and start method; returns its points (parts.line_points)."""
    points = []
    if not ep.empty:
        points = line_points(ax, ep, "epoch", "epoch_s", ["workers", "start_method"])
        sns.lineplot(
            data=ep,
            x="epoch",
            y="epoch_s",
            hue="workers",
            hue_order=HUE_ORDER,
            style="start_method",
            style_order=order,
            estimator=np.median,
            errorbar=None,
            markers=True,
            palette=pal,
            ax=ax,
        )
        plain_log(ax)
        ax.set_xticks(range(1, top + 1))
        sns.move_legend(ax, "center", fontsize=7, title=None, ncol=2)
    ax.set_xlabel("epoch")
    ax.set_ylabel("epoch time incl. worker start (s, log)")
    ax.set_title("per-epoch time (median of repetitions)")
    sns.despine(ax=ax)
    return points


def _speedups(ok: pd.DataFrame) -> tuple[pd.DataFrame, list]:
    """Per start method and epoch count: total run time without / with persistent workers, and the comparisons."""
    pairs = []
    for (sm, e), g in ok.groupby(["start_method", "epochs"]):
        on, epochs = g["workers"] == "persistent", f"{int(e)} epoch{'s' if e > 1 else ''}"
        pairs.append(({"start_method": sm, "epochs": epochs}, g[on]["total_s"], g[~on]["total_s"]))
    sp, comps = ratios(pairs)
    return sp[np.isfinite(sp["ratio"])], comps


def _speedup_panel(ax, sp: pd.DataFrame, order: list[str]) -> None:
    if not sp.empty:
        eorder = sorted(sp["epochs"].unique(), key=lambda s: int(s.split()[0]))
        sns.barplot(
            data=sp,
            x="start_method",
            y="ratio",
            hue="epochs",
            order=order,
            hue_order=eorder,
            ax=ax,
            palette="Greys",
            alpha=0.9,
        )
        for i, m in enumerate(order):
            for j, e in enumerate(eorder):
                row = sp[(sp["start_method"] == m) & (sp["epochs"] == e)]
                if row.empty or not np.isfinite(row["lo"].iloc[0]):
                    continue
                xpos = i + (j - (len(eorder) - 1) / 2) * 0.8 / len(eorder)
                ax.plot([xpos, xpos], [row["lo"].iloc[0], row["hi"].iloc[0]], color="0.1", lw=1.2)
        ax.axhline(1.0, color="0.4", lw=0.8)
        ax.axhline(TUTORIAL_SPEEDUP, color="C3", ls="--", lw=1)
        ax.text(
            -0.45,
            TUTORIAL_SPEEDUP,
            f"tutorial: {TUTORIAL_SPEEDUP:g}x (10 epochs)",
            color="C3",
            fontsize=7,
            ha="left",
            va="bottom",
        )
        plain_log(ax)
        sns.move_legend(ax, "upper left", fontsize=7, title=None)
    ax.set_xlabel("start method")
    ax.set_ylabel("run time without / with persistent (x, log)")
    ax.set_title("speed-up of the whole run")
    sns.despine(ax=ax)


def epoch_gap_by_persistence(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """The epoch-boundary gap and per-epoch time with and without persistent workers, per start method (the
    persistence-state study: what the workers hold and see)."""
    if is_state_study(df):
        return persistent_state(df, study, out)
    ok = drawable(df, with_workers=True)
    ok["workers"] = np.where(ok["persistent_workers"].map(is_true), "persistent", "restarted each epoch")
    pal = dict(zip(HUE_ORDER, sns.color_palette("colorblind", 2)))
    order = [m for m in ("fork", "forkserver", "spawn") if m in set(ok["start_method"])]
    top = int(ok["epochs"].max())
    many = ok[ok["epochs"] == top]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    points = bars(
        axes[0], many, "start_method", "epoch_gap_s", "workers", order, HUE_ORDER, [pal[h] for h in HUE_ORDER], log=True
    )
    axes[0].set_xlabel("start method")
    axes[0].set_ylabel("gap at an epoch boundary (s, log)")
    axes[0].set_title(f"last batch of epoch e to first of e+1 ({top} epochs)")
    points += _epoch_panel(axes[1], _per_epoch(many), order, pal, top)
    sp, comps = _speedups(ok)
    _speedup_panel(axes[2], sp, order)
    axes[2].set_xlim(axes[0].get_xlim())  # the same start methods at the same x as the left panel
    if axes[0].get_legend():
        sns.move_legend(axes[0], "upper left", fontsize=7, title=None)
    return Answer(
        "persistence",
        f"Persistent workers: the cost at every epoch boundary ({study})",
        "epoch_gap_by_persistence",
        "Left: bars median, dots repetitions. Right: ratio of median total run time, whisker = "
        f"{ratio_note(comps)}; with 1 epoch there is no boundary (control).",
        per="bar or point",
    ).save(fig, {}, points, df, study, out)

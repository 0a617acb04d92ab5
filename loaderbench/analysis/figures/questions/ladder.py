"""The ladder question's figure: the PyTorch tutorial's optimization ladder, each rung adding one change to the
one above, next to the published speed-ups (claims: loaderbench.analysis.questions.ladder)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.claims import GPU_ONLY, PUBLISHED
from loaderbench.analysis.figures.kinds import Answer
from loaderbench.analysis.figures.questions.shared import bars, drawable, ratio_note, ratios
from loaderbench.analysis.table.derive import RUNGS, ladder_rung, on_gpu
from loaderbench.analysis.table.records import col

METRIC = "end_to_end_samples_per_s"


def _speedups(ok: pd.DataFrame, rungs: list[str]) -> tuple[pd.DataFrame, list]:
    """Per rung: our ratio over the baseline with its interval, whether it ran on a GPU, the published ratio; and
    the comparisons behind the ratios."""
    base = ok[ok["rung"] == "baseline"][METRIC]
    mine = {r: ok[ok["rung"] == r] for r in rungs}
    published = {r: 1.0 if r == "baseline" else PUBLISHED.get(r, np.nan) for r in rungs}
    fields = {r: {"rung": r, "gpu": on_gpu(mine[r]), "published": published[r]} for r in rungs}
    sp, comps = ratios((fields[r], base, mine[r][METRIC]) for r in rungs)
    return sp, [c for r, c in zip(rungs, comps) if r != "baseline"]


def _speedup_panel(ax, sp: pd.DataFrame, device: str) -> None:
    """Ours and the tutorial's cumulative speed-up per rung, side by side."""
    y = np.arange(len(sp))
    ax.barh(
        y - 0.2,
        sp["ratio"],
        height=0.38,
        color=sns.color_palette("colorblind")[0],
        label=f"ours (model step on {device})",
    )
    sp.loc[sp["rung"] == "baseline", ["lo", "hi"]] = np.nan  # 1 by definition: no interval
    err = np.vstack([sp["ratio"] - sp["lo"], sp["hi"] - sp["ratio"]])
    err = np.where(np.isfinite(err), np.clip(err, 0, None), 0)
    ax.errorbar(sp["ratio"], y - 0.2, xerr=err, fmt="none", color="0.1", lw=1, capsize=2)
    ax.barh(y + 0.2, sp["published"], height=0.38, color="0.75", label="tutorial (published, GPU)")
    for i, r in sp.iterrows():
        right = np.nanmax([r["ratio"], r["hi"]]) if np.isfinite(r["ratio"]) else 0
        ax.text(right * 1.02 + 0.05, i - 0.2, f"{r['ratio']:.2f}x", va="center", fontsize=7)
        ax.text(r["published"] * 1.02 + 0.05, i + 0.2, f"{r['published']:.2f}x", va="center", fontsize=7, color="0.35")
    labels = [f"{r}\n(no GPU: no effect)" if r in GPU_ONLY and not g else r for r, g in zip(sp["rung"], sp["gpu"])]
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1, color="0.4", lw=0.8)
    ax.set_xlabel("cumulative speed-up over the baseline (x, end-to-end samples/s)")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("each rung adds one change to the one above")
    sns.despine(ax=ax)


def _throughput_panel(ax, ok: pd.DataFrame, rungs: list[str]) -> list[tuple]:
    """End-to-end throughput per rung; returns the bars (parts.bars)."""
    points = bars(ax, ok, "rung", METRIC, None, rungs)
    ax.set(xlabel="", ylabel="end-to-end throughput (samples/s)")
    shape = {c: pd.to_numeric(col(ok, c), errors="coerce").max() for c in ("epochs", "measure_batches", "batch_size")}
    ax.set_title(
        f"{shape['epochs']:g} epochs x {shape['measure_batches']:g} batches of {shape['batch_size']:g}, wall time"
        if all(np.isfinite(v) for v in shape.values())
        else "whole run, wall time"
    )
    ax.tick_params(axis="x", labelrotation=25)
    return points


def ladder_speedups(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Our cumulative speed-up per rung of the tutorial's ladder next to the published one."""
    ok = drawable(df)
    ok["rung"] = ladder_rung(ok)
    rungs = [r for r in RUNGS if r in set(ok["rung"])]
    sp, comps = _speedups(ok, rungs)
    device = ", ".join(sorted(set(col(ok, "consumer").dropna().astype(str)))) or "?"
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [1.3, 1]})
    _speedup_panel(axes[0], sp, device)
    points = _throughput_panel(axes[1], ok, rungs)
    return Answer(
        "ladder",
        f"The tutorial's optimization ladder, reproduced ({study})",
        "ladder_speedups",
        f"Left: ratio of medians over the baseline, whisker = {ratio_note(comps)}. Right: bars "
        "median, dots repetitions. The tutorial's numbers are from a GPU; on a CPU the model step "
        "dominates.",
        per="bar",
        width=170,
    ).save(fig, {}, points, df, study, out)

"""What would the rules of thumb have cost on this machine? Throughput given up per rule and curve."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.patches import Rectangle

from loaderbench.analysis.figures.style import (
    NOTE_PT,
    TITLE_PT,
    fit_text,
    heatmap_labels_set_after,
    repetitions_text,
    save,
    usual_n,
)
from loaderbench.analysis.table.scaling import StudyAnalysis
from loaderbench.analysis.text import fmt_pct
from loaderbench.stats.rules_of_thumb import NEEDS_GPU, NO_GPU, RULE_LABELS

_SHORT = {
    "cores": "cores",
    "cores_minus_1": "cores − 1",
    "2x_cores": "2 × cores",
    "4_per_gpu": "4 per GPU",
    "lightning": "Lightning\ncpus//lws − 1",
}


def loss_text(loss) -> str:
    """The throughput a rule gives up, as the report's rules table writes it
    (loaderbench.analysis.report.tables.fmt_pct)."""
    return fmt_pct(loss)


def _n_used(n_at: dict, panel, cores, row) -> list:
    """The repetition counts of the cells a rule's value was read from (both neighbours when interpolated)."""
    ns = (
        [row["n_lo"], row["n_hi"]]
        if row["match"] == "interpolated"
        else [row["rule_n"] if row["match"] == "exact" else row["n_lo"]]
    )
    return [n_at.get((panel, cores, float(n)), 0) for n in ns if np.isfinite(n)]


def _table(a: StudyAnalysis, r: pd.DataFrame, curves: list, rules: list, skip: frozenset):
    """Per curve (rows) the measured knee and each rule (columns): the share of the best throughput lost (NaN
    where not scored), the cell's text, and the repetition counts behind every value drawn."""
    n_at = {
        (p, c, float(n)): int(k)
        for p, c, n, k in zip(a.cells["panel"], a.cells["cores"], a.cells["num_workers"], a.cells["n"])
    }
    loss = np.full((len(curves), len(rules) + 1), np.nan)
    text = np.full(loss.shape, "", dtype=object)
    used = np.empty(loss.shape, dtype=object)
    for i, cv in enumerate(curves):
        g = r[r["curve"] == cv].set_index("rule")
        first = g.iloc[0]
        loss[i, 0] = 1 - first["knee_x"] / first["best_x"] if first["best_x"] else np.nan
        text[i, 0] = f"N={int(first['knee_n'])}: {loss_text(loss[i, 0])}"
        used[i, 0] = [n_at.get((first["panel"], first["cores"], float(first["knee_n"])), 0)]
        for j, rule in enumerate(rules, start=1):
            if rule not in g.index:
                continue
            row = g.loc[rule]
            if rule in skip:
                text[i, j] = NO_GPU
                continue
            loss[i, j] = row["loss_vs_best"]
            approx = "" if row["match"] == "exact" else "≈"
            text[i, j] = f"N={int(row['rule_n'])}: {approx}{loss_text(row['loss_vs_best'])}"
            used[i, j] = _n_used(n_at, row["panel"], row["cores"], row)
    all_n = [n for cell in used.ravel() if cell for n in cell]
    usual = usual_n(all_n)
    for idx, cell in np.ndenumerate(used):
        odd = sorted({n for n in (cell or []) if n != usual})
        if odd:
            text[idx] += f" (n={'/'.join(map(str, odd))})"
    return loss, text, all_n


def rules_of_thumb(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Heat map, one row per curve (workload variant on a core count), one column per rule: the colour is
    the share of the best measured throughput the rule gives up; each cell reads "N = <rule's
    num_workers>" and the loss, rounded as the report rounds it. The first column is the measured knee, for
    reference. A rule that counts GPUs is not scored where the records say there was no GPU (hatched)."""
    r = a.rules
    if r is None or r.empty:
        return []
    r = r.copy()
    r["curve"] = [f"{p} · {int(c)} core{'s' if int(c) != 1 else ''}" for p, c in zip(r["panel"], r["cores"])]
    curves = list(dict.fromkeys(r["curve"]))
    rules = [k for k in RULE_LABELS if k in set(r["rule"])]
    skip = NEEDS_GPU if a.no_gpu else frozenset()
    loss, text, all_n = _table(a, r, curves, rules, skip)
    notes = [
        "cell: the num_workers the rule picks and the share of the best measured throughput it loses "
        "(≈: interpolated between measured values)",
        f"each value from medians of {repetitions_text(all_n, per='num_workers')}",
    ]
    if skip:
        notes.append(
            f"{', '.join(_SHORT[k] for k in sorted(skip))}: not applicable, not scored (hatched): "
            "the records say CUDA was not available"
        )
    fig, ax, cax = _layout(
        f"Rules of thumb vs the measured curve · study {a.study}", "\n".join(notes), curves, len(rules) + 1
    )
    shown = np.where(np.isfinite(loss), np.clip(loss * 100, 0, None), np.nan)
    with heatmap_labels_set_after():  # below
        sns.heatmap(
            pd.DataFrame(shown),
            ax=ax,
            cbar_ax=cax,
            cmap="rocket_r",
            vmin=0,
            vmax=max(50, np.nanmax(shown) if np.isfinite(shown).any() else 0),
            annot=np.where(np.isfinite(loss), text, ""),
            fmt="",
            annot_kws={"fontsize": 7},
            xticklabels=False,  # set below: seaborn's own would be measured for overlap, then replaced
            yticklabels=False,
            linewidths=0.5,
            linecolor="white",
            cbar_kws={"label": "throughput lost vs best (%)", "orientation": "horizontal"},
        )
    for (i, j), t in np.ndenumerate(text):
        if t == NO_GPU:
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor="0.93", edgecolor="0.6", hatch="///", lw=0))
            ax.text(
                j + 0.5,
                i + 0.5,
                t,
                ha="center",
                va="center",
                fontsize=7,
                color="0.3",
                bbox={"facecolor": "0.93", "edgecolor": "none", "pad": 1},
            )
    ax.set_xticks(np.arange(len(rules) + 1) + 0.5)
    ax.set_xticklabels(["measured knee"] + [_SHORT.get(k, k) for k in rules], rotation=0, fontsize=8)
    ax.set_yticks(np.arange(len(curves)) + 0.5)
    ax.set_yticklabels(curves, rotation=0, fontsize=8, va="center")
    ax.set_xlabel("")
    ax.set_ylabel("")
    ax.xaxis.tick_top()
    return save(fig, folder, "rules_of_thumb", a.provenance)


def _layout(title: str, note: str, curves: list, columns: int):
    """The figure in inches: the title and note on top (broken to its width), the column labels, the table
    (one row per curve) and a horizontal colour bar under it; returns (figure, table axes, colour bar axes)."""
    label_w = min(4.0, 0.2 + 0.062 * max(len(c) for c in curves))  # the row labels
    cell_w, cell_h = 1.15, 0.24
    table_w, table_h = cell_w * columns, cell_h * len(curves)
    fw = label_w + table_w + 0.3
    fig = plt.figure(figsize=(fw, 4))
    renderer = fig.canvas.get_renderer()
    texts = [
        fig.text(0.5, 1, title, ha="center", va="top", fontsize=TITLE_PT),
        fig.text(0.5, 1, note, ha="center", va="top", fontsize=NOTE_PT, color="0.3"),
    ]
    for t in texts:
        fit_text(t, (fw - 0.2) * fig.dpi, renderer)
    heights = [t.get_window_extent(renderer).height / fig.dpi for t in texts]
    top = 0.08 + heights[0] + 0.08 + heights[1] + 0.15 + 0.45  # + the column labels (up to two lines)
    bar = 0.65  # under the table: the colour bar (0.12 in), its ticks and its label
    fh = top + table_h + 0.25 + bar
    fig.set_size_inches(fw, fh)
    texts[0].set_position((0.5, 1 - 0.08 / fh))
    texts[1].set_position((0.5, 1 - (0.16 + heights[0]) / fh))
    bottom = fh - top - table_h
    ax = fig.add_axes((label_w / fw, bottom / fh, table_w / fw, table_h / fh))
    bar_w = min(table_w, 3.0)
    cax = fig.add_axes(((label_w + (table_w - bar_w) / 2) / fw, (bottom - 0.25 - 0.12) / fh, bar_w / fw, 0.12 / fh))
    return fig, ax, cax

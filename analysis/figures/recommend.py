"""What would the rules of thumb have cost on this machine? Throughput given up per rule and curve."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from analysis.aggregate import StudyAnalysis
from analysis.figures.style import save
from analysis.recommend import RULE_LABELS

_SHORT = {"cores": "cores", "cores_minus_1": "cores − 1", "2x_cores": "2 × cores", "4_per_gpu": "4 per GPU",
          "lightning": "Lightning\ncpus//lws − 1"}


def rules_of_thumb(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Heat map, one row per curve (workload variant on a core count), one column per rule: the colour is
    the share of the best measured throughput the rule gives up; each cell reads "N = <rule's
    num_workers>" and the loss. The first column is the measured knee, for reference."""
    r = a.rules
    if r is None or r.empty:
        return []
    r = r.copy()
    r["curve"] = [f"{p} · {int(c)} core{'s' if int(c) != 1 else ''}" for p, c in zip(r["panel"], r["cores"])]
    curves = list(dict.fromkeys(r["curve"]))
    rules = [k for k in RULE_LABELS if k in set(r["rule"])]
    loss = np.full((len(curves), len(rules) + 1), np.nan)
    text = np.full(loss.shape, "", dtype=object)
    for i, cv in enumerate(curves):
        g = r[r["curve"] == cv].set_index("rule")
        first = g.iloc[0]
        loss[i, 0] = 1 - first["knee_x"] / first["best_x"] if first["best_x"] else np.nan
        pct = f"−{loss[i, 0]:.0%}" if loss[i, 0] >= 0.005 else "0%"
        text[i, 0] = f"N={int(first['knee_n'])}: {pct}"
        for j, rule in enumerate(rules, start=1):
            if rule not in g.index:
                continue
            row = g.loc[rule]
            loss[i, j] = row["loss_vs_best"]
            approx = "" if row["match"] == "exact" else "≈"
            pct = "0%" if abs(row["loss_vs_best"]) < 0.005 else f"−{row['loss_vs_best']:.0%}"
            text[i, j] = f"N={int(row['rule_n'])}: {approx}{pct}"
    label_w = min(4.0, 0.2 + 0.062 * max(len(c) for c in curves))  # inches for the row labels
    cell_w, cell_h = 1.05, 0.24
    fig = plt.figure(figsize=(label_w + cell_w * (len(rules) + 1) + 1.3, 1.35 + cell_h * len(curves) + 0.35))
    fw, fh = fig.get_size_inches()
    ax = fig.add_axes((label_w / fw, 0.45 / fh, cell_w * (len(rules) + 1) / fw, cell_h * len(curves) / fh))
    bar_h = min(cell_h * len(curves), 2.5)  # aligned with the top of the table
    cax = fig.add_axes(((label_w + cell_w * (len(rules) + 1) + 0.25) / fw,
                        (0.45 + cell_h * len(curves) - bar_h) / fh, 0.12 / fw, bar_h / fh))
    fig._loaderbench_layout = True
    sns.heatmap(np.clip(loss * 100, 0, None), ax=ax, cbar_ax=cax, cmap="rocket_r", vmin=0,
                vmax=max(50, np.nanmax(loss) * 100), annot=text, fmt="", annot_kws={"fontsize": 7}, linewidths=0.5,
                linecolor="white", cbar_kws={"label": "throughput lost vs best (%)"})
    ax.set_xticklabels(["measured knee"] + [_SHORT.get(k, k) for k in rules], rotation=0, fontsize=8)
    ax.set_yticklabels(curves, rotation=0, fontsize=8)
    ax.set_xlabel("")
    ax.set_ylabel("")
    ax.xaxis.tick_top()
    fig.text(0.5, 1 - 0.08 / fh, f"Rules of thumb vs the measured curve · study {a.study}", ha="center", va="top",
             fontsize=11)
    fig.text(0.5, 1 - 0.38 / fh, "cell: the num_workers the rule picks and the throughput it loses against the best "
             "measured (≈: interpolated between measured values)", ha="center", va="top", fontsize=8, color="0.3")
    return save(fig, folder, "rules_of_thumb", a.provenance)

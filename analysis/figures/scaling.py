"""How throughput scales with num_workers: diminishing returns, physical ceilings, oversubscription."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.transforms import offset_copy

from analysis.aggregate import StudyAnalysis
from analysis.figures.style import (
    FAILED_MARKER,
    MAIN_PROCESS_MARKER,
    UNSTABLE_FACE,
    cores_palette,
    grid,
    save,
    workers_axis,
)


def _cores_label(c) -> str:
    c = int(c)
    return f"{c} core{'s' if c != 1 else ''}"


def throughput_vs_workers(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Median samples/s vs num_workers: one panel per workload variant, one colour per core count.

    Error bars: 95% bootstrap interval of the median; hollow markers: unstable cells (IQR > 10% of
    the median); square at 0: main-process loading; X on the axis: cells where every repetition
    failed. Dashed: ideal linear scaling from the one-worker rate; dotted vertical: num_workers =
    cores; dash-dot horizontal: decode-only ceiling (jpeg, when the study measured it); triangle:
    the knee (smallest num_workers within 5% of the best).
    """
    cells, curves = a.cells, a.curves
    palette = cores_palette(cells["cores"])
    fig, axes = grid(len(a.panels))
    for ax, panel in zip(axes, a.panels):
        sub = cells[cells["panel"] == panel]
        top = 0.0
        notes = []
        for cores, cur in sub.groupby("cores", sort=True):
            color = palette[cores]
            cur = cur.sort_values("num_workers")
            meas = cur[cur["n"] > 0]
            line = meas[meas["num_workers"] >= 1]
            if not line.empty:
                yerr = np.vstack([line["median"] - line["ci_low"], line["ci_high"] - line["median"]])
                yerr = np.where(np.isfinite(yerr), np.clip(yerr, 0, None), 0)
                ax.errorbar(line["num_workers"], line["median"], yerr=yerr, color=color, marker="o", ms=4.5,
                            capsize=2, lw=1.5, elinewidth=1, zorder=3)
                unstable = line[line["unstable"]]
                ax.plot(unstable["num_workers"], unstable["median"], ls="", marker="o", ms=6, mfc=UNSTABLE_FACE,
                        mec=color, mew=1.5, zorder=4)
                top = max(top, float(np.nanmax(np.fmax(line["ci_high"].to_numpy(float),
                                                        line["median"].to_numpy(float)))))
            zero = meas[meas["num_workers"] == 0]
            if not zero.empty:
                z = zero.iloc[0]
                ax.errorbar([0], [z["median"]],
                            yerr=[[max(z["median"] - z["ci_low"], 0) if np.isfinite(z["ci_low"]) else 0],
                                  [max(z["ci_high"] - z["median"], 0) if np.isfinite(z["ci_high"]) else 0]],
                            color=color, marker=MAIN_PROCESS_MARKER, ms=5, capsize=2, ls="",
                            mfc=UNSTABLE_FACE if z["unstable"] else color, mec=color, zorder=4)
                top = max(top, float(np.nanmax([z["median"], z["ci_high"]])))
            failed = cur[cur["n"] == 0]
            if not failed.empty:
                ax.plot(failed["num_workers"], np.zeros(len(failed)), ls="", marker=FAILED_MARKER, ms=7,
                        color=color, mec="black", mew=0.5, clip_on=False, zorder=5)
            crv = curves[(curves["panel"] == panel) & (curves["cores"] == cores)]
            if crv.empty:
                continue
            crv = crv.iloc[0]
            x1 = crv.get("x_one_worker", np.nan)
            ns = np.array(sorted(n for n in cur["num_workers"].unique() if n >= 1), dtype=float)
            if np.isfinite(x1) and ns.size > 1:
                ax.plot(ns, x1 * ns, ls="--", lw=0.9, color=color, alpha=0.7, zorder=2)
            ax.axvline(cores, ls=":", lw=1.1, color=color, alpha=0.9, zorder=1)
            ceiling = crv.get("decode_ceiling", np.nan)
            if np.isfinite(ceiling):
                ax.axhline(ceiling, ls="-.", lw=1.1, color=color, alpha=0.9, zorder=1)
                top = max(top, float(ceiling))
            if np.isfinite(crv.get("knee_x", np.nan)):
                # just above the point, so the point itself (and its marker style) stays visible
                above = offset_copy(ax.transData, fig=fig, y=9, units="points")
                ax.plot([crv["knee_n"]], [crv["knee_x"]], ls="", marker="v", ms=7, color=color, mec="black",
                        mew=0.6, zorder=6, transform=above, clip_on=False)
        if panel.split(" · ")[0] == "jpeg" and not a.references.empty and \
                not curves[(curves["panel"] == panel)]["decode_ceiling"].notna().any():
            notes.append("decode ceiling not measured for this decoder")
        elif panel.split(" · ")[0] == "jpeg" and a.references.empty:
            notes.append("decode ceiling not measured")
        ax.set_ylim(0, top * 1.12 if top > 0 else 1)
        workers_axis(ax, sub["num_workers"])
        ax.set_title(panel)
        ax.set_xlabel("num_workers (worker processes)")
        ax.set_ylabel("throughput (samples/s)")
        if notes:
            ax.text(0.98, 0.03, "\n".join(notes), transform=ax.transAxes, ha="right", va="bottom", fontsize=7,
                    color="0.35", style="italic")
        sns.despine(ax=ax)
    handles = [Line2D([], [], color=palette[c], marker="o", lw=1.5, label=_cores_label(c)) for c in palette]
    handles += [
        Line2D([], [], color="0.3", ls="--", lw=0.9, label="ideal: one-worker rate x N"),
        Line2D([], [], color="0.3", ls=":", lw=1.1, label="num_workers = cores"),
        Line2D([], [], color="0.3", ls="", marker="v", mec="black", ms=7, label="knee: first within 5% of best"),
        Line2D([], [], color="0.3", ls="", marker="o", mfc=UNSTABLE_FACE, mew=1.5, label="unstable (IQR > 10%)"),
        Line2D([], [], color="0.3", ls="", marker=MAIN_PROCESS_MARKER, label="0: main-process loading"),
    ]
    if a.curves.get("decode_ceiling", pd.Series(dtype=float)).notna().any():
        handles.append(Line2D([], [], color="0.3", ls="-.", lw=1.1, label="decode-only ceiling (rate/core x cores)"))
    if (cells["n"] == 0).any():
        handles.append(Line2D([], [], color="0.3", ls="", marker=FAILED_MARKER, mec="black", ms=7,
                              label="every repetition failed"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=8)
    fig.suptitle(f"Throughput vs num_workers · study {a.study} · median with 95% bootstrap interval",
                 fontsize=11)
    return save(fig, folder, "throughput_vs_workers", a.provenance)


def oversubscription(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Past the cores: throughput as a fraction of each curve's best, involuntary context switches
    per 1000 samples, and memory (USS of main + workers) against workers per core."""
    cells = a.cells[(a.cells["num_workers"] >= 1) & (a.cells["n"] > 0)].copy()
    ok = a.rows[(a.rows["status"] == "ok") & (a.rows["num_workers"] >= 1)].copy()
    if cells.empty:
        return []
    best = a.curves.set_index(["panel", "cores"])["best_x"]
    cells["ratio"] = cells["num_workers"] / cells["cores"]
    cells["of_best"] = cells["median"] / [best.get((p, c), np.nan) for p, c in zip(cells["panel"], cells["cores"])]
    cells["uss_mib"] = cells.get("uss_peak_bytes_median", np.nan) / 2**20
    samples = ok["end_to_end_samples_per_s"] * ok["total_s"]
    ok["ctx_per_ksample"] = ok["ctx_involuntary"] / samples * 1000
    ctx = ok.groupby(["panel", "cores", "num_workers"], as_index=False)["ctx_per_ksample"].median()
    ctx["ratio"] = ctx["num_workers"] / ctx["cores"]

    panels = [p for p in a.panels if p in set(cells["panel"])]
    colors = dict(zip(panels, sns.color_palette("colorblind" if len(panels) <= 10 else "husl", len(panels))))
    cores_values = sorted(cells["cores"].unique())
    styled = len(cores_values) <= 4
    markers = dict(zip(cores_values, ["o", "s", "^", "D"]))
    dashes = dict(zip(cores_values, ["-", "--", "-.", ":"]))
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4.4), layout="constrained")
    for (panel, cores), g in cells.sort_values("num_workers").groupby(["panel", "cores"], sort=False):
        kw = dict(color=colors[panel], lw=1.3 if styled else 0.8, alpha=1 if styled else 0.6,
                  marker=markers[cores] if styled else None, ms=4, ls=dashes[cores] if styled else "-")
        ax1.plot(g["ratio"], g["of_best"], **kw)
        unstable = g[g["unstable"]]
        if styled:
            ax1.plot(unstable["ratio"], unstable["of_best"], ls="", marker=markers[cores], ms=6,
                     mfc=UNSTABLE_FACE, mec=colors[panel], mew=1.3)
        c = ctx[(ctx["panel"] == panel) & (ctx["cores"] == cores)].sort_values("ratio")
        ax2.plot(c["ratio"], c["ctx_per_ksample"], **kw)
        ax3.plot(g["num_workers"], g["uss_mib"], **kw)
    for ax in (ax1, ax2):
        ax.axvline(1, color="0.3", ls=":", lw=1)
        ax.axvspan(1, max(cells["ratio"].max(), 1.01), color="0.94", zorder=-1)
        ax.set_xlabel("num_workers / cores")
        if cells["ratio"].max() / max(cells["ratio"].min(), 1e-9) >= 16:
            ax.set_xscale("log", base=2)
    ax1.text(1.03, 0.02, "oversubscribed", transform=ax1.get_xaxis_transform(), fontsize=8, color="0.3")
    ax1.axhline(0.95, color="0.6", lw=0.8, ls="--")
    ax1.set_ylim(0, 1.08)
    ax1.set_ylabel("throughput / best of its curve")
    ax1.set_title("Throughput past the cores")
    ax2.set_ylabel("involuntary context switches\nper 1000 samples")
    ax2.set_ylim(bottom=0)
    ax2.set_title("Time-slicing cost")
    ax3.set_xlabel("num_workers")
    ax3.set_ylabel("memory: USS main + workers (MiB)")
    ax3.set_ylim(bottom=0)
    ax3.set_title("Memory per extra worker")
    if cells["num_workers"].max() / max(cells["num_workers"].min(), 1) >= 16:
        ax3.set_xscale("log", base=2)
    sns.despine(fig)
    handles = [Line2D([], [], color=colors[p], lw=1.5, label=p) for p in panels]
    if styled:
        handles += [Line2D([], [], color="0.3", ls=dashes[c], marker=markers[c], label=_cores_label(c))
                    for c in cores_values]
        handles.append(Line2D([], [], color="0.3", ls="", marker="o", mfc=UNSTABLE_FACE, mew=1.3,
                              label="unstable (IQR > 10%)"))
    else:
        handles.append(Line2D([], [], color="0.5", lw=0.8, label=f"one line per core count ({len(cores_values)})"))
    handles.append(Line2D([], [], color="0.6", ls="--", lw=0.8, label="95% of best"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=8)
    fig.suptitle(f"Oversubscription: workers past the cores · study {a.study} · medians over repetitions",
                 fontsize=11)
    return save(fig, folder, "oversubscription", a.provenance)

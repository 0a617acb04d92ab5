"""How throughput scales with num_workers: diminishing returns, physical ceilings, oversubscription."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D
from matplotlib.transforms import offset_copy

from analysis.aggregate import StudyAnalysis
from analysis.stats import coverage_text
from analysis.figures.style import (
    FAILED_MARKER,
    MAIN_PROCESS_MARKER,
    UNSTABLE_FACE,
    cores_palette,
    grid,
    header,
    panel_title,
    throughput_axis,
    legend_rows,
    log2_axis,
    save,
    workers_axis,
)


def _cores_label(c) -> str:
    c = int(c)
    return f"{c} core{'s' if c != 1 else ''}"


def _handles(a: StudyAnalysis, palette: dict) -> list:
    cells = a.cells
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
    return handles


def _measured(ax, sub: pd.DataFrame, palette: dict) -> float:
    """One panel's measured cells (`sub`, with their `_color`): intervals, median lines, unstable cells hollow,
    main-process loading as squares, failed cells on the axis. Returns the top of what it drew."""
    meas = sub[sub["n"] > 0]
    # one artist per kind and panel, not per curve: drawing time grows with artists, not points
    bars = meas[np.isfinite(meas["ci_low"]) & np.isfinite(meas["ci_high"])]
    ax.vlines(bars["num_workers"], bars["ci_low"], bars["ci_high"], colors=list(bars["_color"]), lw=1, zorder=2)
    for cores, line in meas[meas["num_workers"] >= 1].groupby("cores", sort=True):
        ax.plot(line["num_workers"], line["median"], color=palette[cores], marker="o", ms=4.5, lw=1.5, zorder=3)
    unstable = meas[meas["unstable"] & (meas["num_workers"] >= 1)]
    ax.scatter(unstable["num_workers"], unstable["median"], s=38, facecolors=UNSTABLE_FACE,
               edgecolors=list(unstable["_color"]), linewidths=1.5, zorder=4)
    zero = meas[meas["num_workers"] == 0]
    ax.scatter(zero["num_workers"], zero["median"], s=30, marker=MAIN_PROCESS_MARKER, linewidths=1.3,
               facecolors=[UNSTABLE_FACE if u else c for u, c in zip(zero["unstable"], zero["_color"])],
               edgecolors=list(zero["_color"]), zorder=4)
    failed = sub[sub["n"] == 0]
    ax.scatter(failed["num_workers"], np.zeros(len(failed)), s=60, marker=FAILED_MARKER,
               c=list(failed["_color"]), edgecolors="black", linewidths=0.5, clip_on=False, zorder=5)
    return float(np.nanmax(np.concatenate([[0.0], meas["median"].to_numpy(float), bars["ci_high"].to_numpy(float)])))


def _guides(ax, fig, sub: pd.DataFrame, curves: list, palette: dict, top: float) -> float:
    """One panel's guides from its curves ((cores, curve) per core count, the curve None where not analysed):
    ideal scaling from the one-worker rate, num_workers = cores, the decode ceilings (named, not drawn, when far
    above the data) and the knees. Returns the top of the panel with the ceilings drawn."""
    ideal, ideal_colors, vx, vcol, hy, hcol, kx, ky, kcol = [], [], [], [], [], [], [], [], []
    ceilings = []
    for cores, crv in curves:
        if crv is None:
            continue
        color = palette[cores]
        ns = np.array(sorted(n for n in sub.loc[sub["cores"] == cores, "num_workers"].unique() if n >= 1), float)
        x1 = crv.get("x_one_worker", np.nan)
        if np.isfinite(x1) and ns.size > 1:
            ideal.append(np.column_stack([ns, x1 * ns]))
            ideal_colors.append(color)
        vx.append(cores)
        vcol.append(color)
        ceiling = crv.get("decode_ceiling", np.nan)
        if np.isfinite(ceiling):
            ceilings.append((ceiling, color, cores))
        if np.isfinite(crv.get("knee_x", np.nan)):
            kx.append(crv["knee_n"])
            ky.append(crv["knee_x"])
            kcol.append(color)
    off_scale = []  # ceilings far above the data: named, not drawn (they would squash the curves)
    data_top = top
    for ceiling, color, cores in ceilings:
        if data_top <= 0 or ceiling <= 2 * data_top:
            hy.append(ceiling)
            hcol.append(color)
            top = max(top, float(ceiling))
        else:
            off_scale.append(f"{int(cores)} cores {ceiling:,.0f}")
    if off_scale:
        ax.text(0.02, 0.98, "decode ceilings above the axis: " + ", ".join(off_scale), transform=ax.transAxes,
                ha="left", va="top", fontsize=6.5, color="0.3", wrap=True)
    ax.add_collection(LineCollection(ideal, colors=ideal_colors, linestyles="--", linewidths=0.9, alpha=0.7, zorder=2))
    ax.vlines(vx, 0, 1, colors=vcol, linestyles=":", lw=1.1, transform=ax.get_xaxis_transform(), zorder=1)
    ax.hlines(hy, 0, 1, colors=hcol, linestyles="-.", lw=1.1, transform=ax.get_yaxis_transform(), zorder=1)
    # just above the point, so the point itself (and its marker style) stays visible
    ax.scatter(kx, ky, s=42, marker="v", c=kcol, edgecolors="black", linewidths=0.6, zorder=6, clip_on=False,
               transform=offset_copy(ax.transData, fig=fig, y=9, units="points"))
    return top


def throughput_vs_workers(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Median samples/s vs num_workers: one panel per workload variant, one colour per core count.

    Error bars: order-statistic interval of the median, its real coverage for the cells' n in the header
    (75% for [min, max] of 3 repetitions); hollow markers: unstable cells (IQR > 10% of
    the median); square at 0: main-process loading; X on the axis: cells where every repetition
    failed. Dashed: ideal linear scaling from the one-worker rate; dotted vertical: num_workers =
    cores; dash-dot horizontal: decode-only ceiling (jpeg, when the study measured it); triangle
    above a point: the knee (smallest num_workers within 5% of the best).
    """
    cells, curves = a.cells, a.curves
    palette = cores_palette(cells["cores"])
    handles = _handles(a, palette)
    fig, axes = grid(len(a.panels), legend_rows=legend_rows(len(handles), 5))
    header(fig, f"Throughput vs num_workers · study {a.study} · median with {coverage_text(cells['n'])}", handles)
    curve_at = {(p, c): r for p, c, r in zip(curves["panel"], curves["cores"], curves.to_dict("records"))}
    for ax, panel in zip(axes, a.panels):
        sub = cells[cells["panel"] == panel].sort_values(["cores", "num_workers"])
        top = _measured(ax, sub.assign(_color=[palette[c] for c in sub["cores"]]), palette)
        top = _guides(ax, fig, sub, [(c, curve_at.get((panel, c))) for c in sorted(sub["cores"].unique())], palette,
                      top)
        ax.set_ylim(0, top * 1.12 if top > 0 else 1)
        workers_axis(ax, sub["num_workers"])
        panel_title(ax, panel)
        ax.set_xlabel("num_workers (worker processes)")
        throughput_axis(ax)
        if panel.split(" · ")[0] == "jpeg" and not np.isfinite(
                curves.loc[curves["panel"] == panel, "decode_ceiling"].astype(float)).any():
            ax.text(0.98, 0.03, "decode ceiling not measured", transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=7, color="0.35", style="italic")
        sns.despine(ax=ax)
    return save(fig, folder, "throughput_vs_workers", a.provenance)


def _oversubscribed_cells(a: StudyAnalysis) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cells with workers and a throughput, with workers per core, share of their curve's best and USS in MiB;
    and the median involuntary context switches per 1000 samples per (panel, cores, num_workers)."""
    cells = a.cells[(a.cells["num_workers"] >= 1) & (a.cells["n"] > 0)].copy()
    ok = a.ok[a.ok["num_workers"] >= 1].copy()
    best = a.curves.set_index(["panel", "cores"])["best_x"]
    cells["ratio"] = cells["num_workers"] / cells["cores"]
    cells["of_best"] = cells["median"] / [best.get((p, c), np.nan) for p, c in zip(cells["panel"], cells["cores"])]
    cells["uss_mib"] = cells.get("uss_peak_bytes_median", np.nan) / 2**20
    samples = ok["end_to_end_samples_per_s"] * ok["total_s"]
    ok["ctx_per_ksample"] = ok["ctx_involuntary"] / samples * 1000
    ctx = ok.groupby(["panel", "cores", "num_workers"], as_index=False)["ctx_per_ksample"].median()
    ctx["ratio"] = ctx["num_workers"] / ctx["cores"]
    return cells, ctx


def _line_styles(panels: list[str], cores_values: list) -> tuple[dict, dict, dict, list]:
    """A colour per panel and, for up to 4 core counts, a marker and a dash per core count (one thin line per
    curve beyond that); the legend handles saying so."""
    colors = dict(zip(panels, sns.color_palette("colorblind" if len(panels) <= 10 else "husl", len(panels))))
    markers = dict(zip(cores_values, ["o", "s", "^", "D"]))
    dashes = dict(zip(cores_values, ["-", "--", "-.", ":"]))
    handles = [Line2D([], [], color=colors[p], lw=1.5, label=p) for p in panels]
    if len(cores_values) <= 4:
        handles += [Line2D([], [], color="0.3", ls=dashes[c], marker=markers[c], label=_cores_label(c))
                    for c in cores_values]
        handles.append(Line2D([], [], color="0.3", ls="", marker="o", mfc=UNSTABLE_FACE, mew=1.3,
                              label="unstable (IQR > 10%)"))
    else:
        handles.append(Line2D([], [], color="0.5", lw=0.8, label=f"one line per core count ({len(cores_values)})"))
    handles.append(Line2D([], [], color="0.6", ls="--", lw=0.8, label="5% below best (the knee's bound)"))
    return colors, markers, dashes, handles


def _oversubscription_axes(ax1, ax2, ax3, cells: pd.DataFrame) -> None:
    for ax in (ax1, ax2):
        ax.axvline(1, color="0.3", ls=":", lw=1)
        ax.axvspan(1, max(cells["ratio"].max(), 1.01), color="0.94", zorder=-1)
        ax.set_xlabel("num_workers / cores")
        if cells["ratio"].max() / max(cells["ratio"].min(), 1e-9) >= 4:
            log2_axis(ax.xaxis)
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
        log2_axis(ax3.xaxis)


def oversubscription(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Past the cores: throughput as a fraction of each curve's best, involuntary context switches
    per 1000 samples, and memory (USS of main + workers) against workers per core."""
    cells, ctx = _oversubscribed_cells(a)
    if cells.empty:
        return []
    panels = [p for p in a.panels if p in set(cells["panel"])]
    cores_values = sorted(cells["cores"].unique())
    styled = len(cores_values) <= 4
    colors, markers, dashes, handles = _line_styles(panels, cores_values)
    fig, (ax1, ax2, ax3) = grid(3, ncols=3, width=3.9, height=2.9, legend_rows=legend_rows(len(handles), 6))
    header(fig, f"Oversubscription: workers past the cores · study {a.study} · medians over repetitions", handles,
           ncol=6)
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
    _oversubscription_axes(ax1, ax2, ax3, cells)
    sns.despine(fig)
    return save(fig, folder, "oversubscription", a.provenance)

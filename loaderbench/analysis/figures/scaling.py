"""How throughput scales with num_workers: diminishing returns, physical ceilings, oversubscription."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullLocator
from matplotlib.transforms import offset_copy

from loaderbench.analysis.figures.style import (
    FAILED_MARKER,
    MAIN_PROCESS_MARKER,
    UNSTABLE_FACE,
    cores_palette,
    fit_text,
    grid,
    header,
    log2_axis,
    mark_n,
    only,
    panel_title,
    repetitions_text,
    save,
    throughput_axis,
    usual_n,
    workers_axis,
)
from loaderbench.analysis.table.scaling import StudyAnalysis
from loaderbench.stats.intervals import MIN_N, coverage_text


def _cores_label(c) -> str:
    c = int(c)
    return f"{c} core{'s' if c != 1 else ''}"


#: What `_measured` and `_guides` may draw -> its legend entry (only what a figure drew is listed).
_ENTRIES = {
    "median": lambda: Line2D([], [], color="0.3", marker="o", ms=4.5, lw=1.5, label="median of the repetitions"),
    "ideal": lambda: Line2D([], [], color="0.3", ls="--", lw=0.9, label="ideal: one-worker rate x N"),
    "cores": lambda: Line2D([], [], color="0.3", ls=":", lw=1.1, label="num_workers = cores"),
    "knee": lambda: Line2D(
        [], [], color="0.3", ls="", marker="v", mec="black", ms=7, label="knee: first within 5% of best"
    ),
    "unstable": lambda: Line2D(
        [], [], color="0.3", ls="", marker="o", mfc=UNSTABLE_FACE, mew=1.5, label="unstable (IQR > 10%)"
    ),
    "main": lambda: Line2D([], [], color="0.3", ls="", marker=MAIN_PROCESS_MARKER, label="0: main-process loading"),
    "ceiling": lambda: Line2D([], [], color="0.3", ls="-.", lw=1.1, label="decode-only ceiling (rate/core x cores)"),
    "failed": lambda: Line2D(
        [],
        [],
        color="0.3",
        ls="",
        marker=FAILED_MARKER,
        mec="black",
        ms=7,
        label="every repetition failed (no measurement)",
    ),
}


def _handles(palette: dict, drawn: set) -> list:
    """Legend entries for what was drawn: a colour per core count drawn, then each kind of mark drawn."""
    handles = [Patch(color=palette[c], label=_cores_label(c)) for c in palette if ("colour", c) in drawn]
    return handles + [make() for kind, make in _ENTRIES.items() if kind in drawn]


def _measured(ax, sub: pd.DataFrame, palette: dict, usual: int | None) -> tuple[float, set]:
    """One panel's measured cells (`sub`, with their `_color`): intervals, median lines, unstable cells hollow,
    main-process loading as squares, failed cells on the axis, "n=k" at points whose n is not the `usual` one.
    Returns the top of what it drew and the kinds of marks drawn (see _ENTRIES; ("colour", cores) per core
    count)."""
    meas = sub[sub["n"] > 0]
    # one artist per kind and panel, not per curve: drawing time grows with artists, not points
    bars = meas[np.isfinite(meas["ci_low"]) & np.isfinite(meas["ci_high"])]
    ax.vlines(bars["num_workers"], bars["ci_low"], bars["ci_high"], colors=list(bars["_color"]), lw=1, zorder=2)
    drawn = {("colour", c) for c in sub["cores"]}
    for cores, line in meas[meas["num_workers"] >= 1].groupby("cores", sort=True):
        ax.plot(line["num_workers"], line["median"], color=palette[cores], marker="o", ms=4.5, lw=1.5, zorder=3)
        drawn.add("median")
    unstable = meas[meas["unstable"] & (meas["num_workers"] >= 1)]
    ax.scatter(
        unstable["num_workers"],
        unstable["median"],
        s=38,
        facecolors=UNSTABLE_FACE,
        edgecolors=list(unstable["_color"]),
        linewidths=1.5,
        zorder=4,
    )
    zero = meas[meas["num_workers"] == 0]
    ax.scatter(
        zero["num_workers"],
        zero["median"],
        s=30,
        marker=MAIN_PROCESS_MARKER,
        linewidths=1.3,
        facecolors=[UNSTABLE_FACE if u else c for u, c in zip(zero["unstable"], zero["_color"])],
        edgecolors=list(zero["_color"]),
        zorder=4,
    )
    failed = sub[sub["n"] == 0]
    ax.scatter(
        failed["num_workers"],
        np.zeros(len(failed)),
        s=60,
        marker=FAILED_MARKER,
        c=list(failed["_color"]),
        edgecolors="black",
        linewidths=0.5,
        clip_on=failed.empty,  # on the axis, unclipped; but matplotlib draws an empty unclipped one in the corner
        zorder=5,
    )
    mark_n(ax, meas["num_workers"], meas["median"], meas["n"], usual)
    drawn |= {kind for kind, rows in (("unstable", unstable), ("main", zero), ("failed", failed)) if len(rows)}
    top = float(np.nanmax(np.concatenate([[0.0], meas["median"].to_numpy(float), bars["ci_high"].to_numpy(float)])))
    return top, drawn


def _guides(ax, fig, sub: pd.DataFrame, curves: list, palette: dict, top: float) -> tuple[float, set]:
    """One panel's guides from its curves ((cores, curve) per core count, the curve None where not analysed):
    ideal scaling from the one-worker rate, num_workers = cores, the decode ceilings (named, not drawn, when far
    above the data) and the knees. Returns the top of the panel with the ceilings drawn, and the kinds of guide
    drawn (see _ENTRIES)."""
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
        note = ax.text(
            0.02,
            0.98,
            "decode ceilings above the axis: " + ", ".join(off_scale),
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=6.5,
            color="0.3",
        )
        renderer = fig.canvas.get_renderer()
        fit_text(note, 0.96 * ax.get_window_extent(renderer).width, renderer)
    ax.add_collection(LineCollection(ideal, colors=ideal_colors, linestyles="--", linewidths=0.9, alpha=0.7, zorder=2))
    ax.vlines(vx, 0, 1, colors=vcol, linestyles=":", lw=1.1, transform=ax.get_xaxis_transform(), zorder=1)
    ax.hlines(hy, 0, 1, colors=hcol, linestyles="-.", lw=1.1, transform=ax.get_yaxis_transform(), zorder=1)
    # just above the point, so the point itself (and its marker style) stays visible
    ax.scatter(
        kx,
        ky,
        s=42,
        marker="v",
        c=kcol,
        edgecolors="black",
        linewidths=0.6,
        zorder=6,
        clip_on=not kx,  # as the failed cells' marks
        transform=offset_copy(ax.transData, fig=fig, y=9, units="points"),
    )
    drawn = {kind for kind, marks in (("ideal", ideal), ("cores", vx), ("ceiling", hy), ("knee", kx)) if marks}
    return top, drawn


def interval_note(ns) -> str:
    """What a scaling figure's points and bars are: the median of how many repetitions, and the bars' real
    coverage (loaderbench.analysis.table.summary.coverage_text; cells under loaderbench.stats.intervals.MIN_N
    repetitions
    get none)."""
    counted = [int(n) for n in ns if n > 0]
    few = f" (none under {MIN_N} repetitions)" if any(n < MIN_N for n in counted) else ""
    return f"points: median of {repetitions_text(counted)} · bars: {coverage_text(counted)}{few}"


def throughput_vs_workers(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Median samples/s vs num_workers: one panel per workload variant, one colour per core count.

    Error bars: order-statistic interval of the median, its real coverage and the cells' n in the note under
    the title ("n=k" at a point whose n differs from the rest); hollow markers: unstable cells (IQR > 10% of
    the median); square at 0: main-process loading; X on the axis: cells where every repetition
    failed. Dashed: ideal linear scaling from the one-worker rate; dotted vertical: num_workers =
    cores; dash-dot horizontal: decode-only ceiling (jpeg, when the study measured it); triangle
    above a point: the knee (smallest num_workers within 5% of the best). Every panel has the same x axis.
    """
    # the columns drawn only: each panel's rows are cut from these, not from the cells' every column
    cells = only(a.cells, "panel", "cores", "num_workers", "n", "median", "ci_low", "ci_high", "unstable")
    curves = a.curves
    palette = cores_palette(cells["cores"])
    usual = usual_n(cells["n"])
    fig, axes = grid(len(a.panels))
    curve_at = {(p, c): r for p, c, r in zip(curves["panel"], curves["cores"], curves.to_dict("records"))}
    drawn: set = set()
    for ax, panel in zip(axes, a.panels):
        sub = cells[cells["panel"] == panel].sort_values(["cores", "num_workers"])
        top, marks = _measured(ax, sub.assign(_color=[palette[c] for c in sub["cores"]]), palette, usual)
        top, guides = _guides(
            ax, fig, sub, [(c, curve_at.get((panel, c))) for c in sorted(sub["cores"].unique())], palette, top
        )
        drawn |= marks | guides
        ax.set_ylim(0, top * 1.12 if top > 0 else 1)
        workers_axis(ax, cells["num_workers"])
        panel_title(ax, panel)
        ax.set_xlabel("num_workers (worker processes)")
        throughput_axis(ax)
        if (
            panel.split(" · ")[0] == "jpeg"
            and not np.isfinite(curves.loc[curves["panel"] == panel, "decode_ceiling"].astype(float)).any()
        ):
            ax.text(
                0.98,
                0.03,
                "decode ceiling not measured",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=7,
                color="0.35",
                style="italic",
            )
        sns.despine(ax=ax)
    header(
        fig, f"Throughput vs num_workers · study {a.study}", _handles(palette, drawn), note=interval_note(cells["n"])
    )
    return save(fig, folder, "throughput_vs_workers", a.provenance)


def _oversubscribed_cells(a: StudyAnalysis) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Cells with workers and a throughput, with workers per core, share of their curve's best and USS in MiB;
    and the median involuntary context switches per 1000 samples per (panel, cores, num_workers)."""
    cells = only(a.cells, "panel", "cores", "num_workers", "n", "median", "unstable", "uss_peak_bytes_median")
    cells = cells[(cells["num_workers"] >= 1) & (cells["n"] > 0)].copy()
    ok = only(a.ok, "panel", "cores", "num_workers", "end_to_end_samples_per_s", "total_s", "ctx_involuntary")
    ok = ok[ok["num_workers"] >= 1].copy()
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
    curve beyond that); the legend handles saying so (the unstable marker is added where drawn)."""
    colors = dict(zip(panels, sns.color_palette("colorblind" if len(panels) <= 10 else "husl", len(panels))))
    markers = dict(zip(cores_values, ["o", "s", "^", "D"]))
    dashes = dict(zip(cores_values, ["-", "--", "-.", ":"]))
    handles = [Patch(color=colors[p], label=p) for p in panels]
    if len(cores_values) <= 4:
        handles += [
            Line2D([], [], color="0.3", ls=dashes[c], marker=markers[c], label=_cores_label(c)) for c in cores_values
        ]
    else:
        handles.append(Line2D([], [], color="0.5", lw=0.8, label=f"one line per core count ({len(cores_values)})"))
    handles += [
        Line2D([], [], color="0.3", ls=":", lw=1, label="num_workers = cores"),
        Line2D([], [], color="0.6", ls="--", lw=0.8, label="5% below best (the knee's bound)"),
    ]
    return colors, markers, dashes, handles


def _ratio_label(r: float) -> str:
    """1/4 rather than 0.25, 1/64 rather than 0.015625 (short enough never to run into the next tick)."""
    if r < 1 and (1 / r).is_integer():
        return f"1/{1 / r:g}"
    return f"{r:.3g}"


def ratio_axis(ax, ratios) -> None:
    """num_workers / cores on x, the same for every panel given the same `ratios`: base-2 log when they span 4x
    or more, ticks at the measured ratios (at the powers of two when there are more than 8)."""
    rs = sorted({float(r) for r in ratios if np.isfinite(r) and r > 0})
    lo, hi = (rs[0], rs[-1]) if rs else (0.5, 2.0)
    if hi / lo >= 4:
        log2_axis(ax.xaxis)
        ax.set_xlim(lo / 1.25, hi * 1.25)
    else:
        span = (hi - lo) or 1
        ax.set_xlim(lo - 0.06 * span, hi + 0.06 * span)
    ticks = rs
    if len(ticks) > 8:
        powers = list(range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1))
        step = math.ceil(len(powers) / 8)
        ticks = [2.0**k for k in powers if k % step == 0]
    ax.set_xticks(ticks)
    ax.set_xticklabels([_ratio_label(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("num_workers / cores")


def oversubscribed_from(ax, ratios) -> float | None:
    """Where the oversubscribed region starts on `ax`: halfway (on the axis' scale) between workers = cores and
    the smallest measured ratio above 1, so a point at exactly 1 (every core has one worker) is never inside it;
    None when no ratio is above 1."""
    above = [float(r) for r in ratios if np.isfinite(r) and r > 1]
    if not above:
        return None
    first = min(above)
    return math.sqrt(first) if ax.get_xscale() == "log" else (1 + first) / 2


def _oversubscription_axes(ax1, ax2, ax3, cells: pd.DataFrame) -> None:
    for ax in (ax1, ax2, ax3):
        ratio_axis(ax, cells["ratio"])
        ax.axvline(1, color="0.3", ls=":", lw=1)
        start = oversubscribed_from(ax, cells["ratio"])
        if start is not None:
            ax.axvspan(start, ax.get_xlim()[1], color="0.94", zorder=-1)
            if ax is ax1:
                ax.text(start, 0.02, " oversubscribed", transform=ax.get_xaxis_transform(), fontsize=8, color="0.3")
    ax1.axhline(0.95, color="0.6", lw=0.8, ls="--")
    ax1.set_ylim(0, 1.08)
    ax1.set_ylabel("throughput / best of its curve")
    ax1.set_title("Throughput past the cores")
    ax2.set_ylabel("involuntary context switches\nper 1000 samples")
    ax2.set_ylim(bottom=0)
    ax2.set_title("Time-slicing cost")
    ax3.set_ylabel("memory: USS main + workers (MiB)")
    ax3.set_ylim(bottom=0)
    ax3.set_title("Memory past the cores")


def oversubscription(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Past the cores: throughput as a fraction of each curve's best, involuntary context switches
    per 1000 samples, and memory (USS of main + workers), all three against workers per core on the same axis,
    shaded where there are more workers than cores."""
    cells, ctx = _oversubscribed_cells(a)
    if cells.empty:
        return []
    panels = [p for p in a.panels if p in set(cells["panel"])]
    cores_values = sorted(cells["cores"].unique())
    styled = len(cores_values) <= 4
    colors, markers, dashes, handles = _line_styles(panels, cores_values)
    usual = usual_n(cells["n"])
    fig, (ax1, ax2, ax3) = grid(3, ncols=3, width=3.9, height=2.9)
    unstable_marker = None  # the marker of a core count drawn hollow, for its legend entry
    for (panel, cores), g in cells.sort_values("num_workers").groupby(["panel", "cores"], sort=False):
        kw = dict(
            color=colors[panel],
            lw=1.3 if styled else 0.8,
            alpha=1 if styled else 0.6,
            marker=markers[cores] if styled else None,
            ms=4,
            ls=dashes[cores] if styled else "-",
        )
        ax1.plot(g["ratio"], g["of_best"], **kw)
        unstable = g[g["unstable"]]
        if styled and len(unstable):
            ax1.plot(
                unstable["ratio"],
                unstable["of_best"],
                ls="",
                marker=markers[cores],
                ms=6,
                mfc=UNSTABLE_FACE,
                mec=colors[panel],
                mew=1.3,
            )
            unstable_marker = unstable_marker or markers[cores]
        c = ctx[(ctx["panel"] == panel) & (ctx["cores"] == cores)].sort_values("ratio")
        ax2.plot(c["ratio"], c["ctx_per_ksample"], **kw)
        ax3.plot(g["ratio"], g["uss_mib"], **kw)
        mark_n(ax1, g["ratio"], g["of_best"], g["n"], usual)  # the same cells as in the other two panels
    _oversubscription_axes(ax1, ax2, ax3, cells)
    sns.despine(fig)
    if unstable_marker:
        handles.append(
            Line2D(
                [],
                [],
                color="0.3",
                ls="",
                marker=unstable_marker,
                mfc=UNSTABLE_FACE,
                mew=1.3,
                label="unstable (IQR > 10%)",
            )
        )
    header(
        fig,
        f"Oversubscription: workers past the cores · study {a.study}",
        handles,
        ncol=6,
        note=f"points: medians of {repetitions_text(cells['n']).replace('where stated', 'where stated, left')}; "
        "shaded: more workers than cores",
    )
    return save(fig, folder, "oversubscription", a.provenance)

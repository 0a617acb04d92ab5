"""Does a scaling model explain the curve? Gunther's USL fitted over every repetition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.collections import LineCollection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from loaderbench.analysis.figures.style import (
    cores_palette,
    grid,
    header,
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
from loaderbench.analysis.table.usl import MIN_DISTINCT_N, MIN_R2, usl
from loaderbench.analysis.text import n_text


def _cores(c) -> str:
    return f"{int(c)} core{'s' if c != 1 else ''}"


def why_not_drawn(c: dict) -> str:
    """Why a curve's fit is not drawn, without its R²: a fit through fewer than MIN_DISTINCT_N distinct N says
    nothing, and the value of a poor fit's R² is not a result either."""
    nd = pd.to_numeric(c.get("usl_n_distinct"), errors="coerce")
    if not nd >= 1:
        return str(c.get("usl_reason") or "no ok repetition with num_workers >= 1")
    if nd < MIN_DISTINCT_N:
        return f"only {int(nd)} distinct N (need ≥ {MIN_DISTINCT_N})"
    if not c.get("usl_converged", False):
        return "the fit did not converge"
    return "poor fit"


def _fits(sub: pd.DataFrame, curves: list, palette: dict) -> tuple[list, list, list, list, list]:
    """One panel's fitted curves over the measured range, their peaks inside it, and a line of text per core
    count ((cores, curve) pairs, the curve None where not analysed): (fits, their colours, peaks, their colours,
    [(text, colour)]). R² is quoted only for a fit that is drawn."""
    fits, fit_colors, peaks, peak_colors, lines = [], [], [], [], []
    for cores, c in curves:
        if c is None:
            continue
        color = palette[cores]
        label = f"{_cores(cores)}: "
        if c["usl_good"]:
            # over the measured range only: the model is not evidence beyond it
            cmax = float(sub.loc[sub["cores"] == cores, "num_workers"].max())
            grid_n = np.geomspace(1, cmax, 80) if cmax > 1 else np.array([1.0])
            fits.append(np.column_stack([grid_n, usl(grid_n, c["usl_lam"], c["usl_sigma"], c["usl_kappa"])]))
            fit_colors.append(color)
            pn = c["usl_peak_n"]
            if np.isfinite(pn) and 1 <= pn <= cmax:
                peaks.append((pn, float(usl(pn, c["usl_lam"], c["usl_sigma"], c["usl_kappa"]))))
                peak_colors.append(color)
            label += f"σ={c['usl_sigma']:.3f} κ={c['usl_kappa']:.2g} N*={n_text(pn)} R²={c['usl_r2']:.2f}"
        else:
            label += "no fit shown: " + why_not_drawn(c)
        lines.append((label, color))
    return fits, fit_colors, peaks, peak_colors, lines


def usl_fit(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Each repetition with num_workers >= 1 as a dot, the fitted USL X(N) = lam N / (1 + sigma (N-1)
    + kappa N (N-1)) as a line where the fit is good (R^2 >= 0.9, >= 4 distinct N), its peak N* as a
    diamond when inside the plotted range; poor fits are not drawn, the panel says why. The legend lists only
    what is drawn; every panel has the same x axis."""
    ok = only(a.ok, "panel", "cores", "num_workers", "samples_per_s")  # what is drawn: panels cut from these alone
    ok = ok[ok["num_workers"] >= 1]
    if ok.empty:
        return []
    palette = cores_palette(a.cells["cores"])
    panels = [p for p in a.panels if p in set(ok["panel"])]
    fig, axes = grid(len(panels))
    curve_at = {(p, c): r for p, c, r in zip(a.curves["panel"], a.curves["cores"], a.curves.to_dict("records"))}
    per_n = ok.groupby(["panel", "cores", "num_workers"])["samples_per_s"].agg(["count", "min"]).reset_index()
    usual = usual_n(per_n["count"])
    any_fit = any_peak = False
    for ax, panel in zip(axes, panels):
        sub = ok[ok["panel"] == panel].sort_values(["cores", "num_workers"])
        top = float(sub["samples_per_s"].max())
        # repetitions side by side, not on top of each other
        jitter = 1 + 0.03 * (sub.groupby(["cores", "num_workers"]).cumcount().to_numpy() % 3 - 1)
        ax.scatter(
            sub["num_workers"] * jitter,
            sub["samples_per_s"],
            s=9,
            alpha=0.55,
            linewidths=0,
            c=[palette[c] for c in sub["cores"]],
        )
        counts = per_n[per_n["panel"] == panel]
        mark_n(ax, counts["num_workers"], counts["min"], counts["count"], usual)
        fits, fit_colors, peaks, peak_colors, lines = _fits(
            sub, [(c, curve_at.get((panel, c))) for c in sorted(sub["cores"].unique())], palette
        )
        if fits:
            ax.add_collection(LineCollection(fits, colors=fit_colors, linewidths=1.6))
            any_fit = True
        if peaks:
            ax.scatter(*zip(*peaks), s=36, marker="D", c=peak_colors, edgecolors="black", linewidths=0.6, zorder=5)
            any_peak = True
        ax.set_ylim(0, top * (1.15 + 0.07 * len(lines)) if top > 0 else 1)
        workers_axis(ax, ok["num_workers"])
        panel_title(ax, panel)
        ax.set_xlabel("num_workers (worker processes)")
        throughput_axis(ax)
        for i, (text, color) in enumerate(lines):
            ax.text(
                0.02, 0.98 - 0.065 * i, text, transform=ax.transAxes, fontsize=6.5, color=color, va="top", ha="left"
            )
        sns.despine(ax=ax)
    handles = [Line2D([], [], color="0.3", ls="", marker="o", ms=4, alpha=0.6, label="one repetition")]
    handles += [Patch(color=palette[c], label=_cores(c)) for c in sorted(ok["cores"].unique())]
    if any_fit:
        handles.append(Line2D([], [], color="0.3", lw=1.6, label="USL fit"))
    if any_peak:
        handles.append(Line2D([], [], color="0.3", ls="", marker="D", mec="black", label="fitted peak N*"))
    header(
        fig,
        f"Scaling model: USL X(N) = λN / (1 + σ(N−1) + κN(N−1)) · study {a.study}",
        handles,
        ncol=6,
        note=f"dots: each repetition, {repetitions_text(per_n['count'], per='num_workers')} · fit drawn only "
        f"where R² ≥ {MIN_R2} over ≥ {MIN_DISTINCT_N} distinct num_workers",
    )
    return save(fig, folder, "usl_fit", a.provenance)

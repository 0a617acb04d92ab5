"""Does a scaling model explain the curve? Gunther's USL fitted over every repetition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import seaborn as sns
from matplotlib.lines import Line2D

from analysis.aggregate import StudyAnalysis
from analysis.figures.style import cores_palette, grid, save, workers_axis
from analysis.usl import usl


def _fmt_n(v: float) -> str:
    return "inf" if not np.isfinite(v) else f"{v:.1f}"


def usl_fit(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Each repetition with num_workers >= 1 as a dot, the fitted USL X(N) = lam N / (1 + sigma (N-1)
    + kappa N (N-1)) as a line where the fit is good (R^2 >= 0.9, >= 4 distinct N), its peak N* as a
    diamond when inside the plotted range; poor fits are not drawn, the panel says why."""
    ok = a.ok[a.ok["num_workers"] >= 1]
    if ok.empty:
        return []
    palette = cores_palette(a.cells["cores"])
    panels = [p for p in a.panels if p in set(ok["panel"])]
    fig, axes = grid(len(panels))
    for ax, panel in zip(axes, panels):
        sub = ok[ok["panel"] == panel]
        lines = []
        top = float(sub["samples_per_s"].max())
        nmax = float(sub["num_workers"].max())
        for cores, g in sub.groupby("cores", sort=True):
            color = palette[cores]
            jitter = 1 + 0.03 * (np.arange(len(g)) % 3 - 1)  # repetitions side by side, not on top
            ax.plot(g["num_workers"] * jitter, g["samples_per_s"], ls="", marker="o", ms=3, alpha=0.55,
                    color=color, mew=0)
            crv = a.curves[(a.curves["panel"] == panel) & (a.curves["cores"] == cores)]
            if crv.empty:
                continue
            c = crv.iloc[0]
            label = f"{int(cores)} core{'s' if cores != 1 else ''}: "
            if c["usl_good"]:
                grid_n = np.geomspace(1, nmax, 200) if nmax > 1 else np.array([1.0])
                fit = usl(grid_n, c["usl_lam"], c["usl_sigma"], c["usl_kappa"])
                ax.plot(grid_n, fit, color=color, lw=1.6)
                pn = c["usl_peak_n"]
                if np.isfinite(pn) and 1 <= pn <= nmax:
                    ax.plot([pn], [usl(pn, c["usl_lam"], c["usl_sigma"], c["usl_kappa"])], marker="D", ms=6,
                            color=color, mec="black", mew=0.6, ls="")
                label += (f"σ={c['usl_sigma']:.3f} κ={c['usl_kappa']:.2g} N*={_fmt_n(pn)} "
                          f"R²={c['usl_r2']:.2f}")
            else:
                label += f"no fit shown: {c['usl_reason']}"
            lines.append((label, color))
        ax.set_ylim(0, top * 1.15 if top > 0 else 1)
        workers_axis(ax, sub["num_workers"])
        ax.set_title(panel)
        ax.set_xlabel("num_workers (worker processes)")
        ax.set_ylabel("throughput (samples/s)")
        for i, (text, color) in enumerate(lines):
            ax.text(0.02, 0.98 - 0.065 * i, text, transform=ax.transAxes, fontsize=6.5, color=color, va="top",
                    ha="left", bbox=dict(facecolor="white", edgecolor="none", alpha=0.7, pad=0.5))
        sns.despine(ax=ax)
    handles = [Line2D([], [], color="0.3", ls="", marker="o", ms=4, alpha=0.6, label="one repetition"),
               Line2D([], [], color="0.3", lw=1.6, label="USL fit (shown only where R² ≥ 0.9)"),
               Line2D([], [], color="0.3", ls="", marker="D", mec="black", label="fitted peak N*")]
    handles += [Line2D([], [], color=palette[c], lw=1.6, label=f"{int(c)} core{'s' if c != 1 else ''}")
                for c in sorted(ok["cores"].unique())]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 6), fontsize=8)
    fig.suptitle(f"Scaling model: USL X(N) = λN / (1 + σ(N−1) + κN(N−1)) · study {a.study}", fontsize=11)
    return save(fig, folder, "usl_fit", a.provenance)

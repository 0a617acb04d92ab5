"""The sharing question's figure: file_descriptor against file_system, descriptors held, failures and
per-tensor cost (claims: loaderbench.analysis.questions.sharing)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, legend_of
from loaderbench.analysis.figures.questions.shared import NothingToDraw, bars
from loaderbench.analysis.table.derive import MIB, fd_exhausted, open_file_limit
from loaderbench.analysis.table.records import ok_mask, ok_rows

STRATEGIES = ("file_descriptor", "file_system")
#: The right three panels: (metric, y label, panel title, log scale).
PANELS = [
    ("open_fds_peak", "peak open descriptors, all processes (log)", "descriptors held", True),
    ("samples_per_s", "throughput (samples/s, log)", "throughput", True),
    ("shm_mib", "/dev/shm peak (MiB)", "shared memory used", False),
]


def _outcome_grid(ax, rows: pd.DataFrame, cells: list[str]) -> None:
    """Ok repetitions out of all, per strategy x limit (rows) and workers x tensors (columns), each column at the
    x of its bars in the other panels (0, 1, ...: the same x axis)."""
    grid = []
    for (s, lim), g in rows.groupby(["sharing_strategy", "limit"]):
        for c in cells:
            gg = g[g["cell"] == c]
            grid.append(
                {
                    "row": f"{s}\nulimit -n {lim:g}",
                    "cell": c,
                    "ok": ok_mask(gg).mean() if len(gg) else np.nan,
                    "text": f"{ok_mask(gg).sum()}/{len(gg)}" + ("\nEMFILE" if gg["exhausted"].any() else ""),
                }
            )
    grid = pd.DataFrame(grid)
    if grid.empty:
        return
    piv = grid.pivot(index="row", columns="cell", values="ok")[cells]
    txt = grid.pivot(index="row", columns="cell", values="text")[cells]
    share = piv.to_numpy(float)
    cmap = plt.get_cmap("RdYlGn")
    ax.imshow(share, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    for (i, j), text in np.ndenumerate(txt.to_numpy()):
        r, g, b, _ = cmap(share[i, j]) if np.isfinite(share[i, j]) else (1, 1, 1, 1)
        dark = 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.45
        ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if dark else "0.1")
    ax.set_xticks(range(len(cells)), cells)
    ax.set_yticks(range(len(piv)), piv.index)
    ax.set_xticks(np.arange(len(cells) + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(piv) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=1)
    ax.tick_params(which="both", length=0)
    sns.despine(ax=ax, left=True, bottom=True)
    ax.set(xlabel="workers x tensors per sample", ylabel="", title="repetitions ok (EMFILE: ran out of descriptors)")
    ax.tick_params(axis="x", labelrotation=30)


def _strategy_panels(axes, top: pd.DataFrame, cells: list[str], strategies: list[str], limits: list) -> list[tuple]:
    """Descriptors, throughput and /dev/shm per strategy, ok cells at the highest open-file limit (`top`); returns
    the bars (parts.bars)."""
    pal = dict(zip(STRATEGIES, sns.color_palette("colorblind", 2)))
    points = []
    for ax, (metric, label, title, log) in zip(axes, PANELS):
        points += bars(
            ax, top, "cell", metric, "sharing_strategy", cells, strategies, [pal[s] for s in strategies], log=log
        )
        ax.set_xlabel("workers x tensors per sample")
        ax.set_ylabel(label)
        ax.set_title(f"{title} (ulimit -n {top['limit'].max():g})" if len(top) else title)
        ax.tick_params(axis="x", labelrotation=30)
        if metric == "open_fds_peak":
            for lim in limits:
                ax.axhline(lim, color="C3", ls=":", lw=1)
                ax.text(ax.get_xlim()[0], lim, f" ulimit -n {lim:g} (per process)", color="C3", fontsize=7, va="bottom")
    return points


def sharing_strategy_limits(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Open descriptors, failures, throughput and /dev/shm per sharing strategy, workers and tensors."""
    rows = df.copy()
    if rows.empty:
        raise NothingToDraw("no records")
    rows["limit"] = open_file_limit(rows)
    rows["exhausted"] = fd_exhausted(rows)
    rows["cell"] = [f"{int(n)}w x {int(t)}t" for n, t in zip(rows["num_workers"], rows["tensors_per_sample"])]
    cells = sorted(rows["cell"].unique(), key=lambda s: (int(s.split("w")[0]), int(s.split("x ")[1][:-1])))
    strategies = [s for s in STRATEGIES if s in set(rows["sharing_strategy"])]
    ok = ok_rows(rows).copy()
    ok["shm_mib"] = ok["shm_peak_bytes"] / MIB
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2), gridspec_kw={"width_ratios": [1.2, 1, 1, 1]})
    _outcome_grid(axes[0], rows, cells)
    top = ok[ok["limit"] == ok["limit"].max()] if len(ok) else ok
    points = _strategy_panels(axes[1:], top, cells, strategies, sorted(rows["limit"].dropna().unique()))
    return Answer(
        "sharing",
        f"Sharing strategies: descriptors, failures, per-tensor cost ({study})",
        "sharing_strategy_limits",
        "Same 64 KiB per sample as 1 tensor or split into many. Right three panels: ok cells at "
        "the highest open-file limit; bars median, dots repetitions. /dev/shm is machine-wide: "
        "other processes' segments add noise.",
        per="bar",
    ).save(fig, legend_of(*axes[1:]), points, df, study, out)

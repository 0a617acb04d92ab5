"""The threads question's figure: per workload, throughput against num_workers with thread and process workers side
by side, and the memory (PSS of the cell) beside it (claims: loaderbench.analysis.questions.threads)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.questions.shared import (
    NothingToDraw,
    claims_header,
    drawable,
    legend_above,
    save_with_note,
)
from loaderbench.analysis.questions.threads import GIL_RELEASING, PURE_PYTHON
from loaderbench.analysis.table.records import col

#: line style per worker kind; the main process (num_workers = 0) starts both lines
STYLES = {"thread": ("-", "o"), "process": ("--", "s")}
#: (metric, scale, y label) of the two columns
PANELS = [("samples_per_s", 1.0, "throughput (samples/s)"), ("pss_peak_bytes", 2.0**-20, "PSS of the cell (MiB)")]


def _curves(ok: pd.DataFrame):
    """(workload, cores, method, rows) of each curve: the method's worker cells and the main process."""
    for (workload, cores), grp in ok.groupby(["workload", "cores"], sort=True):
        for method in STYLES:
            mine = grp[(grp["num_workers"] == 0) | (grp["worker_method"] == method)]
            if (mine["num_workers"] > 0).any():
                yield workload, int(cores), method, mine


def thread_process_curves(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Rows: workloads (pure-Python first); columns: throughput and PSS against num_workers; a line per worker
    kind and core count."""
    ok = drawable(df)
    ok["worker_method"] = col(ok, "worker_method", None)
    if not set(ok["worker_method"].dropna()) >= set(STYLES):
        raise NothingToDraw("needs thread and process cells (worker_method)")
    order = [w for w in (*PURE_PYTHON, *GIL_RELEASING) if w in set(ok["workload"])]
    order += sorted(set(ok["workload"]) - set(order))
    cores = sorted(int(c) for c in ok["cores"].unique())
    pal = dict(zip(cores, sns.color_palette("colorblind", len(cores))))
    fig, axes = plt.subplots(len(order), 2, figsize=(10, 2.6 * len(order) + 0.6), squeeze=False)
    points, handles = [], {}
    for workload, n_cores, method, rows in _curves(ok):
        r = order.index(workload)
        line, marker = STYLES[method]
        for ax, (metric, scale, _) in zip(axes[r], PANELS):
            if metric not in rows:
                continue
            y = pd.to_numeric(rows[metric], errors="coerce") * scale
            med = y.groupby(rows["num_workers"]).median().dropna()
            label = f"{method} workers, {n_cores} core{'s' if n_cores > 1 else ''}"
            (h,) = ax.plot(med.index, med.values, line, marker=marker, color=pal[n_cores], ms=4, label=label)
            handles.setdefault(label, h)
            ax.plot(rows["num_workers"], y, ".", color="0.1", ms=2.5)
            counts = y.groupby(rows["num_workers"]).count()
            points += [(ax, float(x), float(v), int(counts[x])) for x, v in med.items()]
    for r, workload in enumerate(order):
        for ax, (_, _, ylabel) in zip(axes[r], PANELS):
            ax.set_xscale("symlog", linthresh=1)
            ticks = sorted(int(w) for w in ok.loc[ok["workload"] == workload, "num_workers"].unique())
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
            kind = "holds the GIL" if workload in PURE_PYTHON else "releases the GIL"
            ax.set_title(f"{workload} ({kind})" if workload in (*PURE_PYTHON, *GIL_RELEASING) else workload)
            sns.despine(ax=ax)
        axes[r][0].set_xlabel("num_workers" if r == len(order) - 1 else "")
        axes[r][1].set_xlabel("num_workers" if r == len(order) - 1 else "")
    fig.tight_layout()
    leg = legend_above(fig, list(handles.values()), list(handles), ncol=2)
    claims_header(fig, f"Threads or processes ({study})", df, study, "threads", legend=leg)
    return save_with_note(
        fig,
        df,
        study,
        out,
        "thread_process_curves",
        "Lines: medians over repetitions (solid: thread workers, dashed: process workers; both start at the main "
        "process, num_workers = 0); dots: repetitions. PSS: the peak of the cell's processes together (main and "
        "workers), so thread workers count once, in the main process.",
        points,
        per="point",
    )

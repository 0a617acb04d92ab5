"""The threads question's figure: per workload, throughput against num_workers with thread and process workers side
by side, and the memory (PSS of the cell) beside it (claims: loaderbench.analysis.questions.threads)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, Curves
from loaderbench.analysis.figures.questions.shared import NothingToDraw, drawable
from loaderbench.analysis.questions.threads import GIL_RELEASING, PURE_PYTHON
from loaderbench.analysis.table.records import col

#: line style per worker kind; the main process (num_workers = 0) starts both lines
STYLES = {"thread": ("-", "o"), "process": ("--", "s")}
#: (metric, scale, y label) of the two columns
PANELS = [("samples_per_s", 1.0, "throughput (samples/s)"), ("pss_peak_bytes", 2.0**-20, "PSS of the cell (MiB)")]


def _curves(ok: pd.DataFrame) -> pd.DataFrame:
    """The rows of each curve, its worker kind as "kind": the kind's worker cells and the main process, per workload
    and core count with such worker cells."""
    curves = []
    for _, grp in ok.groupby(["workload", "cores"], sort=True):
        for method in STYLES:
            mine = grp[(grp["num_workers"] == 0) | (grp["worker_method"] == method)]
            if (mine["num_workers"] > 0).any():
                curves.append(mine.assign(kind=method))
    return pd.concat(curves)


def _title(workload: str) -> str:
    if workload not in (*PURE_PYTHON, *GIL_RELEASING):
        return workload
    return f"{workload} ({'holds the GIL' if workload in PURE_PYTHON else 'releases the GIL'})"


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
    return Curves(
        x="num_workers",
        y=PANELS,
        hue="cores",
        hues=cores,
        palette=sns.color_palette("colorblind", len(cores)),
        style="kind",
        styles=STYLES,
        label=lambda n, kind: f"{kind} workers, {n} core{'s' if n > 1 else ''}",
        row="workload",
        rows=order,
        title=_title,
        axis="symlog",
        xlabel="num_workers",
        dots=(".", "0.1"),
        line_ms=4,
        from_zero=True,
        size=(10, 2.6, 0.6),
        says=Answer(
            "threads",
            f"Threads or processes ({study})",
            "thread_process_curves",
            "Lines: medians over repetitions (solid: thread workers, dashed: process workers; both start at the main "
            "process, num_workers = 0); dots: repetitions. PSS: the peak of the cell's processes together (main and "
            "workers), so thread workers count once, in the main process.",
        ),
    ).answer(_curves(ok), df, study, out)

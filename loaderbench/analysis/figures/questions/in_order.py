"""The in-order question's figure: in_order=False with a straggling worker, the tail of the batch wait and
throughput (claims: loaderbench.analysis.questions.in_order)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.questions.shared import bars, claims_header, drawable, legend_top, save_with_note
from loaderbench.analysis.table.derive import straggler_ms
from loaderbench.analysis.table.records import col, is_true

HUE_ORDER = ["in_order=True", "in_order=False"]
#: (metric, y label, panel title)
PANELS = [
    ("wait_p99_ms", "p99 batch wait (ms)", "tail: p99 wait for a batch"),
    ("wait_p50_ms", "p50 batch wait (ms)", "typical: median wait"),
    ("samples_per_s", "throughput (samples/s)", "mean throughput"),
]


def tail_latency_in_order(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Batch wait percentiles and throughput, in_order true/false, with and without a straggling worker."""
    ok = drawable(df)
    slow = straggler_ms(ok)
    every = pd.to_numeric(col(ok, "slow_every", 0), errors="coerce").fillna(0).astype(int)
    ok["straggler"] = [
        f"{int(n)} w\n" + ("none" if s == 0 else f"+{s:g} ms" + (f"\n1 in {e}" if e else "\nworker 0"))
        for n, s, e in zip(ok["num_workers"], slow, every)
    ]
    keys = dict(zip(ok["straggler"], zip(ok["num_workers"], slow, -every)))
    order = sorted(keys, key=keys.get)
    ok["delivery"] = np.where(ok["in_order"].map(is_true), "in_order=True", "in_order=False")
    pal = sns.color_palette("colorblind", 2)
    for q in ("p50", "p95", "p99"):
        ok[f"wait_{q}_ms"] = ok[f"batch_wait_{q}_s"] * 1e3
    fig, axes = plt.subplots(1, 3, figsize=(max(13, 3 * (1.2 + 0.9 * len(order))), 3.9))
    points = []
    for ax, (metric, label, title) in zip(axes, PANELS):
        points += bars(ax, ok, "straggler", metric, "delivery", order, HUE_ORDER, pal)
        ax.set_xlabel("workers / worker 0's extra wait per sample")
        ax.set_ylabel(label)
        ax.set_title(title)
    leg = legend_top(fig, axes[0], None, ncol=2)
    for ax in axes[1:]:
        if ax.get_legend():
            ax.get_legend().remove()
    claims_header(fig, f"in_order=False with a straggling worker ({study})", df, study, "in-order", legend=leg)
    return save_with_note(
        fig,
        df,
        study,
        out,
        "tail_latency_in_order",
        "Bars: median over repetitions; dots: repetitions. Waits: time the training loop waited "
        "for each batch of the measured window.",
        points,
    )

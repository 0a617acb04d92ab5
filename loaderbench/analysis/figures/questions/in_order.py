"""The in-order question's figure: in_order=False with a straggling worker, the tail of the batch wait and
throughput (claims: loaderbench.analysis.questions.in_order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, Bars
from loaderbench.analysis.figures.questions.shared import drawable
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
    return Bars(
        x="straggler",
        order=order,
        y=[(metric, label, False, title) for metric, label, title in PANELS],
        hue="delivery",
        hues=HUE_ORDER,
        palette=pal,
        xlabel="workers / worker 0's extra wait per sample",
        size=(max(13, 3 * (1.2 + 0.9 * len(order))), 3.9),
        says=Answer(
            "in-order",
            f"in_order=False with a straggling worker ({study})",
            "tail_latency_in_order",
            "Bars: median over repetitions; dots: repetitions. Waits: time the training loop waited "
            "for each batch of the measured window.",
            per="bar",
        ),
    ).answer(ok, df, study, out)

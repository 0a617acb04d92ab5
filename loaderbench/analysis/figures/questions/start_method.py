"""The start-method question's figure: what a worker costs to start under fork, spawn and forkserver
(claims: loaderbench.analysis.questions.start_method)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, Bars
from loaderbench.analysis.figures.questions.shared import drawable
from loaderbench.analysis.table.derive import MIB, payload_mb, start_method_label
from loaderbench.analysis.table.records import col

METHOD_ORDER = ["fork", "forkserver+preload", "forkserver", "spawn"]
#: (metric, y label, log scale, panel title), drawn where the records carry the metric.
PANELS = [
    ("time_to_first_batch_s", "time to first batch (s, log)", True, "first loader: workers start, 1st batch"),
    ("epoch_gap_s", "epoch-2 gap (s, log)", True, "next loader: workers start again (epoch 2)"),
    ("workers_cpu_per_worker", "workers' CPU per worker (s, log)", True, "each worker's own start-up (2 starts)"),
    ("cpu_main_s", "main-process CPU (s, log)", True, "pickling the dataset, per worker start"),
    ("workers_uss_mib_per_worker", "workers' USS peak per worker (MiB)", False, "memory each worker holds alone"),
    ("samples_per_s", "steady throughput (samples/s)", False, "after start-up"),
]


def time_to_first_batch_by_start_method(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Time to first batch, epoch-2 restart, workers' memory and steady throughput per start method, for each
    num_workers x dataset payload."""
    ok = drawable(df, with_workers=True)
    ok["method"] = start_method_label(ok)
    ok["payload"] = payload_mb(ok)
    ok["cell"] = [
        f"{int(n)} worker{'s' if n > 1 else ''}, {p:g} MiB payload" for n, p in zip(ok["num_workers"], ok["payload"])
    ]
    keys = dict(zip(ok["cell"], zip(ok["num_workers"], ok["payload"])))
    hue_order = sorted(keys, key=keys.get)
    order = [m for m in METHOD_ORDER if m in set(ok["method"])]
    ok["workers_uss_mib_per_worker"] = ok["workers_uss_peak_bytes"] / MIB / ok["num_workers"]
    ok["workers_cpu_per_worker"] = pd.to_numeric(col(ok, "cpu_workers_s"), errors="coerce") / ok["num_workers"]
    palette = sns.color_palette("Paired", len(hue_order))
    panels = [p for p in PANELS if p[0] in ok and pd.to_numeric(ok[p[0]], errors="coerce").notna().any()]
    return Bars(
        x="method",
        order=order,
        y=panels,
        hue="cell",
        hues=hue_order,
        palette=palette,
        xlabel="start method",
        ncols=min(3, len(panels)),
        rotate=20,
        size=(5.2 * min(3, len(panels)), 3.7 * -(-len(panels) // 3)),
        says=Answer(
            "start-method",
            f"Start methods: what a worker costs to start ({study})",
            "time_to_first_batch_by_start_method",
            "Bars: median over repetitions; dots: repetitions. forkserver+preload = set_forkserver_preload(torch, "
            "torchvision, the workload). Payload: Python strings the dataset object carries (pickled to "
            "spawn/forkserver workers).\nWorkers = every process under the cell but the main one, per worker: "
            "under forkserver it includes the fork server, under spawn/forkserver the resource tracker. A spawned "
            "worker's exit can add a transient as large as the payload to its USS peak.",
            ncol=len(hue_order),
            per="bar",
        ),
    ).answer(ok, df, study, out)

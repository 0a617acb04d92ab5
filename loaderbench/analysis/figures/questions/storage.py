"""The storage question's figure: where more workers stop hiding the network (claims:
loaderbench.analysis.questions.storage).

Six panels: throughput vs num_workers at each latency with Little's law as the ideal; a bandwidth cap in Mbit/s
of payload; a connection per request against a kept-alive one; the full CPU pipeline against reading only;
time to first batch against latency; streamed shards' duplicates and missing samples per pass.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.claims import pick
from loaderbench.analysis.figures.kinds import Answer
from loaderbench.analysis.figures.questions.shared import NothingToDraw, bars, drawable, median_line, plain_log
from loaderbench.analysis.figures.style import throughput_axis, workers_axis
from loaderbench.stats.verdicts import g


def service_time_s(rows: pd.DataFrame) -> float | None:
    """Seconds one request takes with nothing added to the path: 1 / throughput of one worker at 0 ms (pooled,
    uncapped, read stage); None without that cell."""
    base = rows[(rows["latency_ms"] == 0) & (rows["num_workers"] == 1)]
    x = pd.to_numeric(base["samples_per_s"], errors="coerce").dropna()
    return float(1 / x.median()) if len(x) and x.median() > 0 else None


def littles_law(workers, latency_ms: float, service_s: float) -> np.ndarray:
    """The ideal: each of W workers waits for one answer at a time, so throughput = W / (latency + service)."""
    return np.asarray(workers, dtype=float) / (latency_ms / 1000 + service_s)


def _line(ax, rows, color, label, ls="-", marker="o", x="num_workers", y="samples_per_s") -> list[tuple]:
    """Every panel's line: medians against `x` (num_workers), the repetitions as small dots."""
    dots = {"s": 7, "color": "0.15", "lw": 0}
    return median_line(ax, rows, x, y, dots, ls=ls, marker=marker, ms=4, lw=1.4, color=color, label=label)


def workers_x(ax, ns, cores_text: str) -> None:
    """The same num_workers axis on every panel that has one (the sweep's values, whatever a panel drew)."""
    workers_axis(ax, ns)
    ax.set_xlabel(f"num_workers ({cores_text})")


def latency_hidden(ax, ok, http, palette, points) -> str:
    """Panel 1: throughput vs workers, local and each latency, with Little's law dashed."""
    service = service_time_s(http)
    local = pick(ok, storage="local", workload="jpeg", jpeg_stage="read")
    points += _line(ax, local, "0.45", "local disk", marker="s")
    for latency, color in palette.items():
        rows = http[http["latency_ms"] == latency]
        points += _line(ax, rows, color, f"HTTP {g(latency)} ms")
        if service is not None and latency > 0:
            ws = np.array(sorted(rows["num_workers"].unique()), dtype=float)
            ax.plot(ws, littles_law(ws, latency, service), ls="--", lw=0.9, color=color)
    plain_log(ax)
    throughput_axis(ax)
    ax.set_title("throughput vs workers at each latency\n(dashed: Little's law, W / (latency + service))", fontsize=9)
    return (
        f"Little's law lines use the service time measured at 0 ms with one worker: {g(service * 1e3)} ms"
        if service is not None
        else "no 0 ms one-worker cell: Little's law not drawn"
    )


def bandwidth_cap(ax, http_all, palette, points) -> bool:
    """Panel 2: payload Mbit/s vs workers under a cap, with its uncapped twin and the cap as a line."""
    capped = http_all[pd.to_numeric(http_all["bandwidth_mbit"], errors="coerce").fillna(0) > 0]
    if capped.empty:
        ax.text(0.5, 0.5, "no capped cells", transform=ax.transAxes, ha="center", color="0.5")
        return False
    for (latency, mbit), rows in capped.groupby(["latency_ms", "bandwidth_mbit"]):
        color = palette.get(latency, "C0")
        twin = http_all[
            (http_all["latency_ms"] == latency)
            & (http_all["bandwidth_mbit"].fillna(0) == 0)
            & (http_all["http_client"] == "pooled")
        ]
        rows = rows[rows["http_client"] == "pooled"]
        points += _line(ax, twin, color, f"{g(latency)} ms, no cap", ls=":", y="storage_payload_mbit_per_s")
        points += _line(ax, rows, color, f"{g(latency)} ms, {g(mbit)} Mbit/s cap", y="storage_payload_mbit_per_s")
        ax.axhline(mbit, color=color, lw=0.9, ls="--")
        ax.annotate(
            f"cap {g(mbit)} Mbit/s",
            (ax.get_xlim()[0], mbit),
            textcoords="offset points",
            xytext=(4, 3),
            fontsize=7,
            color=color,
        )
    plain_log(ax)
    ax.set_ylabel("payload (Mbit/s)")
    ax.set_title("under a bandwidth cap (dashed: the cap)", fontsize=9)
    ax.legend(fontsize=7, frameon=False)
    return True


def connection_per_request(ax, http_all, palette, points) -> None:
    """Panel 3: pooled (solid) vs per_request (dashed) at each latency measured with both."""
    uncapped = http_all[http_all["bandwidth_mbit"].fillna(0) == 0]
    both = [lat for lat, r in uncapped.groupby("latency_ms") if r["http_client"].nunique() > 1]
    for latency in both:
        for client, ls in (("pooled", "-"), ("per_request", "--")):
            rows = uncapped[(uncapped["latency_ms"] == latency) & (uncapped["http_client"] == client)]
            points += _line(ax, rows, palette.get(latency, "C0"), f"{g(latency)} ms {client}", ls=ls)
    plain_log(ax)
    throughput_axis(ax)
    ax.set_title("a new connection per request (dashed)\nvs one kept alive per worker", fontsize=9)
    ax.legend(fontsize=7, frameon=False)


def cpu_pipeline(ax, ok, palette, points) -> None:
    """Panel 4: the full decode + augment pipeline, locally and over HTTP, against reading only."""
    jpeg = pick(ok, workload="jpeg")
    for stage, ls in (("full", "-"), ("read", ":")):
        for storage, rows in jpeg[jpeg["jpeg_stage"] == stage].groupby("storage"):
            if storage == "http":
                full_lat = jpeg[(jpeg["jpeg_stage"] == "full") & (jpeg["storage"] == "http")]["latency_ms"].unique()
                rows = rows[
                    rows["latency_ms"].isin(full_lat)
                    & (rows["bandwidth_mbit"].fillna(0) == 0)
                    & (rows["http_client"] == "pooled")
                ]
                for latency, r in rows.groupby("latency_ms"):
                    points += _line(ax, r, palette.get(latency, "C0"), f"{stage}, HTTP {g(latency)} ms", ls=ls)
            else:
                points += _line(ax, rows, "0.45", f"{stage}, local", ls=ls, marker="s")
    plain_log(ax)
    throughput_axis(ax)
    ax.set_title("decode + augment on the CPU (solid)\nvs reading only (dotted)", fontsize=9)
    ax.legend(fontsize=7, frameon=False)


def first_batch(ax, http, points) -> None:
    """Panel 5: time to first batch vs latency, per num_workers."""
    ws = sorted(http["num_workers"].unique())
    shown = [w for w in ws if w in (min(ws), max(ws)) or w == ws[len(ws) // 2]]
    pal = sns.color_palette("rocket", len(shown))
    for w, color in zip(shown, pal):
        rows = http[http["num_workers"] == w]
        label = f"{w} worker{'s' if w != 1 else ''}"
        points += _line(ax, rows, color, label, x="latency_ms", y="time_to_first_batch_s")
    ax.set(xlabel="added round-trip latency (ms)", ylabel="time to first batch (s)")
    ax.set_title("time to first batch vs latency", fontsize=9)
    ax.legend(fontsize=7, frameon=False)


def shard_passes(ax, ok, points) -> None:
    """Panel 6: duplicate samples of streamed shards (bars, % of the samples seen) and missing ones (printed),
    split across workers or not."""
    shards = pick(ok, workload="shards")
    if shards.empty or "shard_duplicates" not in shards:
        ax.text(0.5, 0.5, "no shards cells", transform=ax.transAxes, ha="center", color="0.5")
        ax.axis("off")
        return
    shards = shards.assign(
        cell=[
            f"{st}\n{sh}, {int(w)} w" for st, sh, w in zip(shards["storage"], shards["sharding"], shards["num_workers"])
        ],
        dup_share=100
        * pd.to_numeric(shards["shard_duplicates"], errors="coerce")
        / pd.to_numeric(shards["shard_seen"], errors="coerce"),
    )
    order = sorted(shards["cell"].unique())
    bars(ax, shards, "cell", "dup_share", order=order)
    top = max(float(shards["dup_share"].max()), 1.0)
    for i, cell in enumerate(order):
        rows = shards[shards["cell"] == cell]
        missing = pd.to_numeric(rows["shard_missing"], errors="coerce")
        share = float(rows["dup_share"].median())
        points.append((ax, i, share, len(rows)))
        ax.annotate(
            f"{int(missing.max()) if missing.notna().any() else '?'} missing",
            (i, share),
            textcoords="offset points",
            xytext=(0, 4),
            ha="center",
            fontsize=7,
            color="0.2",
        )
    ax.set_ylim(0, top * 1.25)
    ax.set(xlabel="", ylabel="duplicate samples (% of those seen)")
    ax.set_title("streamed shards: duplicates and missing samples\n(missing: most in a complete pass)", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)


def workers_hide_latency(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Throughput vs num_workers for local and HTTP storage at several latencies, a bandwidth cap, a connection
    per request, the CPU pipeline, time to first batch, and shards' exactly-once counts."""
    ok = drawable(df, with_workers=True)
    http_all = pick(ok, workload="jpeg", storage="http", jpeg_stage="read")
    if http_all.empty:
        raise NothingToDraw('no ok HTTP read-stage jpeg cells (storage = "http", jpeg_stage = "read")')
    http = http_all[(http_all["bandwidth_mbit"].fillna(0) == 0) & (http_all["http_client"] == "pooled")]
    latencies = sorted(http_all["latency_ms"].dropna().unique())
    palette = dict(zip(latencies, sns.color_palette("viridis", len(latencies))))
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.4))
    points: list[tuple] = []
    service = latency_hidden(axes[0, 0], ok, http, palette, points)
    axes[0, 0].legend(fontsize=7, frameon=False)
    bandwidth_cap(axes[0, 1], http_all, palette, points)
    connection_per_request(axes[0, 2], http_all, palette, points)
    cpu_pipeline(axes[1, 0], ok, palette, points)
    cores = sorted(int(c) for c in ok["cores"].dropna().unique())
    cores_text = ", ".join(map(str, cores)) + f" core{'s' if cores != [1] else ''}"
    for ax in (axes[0, 0], axes[0, 1], axes[0, 2], axes[1, 0]):
        workers_x(ax, ok[ok["workload"] == "jpeg"]["num_workers"], cores_text)
    first_batch(axes[1, 1], http, points)
    shard_passes(axes[1, 2], ok, points)
    for ax in axes.flat:
        sns.despine(ax=ax)
    return Answer(
        "storage",
        f"where workers stop hiding the network ({study})",
        "workers_hide_latency",
        f"Lines: medians over repetitions; dots: repetitions. One core loads; the server runs on "
        f"the others. {service}. Payload: throughput x bytes per sample.",
    ).save(fig, {}, points, df, study, out)

"""The cow-memory question's figure: do forked workers copy the index they read, by how it is stored?
(claims: loaderbench.analysis.questions.cow_memory)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, legend_of
from loaderbench.analysis.figures.questions.shared import NothingToDraw, bars
from loaderbench.analysis.table.derive import MIB, alive_samples, peak_pss_mib_per_worker, with_growth
from loaderbench.analysis.table.records import col, is_true

#: The order backings are drawn in: the ones that copy first, then the control and Arrow, then the eager datasets.
BACKING_ORDER = ["list_str", "numpy_object", "numpy_bytes", "arrow", "decoded", "decoded_objects"]
#: The bottom row: (metric, y label, panel title).
BARS = [
    ("growth_mib_per_worker", "USS growth per worker over the run (MiB)", "growth while iterating (fork)"),
    ("end_mib_per_worker", "peak USS per worker (MiB)", "private memory per worker (USS)"),
    ("peak_pss_mib_per_worker", "peak PSS per worker (MiB)", "fair share per worker (PSS)"),
]


def _workers(n) -> str:
    return f"{int(n)} worker{'s' if n > 1 else ''}"


def _layout(sm: str, n, frozen: bool, sep: str = ", ") -> str:
    """A panel's title (sep ", ") or a bar group's tick label (sep "\n": five groups share a panel's width)."""
    return sep.join([sm, _workers(n)] + ([("gc.freeze()" if sep == ", " else "gc.freeze")] if frozen else []))


def _timeline_rows(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per probe sample with all workers alive: t since the first such sample, USS per worker."""
    out = []
    for _, r in ok.iterrows():
        n = int(r["num_workers"])
        alive = alive_samples(r.get("memory_timeline"), n)
        cell = {k: r[k] for k in ("repetition", "index_backing", "start_method", "frozen")} | {"num_workers": n}
        out += [cell | {"t": s[0] - alive[0][0], "uss_mib": s[5] / MIB / n} for s in alive]
    return pd.DataFrame(out)


def _timelines(axes, tl: pd.DataFrame, combos, palette: dict) -> None:
    """Top row: each repetition's workers' USS per worker over time, one panel per start method x workers, all on
    the same time axis."""
    t_max = float(tl["t"].max()) if not tl.empty else 1.0
    for ax, (sm, n, frozen) in zip(axes, combos):
        sub = (
            tl[(tl["start_method"] == sm) & (tl["num_workers"] == n) & (tl["frozen"] == frozen)] if not tl.empty else tl
        )
        for (b, rep), g in sub.groupby(["index_backing", "repetition"]) if not sub.empty else []:
            ax.plot(
                g["t"],
                g["uss_mib"],
                color=palette[b],
                lw=1.2,
                alpha=0.75,
                label=b if rep == sub[sub["index_backing"] == b]["repetition"].min() else "_nolegend_",
            )
        ax.set(title=_layout(sm, n, frozen), xlabel="time since all workers were up (s)", ylabel="USS per worker (MiB)")
        ax.set_ylim(bottom=0)
        ax.set_xlim(-0.03 * t_max, 1.03 * t_max)
        sns.despine(ax=ax)
    for ax in axes[len(combos) :]:
        ax.set_visible(False)


def _growth_bars(axes, ok: pd.DataFrame, layouts: list[str], backings: list[str], palette: dict) -> list[tuple]:
    """Bottom row: growth, peak USS and peak PSS per worker, per layout and backing; returns the bars
    (parts.bars)."""
    points = []
    for ax, (metric, label, title) in zip(axes, BARS):
        # growth under spawn is the worker's own start-up (import, unpickling its copy): peaks only
        data = ok[ok["start_method"] == "fork"] if metric == "growth_mib_per_worker" else ok
        lay = [x for x in layouts if x in set(data["layout"])]
        points += bars(ax, data, "layout", metric, "index_backing", lay, backings, [palette[b] for b in backings])
        ax.axhline(0, color="0.5", lw=0.6)
        ax.set(xlabel="", ylabel=label, title=title)
    for ax in axes[len(BARS) :]:
        ax.set_visible(False)
    return points


def memory_growth_by_backing(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Workers' memory over the run per index backing (the copy-on-write question), and its growth."""
    ok = with_growth(df)
    if ok.empty or "index_backing" not in ok:
        raise NothingToDraw("no ok records with an index backing")
    ok = ok[ok["index_backing"].notna() & (ok["index_backing"] != "none")].copy()
    ok["peak_pss_mib_per_worker"] = [
        peak_pss_mib_per_worker(t, n) for t, n in zip(col(ok, "memory_timeline"), ok["num_workers"])
    ]
    measured = set(ok["index_backing"])
    order = BACKING_ORDER + sorted(measured - set(BACKING_ORDER))  # a backing not listed is drawn last, never dropped
    backings = [b for b in order if b in measured]
    palette = dict(zip(order, sns.color_palette("colorblind", len(order))))
    ok["frozen"] = col(ok, "gc_freeze", False).map(is_true).astype(bool)
    combos = sorted(
        {(sm, int(n), bool(f)) for sm, n, f in zip(ok["start_method"], ok["num_workers"], ok["frozen"])},
        key=lambda c: (c[0] != "fork", c[2], c[1]),
    )
    ok["layout"] = [_layout(sm, n, f, "\n") for sm, n, f in zip(ok["start_method"], ok["num_workers"], ok["frozen"])]
    ncols = max(len(combos), 3)
    fig, axes = plt.subplots(2, ncols, figsize=(4.2 * ncols, 7.2), squeeze=False)
    _timelines(axes[0], _timeline_rows(ok), combos, palette)
    points = _growth_bars(axes[1], ok, [_layout(*c, sep="\n") for c in combos], backings, palette)
    items = int(pd.to_numeric(col(ok, "index_items"), errors="coerce").max())
    return Answer(
        "cow-memory",
        f"Copy-on-write: workers' memory while reading a {items:,}-entry index ({study})",
        "memory_growth_by_backing",
        "Top: workers' USS per worker from the runner's probe (read when RSS rises, every 2-8 s, and when the last "
        "window ends), each line one repetition. "
        "Bottom: bars median, dots repetitions. Growth: highest minus first probe sample with all workers "
        "alive. Workers = every process under the cell but the main one (spawn: the resource tracker too)."
        "\nnumpy_bytes is the control (an index that is one object). A step shared by every backing is not "
        "the index's: a full pass of Python's cyclic GC writes to every tracked object the worker inherited "
        "(gc.freeze() in the parent before forking avoids it: the panels marked gc.freeze()).",
        ncol=4,
        per="bar",
        legend="index backing",
    ).save(fig, legend_of(*axes[1], *axes[0]), points, df, study, out)

"""Pieces every question figure shares: the rows it may draw (or NothingToDraw, and a placeholder saying why),
median bars with the repetitions as dots, the marks a figure of another shape than the kinds draws its panels with
(a line of medians, one median bar, ratios of medians with their intervals), a plain log axis, the header naming
the verdicts of the question's claims (computed by loaderbench.analysis.claims, never written by hand), and saving
with a note above the provenance footer that says how many repetitions are behind each bar or point (printed at the
ones that differ).

A point is `(ax, x, y, n)`: where a bar or point was drawn and how many repetitions it is the median of."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.claims import claims_for
from loaderbench.analysis.figures.style import mark_n, provenance, repetitions_text, usual_n
from loaderbench.analysis.figures.style import save as save_figure
from loaderbench.analysis.table.records import ok_mask, ok_rows
from loaderbench.stats.comparison import Comparison, compare
from loaderbench.stats.intervals import pct

#: the dots' jitter in every bar plot: the same records draw the same figure, whatever else drew before it
JITTER_SEED = 0


class NothingToDraw(Exception):
    """A question figure's rows hold nothing it can draw; the message says why, and draw_question_figures
    draws a placeholder that says so instead."""


def drawable(rows: pd.DataFrame, with_workers: bool = False) -> pd.DataFrame:
    """A copy of the ok rows (those with worker processes only, when asked) a figure draws from; NothingToDraw
    when there are none."""
    ok = ok_rows(rows)
    if with_workers:
        ok = ok[ok["num_workers"] > 0]
    if ok.empty:
        raise NothingToDraw("no ok records")
    return ok.copy()


def bars(
    ax,
    data: pd.DataFrame,
    x: str,
    y: str,
    hue: str | None = None,
    order=None,
    hue_order=None,
    palette=None,
    log: bool = False,
) -> list[tuple]:
    """Median bars with every repetition as a black dot; returns the bars as points (ax, x, median, n)."""
    data = data[np.isfinite(pd.to_numeric(data[y], errors="coerce"))]
    if data.empty:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", color="0.5")
        return []
    kw = dict(data=data, x=x, y=y, order=order, ax=ax)
    if hue is not None:
        kw.update(hue=hue, hue_order=hue_order)
    sns.barplot(
        **kw,
        estimator=np.median,
        errorbar=None,
        palette=palette if hue else None,
        alpha=0.85,
        legend=hue is not None,
        **({} if hue else {"color": sns.color_palette("colorblind")[0]}),
    )
    outside = np.random.get_state()  # seaborn jitters the dots with NumPy's global generator: seeded here, so that
    np.random.seed(JITTER_SEED)  # the same records draw the same figure, and restored after
    try:
        sns.stripplot(
            **kw,
            dodge=hue is not None,
            palette=["0.1"] * len(hue_order or data[hue].unique()) if hue else None,
            color=None if hue else "0.1",
            size=3,
            jitter=0.08,
            legend=False,
        )
    finally:
        np.random.set_state(outside)
    if log:
        plain_log(ax)
    sns.despine(ax=ax)
    return _bar_points(ax, data, x, y, hue, order, hue_order)


def _bar_points(ax, data: pd.DataFrame, x: str, y: str, hue: str | None, order, hue_order) -> list[tuple]:
    """Where seaborn put each bar (categories at 0, 1, ...; hue levels dodged across 0.8 of a category)."""
    order = list(order) if order is not None else list(dict.fromkeys(data[x]))
    levels = (list(hue_order) if hue_order is not None else list(dict.fromkeys(data[hue]))) if hue else [None]
    width = 0.8 / len(levels)
    points = []
    for keys, g in data.groupby([x, hue] if hue else [x], sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        if keys[0] not in order or (hue and keys[1] not in levels):
            continue
        pos = order.index(keys[0]) + ((levels.index(keys[1]) - (len(levels) - 1) / 2) * width if hue else 0)
        points.append((ax, pos, float(np.median(pd.to_numeric(g[y]))), len(g)))
    return points


def line_points(ax, data: pd.DataFrame, x: str, y: str, by: list[str]) -> list[tuple]:
    """The medians drawn as points at each `x` of each `by` group, as points (ax, x, median, n)."""
    data = data[np.isfinite(pd.to_numeric(data[y], errors="coerce"))]
    return [(ax, float(k[-1]), float(np.median(g[y])), len(g)) for k, g in data.groupby([*by, x], sort=False)]


def median_line(ax, rows: pd.DataFrame, x: str, y: str, dots: dict, **line) -> list[tuple]:
    """A line of the medians of `y` (its finite values) at each `x` of `rows`, drawn with ax.plot's keywords
    `line`, every repetition a dot drawn with ax.scatter's keywords `dots`: its points (ax, x, median, n) for the
    note; nothing where `rows` hold no finite `y`."""
    values = pd.to_numeric(rows[y], errors="coerce")
    finite = np.isfinite(values.to_numpy(dtype=float))
    medians = values[finite].groupby(rows[x].to_numpy()[finite]).median()
    if medians.empty:
        return []
    ax.plot(medians.index, medians.values, **line)
    ax.scatter(rows[x], values, zorder=3, **dots)
    return line_points(ax, rows, x, y, [])


def median_bar(ax, x: float, values, **bar) -> tuple:
    """A bar at `x` of the median of `values` (drawn with ax.bar's keywords `bar`), each of them a black dot on it:
    its point (ax, x, median, n) for the note."""
    median = float(np.median(values))
    ax.bar(x, median, **bar)
    ax.plot([x] * len(values), values, "o", color="black", ms=3)
    return (ax, x, median, len(values))


def ratios(pairs) -> tuple[pd.DataFrame, list[Comparison]]:
    """Per (fields, a, b) of `pairs`: the fields with b's median over a's ("ratio") and its distribution-free
    interval ("lo", "hi"), a row each; and the comparisons behind them (their coverage: ratio_note)."""
    rows, comparisons = [], []
    for fields, a, b in pairs:
        c = compare(a, b)
        comparisons.append(c)
        rows.append({**fields, "ratio": c.ratio, "lo": c.ci_low, "hi": c.ci_high})
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["ratio", "lo", "hi"], dtype=float), comparisons


def plain_log(ax, axis: str = "y") -> None:
    """Log scale with plain numbers (0.2, 1, 5) instead of powers of ten."""
    fmt = mticker.FuncFormatter(lambda v, _: f"{v:g}")
    target = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    target.set_major_formatter(fmt)
    target.set_minor_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.1e}"[0] in "25" else ""))


def claims_header(
    fig, title: str, rows: pd.DataFrame, study: str, question: str, width: int = 150, legend=None
) -> None:
    """Stacked above the axes: the legend (if any), one line per claim with its verdict as computed by
    loaderbench.analysis.claims, then the title. Heights are measured after layout, so nothing overlaps."""
    table = claims_for(rows, study, question)
    lines = [
        textwrap.shorten(f"{r['verdict'].upper()}: {r['claim']}", width, placeholder=" ...")
        for _, r in table.iterrows()
    ]
    # tight_layout, not constrained layout: this header goes above y = 1 and style.save grows the canvas to
    # hold it (and the footer under the axes).
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    y = 1.0
    if legend is not None:
        y += legend.get_window_extent(renderer).height / fig.bbox.height + 0.005
    if lines:
        t = fig.text(0.5, y, "\n".join(lines), ha="center", va="bottom", fontsize=7.5, color="0.15", linespacing=1.35)
        y += t.get_window_extent(renderer).height / fig.bbox.height + 0.012
    fig.text(0.5, y, title, ha="center", va="bottom", fontsize=12, fontweight="bold")


def save_with_note(fig, rows, study, out, name, note: str, points: list[tuple], per: str = "bar") -> list[Path]:
    """Save with the note and how many repetitions are behind each of the `points` (bars or points, see the
    module doc: "n=k" printed at those that differ from the rest) above the provenance footer (style.save puts
    the footer below the axes)."""
    ns = [p[3] for p in points]
    usual = usual_n(ns)
    for ax, x, y, n in points:
        if ax is not None:  # None: the figure prints n another way (a heat map's row labels)
            mark_n(ax, [x], [y], [n], usual)
    return save_figure(fig, Path(out), name, f"{note}\n{repetitions_text(ns, per=per)}\n{provenance(rows, study)}")


def empty(rows: pd.DataFrame, study: str, out: Path, name: str, why: str) -> list[Path]:
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{name}: {why}", ha="center", va="center", fontsize=9)
    counted = f"nothing drawn: {int(ok_mask(rows).sum())} of {len(rows)} records ok"
    return save_figure(fig, Path(out), name, f"{counted}\n{provenance(rows, study)}")


def ratio_note(comparisons) -> str:
    """How the whiskers of ratio intervals read: their method, real coverage and n (from
    loaderbench.stats.comparison.compare)."""
    seen = sorted(
        {
            (c.n_a, c.n_b, round(c.ci_coverage, 4))
            for c in comparisons
            if np.isfinite(c.ci_low) and np.isfinite(c.ci_high)
        }
    )
    if not seen:
        return "no ratio interval (fewer than 3 repetitions on a side)"
    parts = ", ".join(f"{pct(cov)} at {a} v {b}" for a, b, cov in seen[:4]) + (" ..." if len(seen) > 4 else "")
    return f"distribution-free interval of the ratio (Mann-Whitney), real coverage {parts} repetitions"

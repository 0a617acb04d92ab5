"""The kinds of figure the question figures are declared as, so that a figure module says what it shows and not
how to draw it: `Curves` (medians against an axis, the repetitions as dots beside them, a panel per metric and
row value), `Bars` (median bars with the repetitions as dots, a panel per metric) and `Answer`, the legend,
claims header and note every question figure ends with; a kind given its Answer (`says`) draws and saves it whole."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.questions.shared import bars, claims_header, plain_log, save_with_note


@dataclass(frozen=True, kw_only=True)
class Curves:
    """A line of medians over the repetitions against `x` per value of `hue` (in `hues` order, coloured by
    `palette`) and of `style` (drawn as `styles` says: (line style, marker)), the repetitions as `dots` (marker,
    colour) beside it; a column of panels per metric of `y` ((column, scale, y label); empty where the rows lack
    the column), a row of panels per value of `row` (in `rows` order, titled by `title`). `axis`: "categorical"
    (the x values at 0, 1, ... labelled by `tick`, a missing one breaking the line where `gaps`) or "symlog" (the
    values measured in the row as ticks). `label` names a line from its hue and style value."""

    x: str
    y: Sequence[tuple[str, float, str]]
    hue: str
    hues: Sequence
    palette: Sequence
    label: Callable[..., str] = str
    style: str | None = None
    styles: dict = field(default_factory=dict)
    row: str | None = None
    rows: Sequence = (None,)
    title: Callable[[object], str] | None = None
    axis: str = "categorical"
    tick: Callable[[object], str] = str
    gaps: bool = True
    xlabel: str = ""
    dots: tuple[str, str] = ("o", "black")
    line_ms: float | None = None
    log: bool = False
    from_zero: bool = False
    size: tuple[float, float, float] = (11, 4, 0)  # width, height per row, extra height
    says: Answer

    def answer(self, data: pd.DataFrame, df: pd.DataFrame, study: str, out: Path, **draw) -> list[Path]:
        """Draw `data` (with draw's `xs` and `mark`) and save the figure as `says`."""
        return self.says.save(*self.draw(data, **draw), df, study, out)

    def draw(self, data: pd.DataFrame, xs: Sequence | None = None, mark: Callable | None = None):
        """The figure of `data` (x values `xs`, default those of `data`), `mark(ax)` drawing more on each panel
        before its axes are set: (fig, legend handles by label, points (ax, x, median, n) for the note)."""
        width, per_row, extra = self.size
        fig, axes = plt.subplots(len(self.rows), len(self.y), figsize=(width, per_row * len(self.rows) + extra))
        axes = np.asarray(axes).reshape(len(self.rows), len(self.y))
        xs = sorted(data[self.x].unique()) if xs is None else list(xs)
        points: list[tuple] = []
        handles: dict[str, object] = {}
        for r, row in enumerate(self.rows):
            mine = data if self.row is None else data[data[self.row] == row]
            for ax, (column, scale, ylabel) in zip(axes[r], self.y):
                points += self._lines(ax, mine, column, scale, xs, handles)
                if mark is not None:
                    mark(ax)
                self._axes(ax, mine, xs, ylabel, r == len(self.rows) - 1, row)
        return fig, handles, points

    def _lines(self, ax, data: pd.DataFrame, column: str, scale: float, xs: list, handles: dict) -> list[tuple]:
        """Each line of one panel, its dots and the points it drew."""
        points: list[tuple] = []
        if column not in data:
            return points
        for hue, colour in zip(self.hues, self.palette):
            for style in self.styles or [None]:
                rows = data[data[self.hue] == hue]
                if self.style is not None:
                    rows = rows[rows[self.style] == style]
                if rows.empty:
                    continue
                y = pd.to_numeric(rows[column], errors="coerce") * scale
                x = rows[self.x].map({v: i for i, v in enumerate(xs)}) if self.axis == "categorical" else rows[self.x]
                finite = np.isfinite(y.to_numpy(dtype=float))
                med = y[finite].groupby(x[finite]).median()
                counts = y[finite].groupby(x[finite]).count()
                if self.axis == "categorical" and self.gaps:
                    med = med.reindex(range(len(xs)))
                line, marker = self.styles.get(style, ("-", "o"))
                label = self.label(hue) if self.style is None else self.label(hue, style)
                (h,) = ax.plot(med.index, med.values, line, marker=marker, color=colour, label=label, ms=self.line_ms)
                handles.setdefault(label, h)
                ax.plot(x[finite], y[finite], self.dots[0], color=self.dots[1], ms=2.5, zorder=3)
                points += [(ax, float(k), float(v), int(counts[k])) for k, v in med.dropna().items()]
        return points

    def _axes(self, ax, data: pd.DataFrame, xs: list, ylabel: str, bottom: bool, row) -> None:
        if self.axis == "symlog":
            ax.set_xscale("symlog", linthresh=1)
            ticks = sorted(int(w) for w in data[self.x].unique())
            ax.set_xticks(ticks, [str(t) for t in ticks])
        else:
            ax.set_xticks(range(len(xs)), [self.tick(v) for v in xs])
        if self.log:
            plain_log(ax)
        ax.set_xlabel(self.xlabel if bottom else "")
        ax.set_ylabel(ylabel)
        if self.from_zero:
            ax.set_ylim(bottom=0)
        if self.title is not None:
            ax.set_title(self.title(row))
        sns.despine(ax=ax)


@dataclass(frozen=True, kw_only=True)
class Bars:
    """Median bars with the repetitions as dots at `order` of `x`, side by side per value of `hue` (in `hues`
    order, coloured by `palette`): a panel per metric of `y` ((column, y label, log scale, title)) and, where
    `split` names a column, per value of it in `splits` (titled by the value); `ncols` panels a row (default: all),
    x tick labels turned by `rotate` degrees."""

    x: str
    order: Sequence
    y: Sequence[tuple[str, str, bool, str]]
    hue: str | None = None
    hues: Sequence | None = None
    palette: Sequence | None = None
    xlabel: str = ""
    split: str | None = None
    splits: Sequence = (None,)
    ncols: int | None = None
    rotate: float = 0
    size: tuple[float, float] = (11, 4)
    says: Answer

    def answer(self, data: pd.DataFrame, df: pd.DataFrame, study: str, out: Path) -> list[Path]:
        """Draw `data` and save the figure as `says`."""
        return self.says.save(*self.draw(data), df, study, out)

    def draw(self, data: pd.DataFrame):
        """The figure of `data`: (fig, legend handles by label, points (ax, x, median, n) for the note)."""
        panels = [(split, metric) for split in self.splits for metric in self.y]
        ncols = self.ncols or len(panels)
        fig, grid = plt.subplots(-(-len(panels) // ncols), ncols, figsize=self.size, squeeze=False)
        axes = list(grid.ravel())
        for ax in axes[len(panels) :]:
            ax.set_visible(False)
        points = []
        for ax, (split, (column, ylabel, log, title)) in zip(axes, panels):
            rows = data if self.split is None else data[data[self.split] == split]
            points += bars(ax, rows, self.x, column, self.hue, self.order, self.hues, self.palette, log=log)
            ax.set_xlabel(self.xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(title if self.split is None else str(split))
            if self.rotate:
                ax.tick_params(axis="x", labelrotation=self.rotate)
        return fig, legend_of(*axes), points


def legend_of(*axes) -> dict:
    """The legend entries of the first of `axes` by label, every one's own legend removed (answer draws the entries
    above the panels)."""
    for ax in axes:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    handles, labels = axes[0].get_legend_handles_labels()
    return dict(zip(labels, handles))


@dataclass(frozen=True)
class Answer:
    """What every question figure ends with: the legend above the panels (`ncol` columns, titled `legend`), the
    claims of `question` (lines cut at `width`) under `title`, and the figure saved as `name` with `note` and the
    repetitions behind each point (`per`: what a point is) above the footer."""

    question: str
    title: str
    name: str
    note: str
    ncol: int = 2
    per: str = "point"
    legend: str | None = None
    width: int = 150

    def save(self, fig, handles: dict, points: list[tuple], df: pd.DataFrame, study: str, out: Path) -> list[Path]:
        legend = None
        if handles:  # just above the axes; claims_header stacks the header above it
            legend = fig.legend(
                list(handles.values()),
                list(handles),
                title=self.legend,
                loc="lower center",
                bbox_to_anchor=(0.5, 1.0),
                ncol=self.ncol,
                frameon=False,
                fontsize=8,
                title_fontsize=8,
            )
        claims_header(fig, self.title, df, study, self.question, self.width, legend)
        return save_with_note(fig, df, study, out, self.name, self.note, points, per=self.per)

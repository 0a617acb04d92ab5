"""The cheap-work question's figure: per core count, the per-sample cost below which num_workers = 0 beats every
num_workers, against the sample's size (claims: loaderbench.analysis.questions.cheap_work)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer
from loaderbench.analysis.figures.questions.shared import NothingToDraw, drawable
from loaderbench.analysis.questions.cheap_work import OPEN, WORKERS, ZERO, crossovers
from loaderbench.analysis.text import size_text

#: how each cost's state is marked: (marker, colour index, legend label)
STATES = {
    ZERO: ("o", 2, "0 workers beat every num_workers"),
    WORKERS: ("s", 1, "some num_workers beats 0 workers"),
    OPEN: ("x", 7, "neither shown at this n"),
}
LINTHRESH = 10.0  # µs: linear below, so a cost of 0 has a place on the axis


def crossover_by_sample_size(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Per core count: the crossover's interval against the sample's size, over the state at every cost."""
    drawable(df, with_workers=True)
    found = crossovers(df)
    if not found:
        raise NothingToDraw("no sample size with 0-worker and worker cells at two or more costs")
    sizes = sorted({c.sample_bytes for c in found})
    cores = sorted({c.cores for c in found})
    pal = sns.color_palette("colorblind", 8)
    fig, axes = plt.subplots(1, len(cores), figsize=(max(6.5, 4.6 * len(cores)), 4.2), squeeze=False)
    handles: dict[str, object] = {}
    points = []
    top = max(max(c.states) for c in found)
    for ax, n_cores in zip(axes[0], cores):
        for c in (c for c in found if c.cores == n_cores):
            x = sizes.index(c.sample_bytes)
            for work, state in sorted(c.states.items()):
                marker, colour, label = STATES[state]
                (h,) = ax.plot(x + 0.12, work, marker, color=pal[colour], ms=5, label=label)
                handles.setdefault(label, h)
                points.append((ax, x + 0.12, work, c.reps[work]))
            low = c.below if c.below is not None else min(c.states)
            high = c.above if c.above is not None else top * 2
            if c.below is None and c.above is None:
                continue
            label = "crossover: the interval it lies in (open-ended: beyond the costs measured)"
            (h,) = ax.plot([x - 0.12, x - 0.12], [low, high], "-", color=pal[0], lw=5, alpha=0.8, label=label)
            handles.setdefault(label, h)
            if c.above is None or c.below is None:
                end = high if c.above is None else low
                ax.plot(x - 0.12, end, "^" if c.above is None else "v", color=pal[0], ms=8)
        ax.set_yscale("symlog", linthresh=LINTHRESH)
        ax.set_ylim(-1, top * 3)
        ax.set_xlim(-0.5, len(sizes) - 0.5)
        ax.set_xticks(range(len(sizes)), [size_text(s) for s in sizes])
        ax.set_xlabel("sample size")
        ax.set_ylabel("CPU work per sample (µs)")
        ax.set_title(f"{n_cores} core{'s' if n_cores != 1 else ''}")
        sns.despine(ax=ax)
    return Answer(
        "cheap-work",
        f"Where num_workers = 0 wins: cheap work on data in memory ({study})",
        "crossover_by_sample_size",
        "Markers: at each cost, whether 0 workers beat every num_workers by 5% or more, some num_workers beat them "
        "by 5%, or neither was shown (90% intervals of the throughput ratio). Bar: the crossover lies between the "
        "most work up to which 0 workers won throughout and the least work past it at which workers won.",
        per="cell",
    ).save(fig, handles, points, df, study, out)

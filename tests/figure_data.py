"""What a figure shows, as data: per panel its title, labels, limits, ticks, texts and the points of every line,
marker collection and segment collection drawn (rounded to 6 significant digits), never its pixels.

tests/figure_data.json holds this for every figure of the study `figure_study` writes, captured from the drawing
code as it was before the drawing was made faster; tests/test_draw_speed.py checks that the figures drawn today
show the same data. To capture it again (only when a figure is meant to change):

    python tests/figure_data.py tests/figure_data.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from matplotlib.collections import Collection, LineCollection
from matplotlib.lines import Line2D

from loaderbench.fake_records.studies import study_cells, study_records, write_records

STUDY = "drawn"
FIXTURE = Path(__file__).with_name("figure_data.json")


def figure_study(root: Path) -> None:
    """A study with every kind of mark: two workloads (one with a decode-only ceiling), two core counts, two
    start methods, a lost repetition (an "n=2" label) and a cell whose every repetition failed."""
    cells = study_cells(
        workloads=(("cpu", None), ("jpeg", "pil")),
        cores=(1, 2),
        n_sweep=(0, 1, 2, 4, 8),
        start_methods=("fork", "spawn"),
    )
    failed = {
        i
        for i, c in enumerate(cells)
        if (c["workload"], c["num_workers"], c["cores"], c["start_method"]) == ("cpu", 8, 2, "spawn")
    }
    records = study_records(
        STUDY, cells, repetitions=3, raw=False, seed=7, random_failures=False, fail={i: "oom" for i in failed}
    )
    write_records(root, [r for r in records if not (r["config"]["num_workers"] == 2 and r["repetition"] == 0)])


def _round(values) -> list:
    a = np.asarray(values, dtype=float).ravel()
    return [None if not np.isfinite(v) else float(f"{v:.6g}") for v in a]


def _points(artist) -> list:
    if isinstance(artist, Line2D):
        return _round(np.column_stack(artist.get_data()).astype(float))
    if isinstance(artist, LineCollection):
        return [_round(seg) for seg in artist.get_segments()]
    return _round(artist.get_offsets())


def drawn_data(fig) -> dict:
    """What `fig` shows, panel by panel (hidden panels left out), its artists in the order they were added."""
    panels = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        artists = [a for a in ax.get_children() if isinstance(a, (Line2D, Collection)) and a.get_visible()]
        panels.append(
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "xscale": ax.get_xscale(),
                "xlim": _round(ax.get_xlim()),
                "ylim": _round(ax.get_ylim()),
                "xticks": _round(ax.get_xticks()),
                "xticklabels": [t.get_text() for t in ax.get_xticklabels()],
                "texts": [t.get_text() for t in ax.texts if t.get_visible()],
                "artists": [[type(a).__name__, _points(a)] for a in artists],
            }
        )
    legends = [[t.get_text() for t in leg.get_texts()] for leg in fig.legends]
    return {"panels": panels, "legends": legends}


def drawn(root: Path, out: Path) -> dict:
    """Analyse and draw `figure_study`'s records under `root` into `out` (one process, as `make figures` draws one
    study), keeping each figure open long enough to read it: {figure name: drawn_data}."""
    import matplotlib.pyplot as plt

    from loaderbench.analysis.figures import style
    from loaderbench.analysis.figures.draw_all import process_all
    from loaderbench.analysis.table.records import load_records

    shown: dict[str, dict] = {}
    real_png = style._write_png

    def write_png(fig, path, *args, **kwargs):  # every figure's PNG is written by style.save through this
        real_png(fig, path, *args, **kwargs)
        shown[Path(path).stem] = drawn_data(fig)

    style._write_png = write_png
    try:
        df, _ = load_records(root)
        process_all(df, out, jobs=1, use_cache=False)
    finally:
        style._write_png = real_png
        plt.close("all")
    return shown


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        figure_study(Path(tmp) / "records")
        data = drawn(Path(tmp) / "records", Path(tmp) / "figures")
    Path(sys.argv[1]).write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"{len(data)} figures: {', '.join(sorted(data))}")

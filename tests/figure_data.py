"""What a figure shows, as data: per panel its title, labels, limits, ticks, texts and the points of every line,
marker collection and segment collection drawn (rounded to 6 significant digits), never its pixels.

tests/figure_data.json holds this for every figure of the study `figure_study` writes, captured from the drawing
code as it was before the drawing was made faster; tests/test_draw_speed.py checks that the figures drawn today
show the same data. To capture it again (only when a figure is meant to change):

    python tests/figure_data.py tests/figure_data.json

tests/question_figure_data.json holds the same, with how each mark is drawn (styled_data), for each question's
figure drawn from its table in tests/test_questions.py, captured before the figures were declared as kinds
(loaderbench.analysis.figures.kinds); tests/test_figures.py checks it. To capture it again:

    python tests/figure_data.py --questions tests/question_figure_data.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from matplotlib.collections import Collection, LineCollection
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D

from loaderbench.fake_records.studies import study_cells, study_records, write_records

STUDY = "drawn"
FIXTURE = Path(__file__).with_name("figure_data.json")
QUESTION_FIXTURE = Path(__file__).with_name("question_figure_data.json")


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


def differences(want, have, where: str = "") -> list[str]:
    """Where two drawn_data trees differ (the first few places), to name them in a failure."""
    if isinstance(want, dict) and isinstance(have, dict):
        out = [f"{where}/{k}: missing" for k in want if k not in have] + [
            f"{where}/{k}: new" for k in have if k not in want
        ]
        for k in want:
            if k in have:
                out += differences(want[k], have[k], f"{where}/{k}")
        return out
    if isinstance(want, list) and isinstance(have, list):
        if len(want) != len(have):
            return [f"{where}: {len(want)} items before, {len(have)} now"]
        return [d for i, (w, h) in enumerate(zip(want, have)) for d in differences(w, h, f"{where}[{i}]")]
    return [] if want == have else [f"{where}: {want!r} before, {have!r} now"]


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


def _style(artist) -> list:
    """How a line or a collection is drawn: its colours, line style, marker and marker size."""
    if isinstance(artist, Line2D):
        return [
            _round(to_rgba(artist.get_color())),
            str(artist.get_linestyle()),
            str(artist.get_marker()),
            _round([artist.get_markersize()]),
        ]
    return [_round(np.asarray(artist.get_facecolor())), _round(np.asarray(artist.get_edgecolor()))]


def styled_data(fig) -> dict:
    """drawn_data with how each artist is drawn, what each legend entry looks like and the figure's own texts; each
    panel's artists as a sorted list of (kind, style, points), lines of one style merged, so that the same marks
    drawn in another order or split otherwise read the same."""
    data = drawn_data(fig)
    for ax, panel in zip([a for a in fig.axes if a.get_visible()], data["panels"]):
        merged: dict[str, list] = {}
        for a in ax.get_children():
            if isinstance(a, (Line2D, Collection)) and a.get_visible():
                key = json.dumps([type(a).__name__, _style(a)])
                pts = _points(a)
                if isinstance(a, Line2D) and str(a.get_linestyle()) in ("None", " ", ""):
                    pts = sorted(zip(pts[::2], pts[1::2]), key=repr)  # markers alone: the order is not seen
                    merged.setdefault(key, []).extend(pts)
                else:
                    merged.setdefault(key + json.dumps(pts), [])
        panel["artists"] = sorted([k, sorted(v, key=repr)] for k, v in merged.items())
        panel["texts"] = sorted(panel["texts"])
        panel["yscale"] = ax.get_yscale()
        panel["yticklabels"] = [t.get_text() for t in ax.get_yticklabels()]
    data["legend_styles"] = [[_style(h) for h in leg.legend_handles if h is not None] for leg in fig.legends]
    data["texts"] = [t.get_text() for t in fig.texts]
    return data


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


def question_tables() -> dict:
    """{name: (study, its records)}: each question's table in tests/test_questions.py, and the records of the
    other figures a question draws (the persistence study's state figure, the sharing-size switch figure, the
    shm-size leak figure)."""
    from loaderbench.fake_records.questions import sharing_switch_table, state_table
    from tests.test_questions import TABLES
    from tests.test_shm_size import _leaks

    held = {(True, False): 60.0, (True, True): 120.0, (False, False): 60.0, (False, True): 62.0}
    fd, fs = "file_descriptor", "file_system"
    return {q: (q, table) for q, table in TABLES.items()} | {
        "persistent-state": ("persistence-state", lambda: state_table({True: 192, False: 0}, held)),
        "sharing-switch": ("sharing-size-switch", lambda: sharing_switch_table([fd, fd, fd], [fd, fs, fs])),
        "segments-left": (
            "shm-size-leaks",
            lambda: _leaks({("none", fs): 0, ("kill_self", fs): 3, ("kill_self", fd): 0}),
        ),
    }


def questions_drawn(out: Path, only: set[str] | None = None) -> dict:
    """Draw each of question_tables' figures (those named in `only`, if given) into `out`: {name: styled_data}."""
    import matplotlib.pyplot as plt

    from loaderbench.analysis.figures import questions, style

    shown: dict[str, dict] = {}
    real_png = style._write_png

    def write_png(fig, path, *args, **kwargs):
        real_png(fig, path, *args, **kwargs)
        shown[current] = styled_data(fig)

    style._write_png = write_png
    try:
        for current, (study, table) in question_tables().items():
            if only is None or current in only:
                questions.draw_question_figures(table(), study, out / current)
    finally:
        style._write_png = real_png
        plt.close("all")
    return shown


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        if sys.argv[1:2] == ["--questions"]:
            data = questions_drawn(Path(tmp))
            target = Path(sys.argv[2])
        else:
            figure_study(Path(tmp) / "records")
            data = drawn(Path(tmp) / "records", Path(tmp) / "figures")
            target = Path(sys.argv[1])
    target.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    print(f"{len(data)} figures: {', '.join(sorted(data))}")

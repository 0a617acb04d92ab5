"""docs/findings.md's GPU node blocks: the tutorial's ladder against its published speed-ups, and how many workers
and which copies keep a GPU fed (`gpu-feed`). Numbers as in loaderbench.analysis.findings.common."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.findings.common import STAR, median_of, ratio_text, study_rows, verdict_table
from loaderbench.analysis.questions.gpu_feed import HOST_BLOCKED
from loaderbench.analysis.questions.ladder import PUBLISHED
from loaderbench.analysis.report.layout import md_table
from loaderbench.analysis.table.derive import RUNGS, copies_non_blocking, ladder_rung
from loaderbench.analysis.table.records import is_true, ok_rows
from loaderbench.analysis.text import axis_text


def ladder_rungs(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    rows = ok_rows(study_rows(frames[0], "ladder")).copy()
    rows["rung"] = ladder_rung(rows)
    base = rows[rows["rung"] == "baseline"]
    metric = "end_to_end_samples_per_s"
    out, previous = [], None
    for rung in RUNGS:
        this = rows[rows["rung"] == rung]
        if this.empty:
            continue
        out.append(
            {
                "rung": rung,
                "end-to-end samples/s": median_of(this, metric, star=True),
                "over the baseline": "1" if rung == "baseline" else ratio_text(base, this, metric),
                "published": "1" if rung == "baseline" else f"{PUBLISHED[rung]:g}x",
                "over the rung before": "–" if previous is None else ratio_text(previous, this, metric),
            }
        )
        previous = this
    return f"{md_table(pd.DataFrame(out))}\n\n{STAR}\n\n{verdict_table(frames[0], ('ladder',), carried_only=True)}"


def gpu_feed_cells(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    every = study_rows(frames[0], "gpu-feed")
    rows, control = every[copies_non_blocking(every)], every[~copies_non_blocking(every)]
    out = []
    keys = ["model", "cores", "num_workers", "pin_memory"]
    for key, cell in rows.groupby(keys, sort=True):
        out.append(
            {
                **{k: axis_text(v) for k, v in zip(keys, key)},
                "ok": f"{int((cell['status'] == 'ok').sum())}/{len(cell)}",
                "samples/s": median_of(cell, "samples_per_s", star=True),
                "AU": median_of(cell, "accelerator_busy_fraction"),
                "H2D GB/s": median_of(cell, "h2d_gbps"),
            }
        )
    pins = []
    ok = ok_rows(rows)
    most = ok["cores"].max()
    for (model, n), cell in ok[ok["cores"] == most].groupby(["model", "num_workers"], sort=True):
        pinned, plain = cell[cell["pin_memory"].map(is_true)], cell[~cell["pin_memory"].map(is_true)]
        if pinned.empty or plain.empty:
            continue
        pins.append(
            {
                "model": model,
                "num_workers": int(n),
                "samples/s pinned / not": ratio_text(plain, pinned),
                "AU pinned, not": f"{median_of(pinned, 'accelerator_busy_fraction')}, "
                f"{median_of(plain, 'accelerator_busy_fraction')}",
            }
        )
    return (
        f"Per cell, the median over its ok repetitions (ok: of all), copies non_blocking:\n\n"
        f"{md_table(pd.DataFrame(out))}\n\n{STAR}\n\n"
        f"Pinned over not pinned on {int(most)} cores:\n\n{md_table(pd.DataFrame(pins))}\n\n"
        f"{_copies(every[every['pin_memory'].map(is_true)], control)}"
        f"{verdict_table(frames[0], ('gpu-feed',), carried_only=True)}"
    )


def _copies(pinned: pd.DataFrame, control: pd.DataFrame) -> str:
    """Where there are blocking-copy control cells: the host's time in the copy calls over the copies' time on the
    device, non_blocking against blocking, per pinned cell that has both ("" where there are none)."""
    if control.empty:
        return ""
    out = []
    nb = copies_non_blocking(pinned)
    for (model, cores, n), cell in pinned.groupby(["model", "cores", "num_workers"], sort=True):
        free, blocked = cell[nb[cell.index]], cell[~nb[cell.index]]
        if free.empty or blocked.empty:
            continue
        out.append(
            {
                "model": model,
                "cores": int(cores),
                "num_workers": int(n),
                "host in copy / copy, non_blocking": median_of(free, HOST_BLOCKED),
                "blocking": median_of(blocked, HOST_BLOCKED),
                "samples/s non_blocking / blocking": ratio_text(blocked, free),
            }
        )
    return (
        "Pinned copies, non_blocking against blocking (the host's time inside the copy calls over the copies' time "
        f"on the device):\n\n{md_table(pd.DataFrame(out))}\n\n"
    )

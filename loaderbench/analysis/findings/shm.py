"""docs/findings.md's shared-memory blocks: how much /dev/shm a setting needs (the `shm-size` and `shm-size-leaks`
studies) and what each sharing strategy costs per tensor by size (`sharing-size`). Numbers as in
loaderbench.analysis.findings.common."""

from __future__ import annotations

import numpy as np
import pandas as pd

from loaderbench.analysis.findings.common import study_rows, verdict_table
from loaderbench.analysis.questions.sharing_size import STRATEGIES, by_size, kib
from loaderbench.analysis.questions.shm_size import SWEEPS, cell_states, leak_rows
from loaderbench.analysis.report.layout import md_table


def shm_size_block(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    """Per setting: one batch (measured), the /dev/shm peak at the largest size, the size computed from the batch
    (what `docker run --shm-size` needs), and whether each smaller size ran; then what a killed worker left."""
    states = cell_states(study_rows(frames[0], "shm-size"))
    if states.empty:
        return "No cells with their own /dev/shm in these records."
    sizes = sorted(states["shm_size_mb"].unique())
    out = []
    for key, grp in states.groupby(list(SWEEPS), sort=True):
        top = grp[grp["shm_size_mb"] == sizes[-1]]
        line = dict(zip(("workers", "prefetch_factor", "batch_size"), (int(k) for k in key)))
        peak = top["peak_mb"].dropna()
        need = grp["needed_mb"].dropna()
        line["peak MiB"] = f"{peak.iloc[0]:.1f}" if len(peak) else "–"
        line["docker --shm-size"] = f"{need.max():.0f}m" if len(need) else "–"
        for size in sizes[:-1]:
            at = grp[grp["shm_size_mb"] == size]
            line[f"{size} MiB"] = at["state"].iloc[0].replace("short", "**fails**") if len(at) else "–"
        out.append(line)
    leaks = leak_rows(study_rows(frames[0], "shm-size-leaks"))
    left = []
    for (fault, strategy), grp in leaks.groupby(["fault", "sharing_strategy"], sort=True):
        n = pd.to_numeric(grp["shm_left_segments"], errors="coerce")
        left.append(
            {
                "worker": "killed" if fault != "none" else "healthy",
                "sharing_strategy": strategy,
                "repetitions that left segments": f"{int((n > 0).sum())} of {len(n)}",
                "segments left (most)": int(n.max()) if len(n) else 0,
            }
        )
    return (
        f"Per setting: the peak `/dev/shm` use of the cell alone at {sizes[-1]} MiB (the largest of its repetitions), "
        "the size computed from one measured batch (`prefetch_factor` batches per worker and the main process's "
        "two, 25% margin): what `docker run --shm-size` needs; and whether each smaller `/dev/shm` ran (ok) or "
        f"failed in every repetition:\n\n{md_table(pd.DataFrame(out))}\n\n"
        + (
            "Segments left in the cell's own `/dev/shm` once its processes had ended:\n\n"
            f"{md_table(pd.DataFrame(left))}\n\n"
            if left
            else ""
        )
        + verdict_table(frames[0], ("shm-size",))
    )


def sharing_size_block(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    """Per tensor size: each strategy's median time per tensor, and the ratio of their rates."""
    out = []
    for kb, fd, fs in by_size(study_rows(frames[0], "sharing-size")):
        med = {s: float(np.median(v)) for s, v in zip(STRATEGIES, (fd, fs))}
        out.append(
            {
                "tensor": kib(kb),
                **{f"{s} µs per tensor": f"{1e6 / med[s]:,.1f}" for s in STRATEGIES},
                "file_system / file_descriptor samples/s": f"{med['file_system'] / med['file_descriptor']:.2f}x",
            }
        )
    table = md_table(pd.DataFrame(out)) if out else "No tensor sizes measured under both strategies."
    return f"Medians over the ok repetitions, one tensor per batch from 2 workers:\n\n{table}\n\n" + verdict_table(
        frames[0], ("sharing-size",)
    )

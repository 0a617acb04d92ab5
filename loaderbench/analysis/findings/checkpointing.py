"""docs/findings.md's "which snapshot_every_n_steps?" block, rendered from the `checkpointing` study's records:
what snapshots every n steps cost in throughput, and what a resume after a kill replays, how soon it delivers
and whether it delivers every sample once. Numbers as in loaderbench.analysis.findings.blocks: medians over a
cell's ok repetitions, ratios with their distribution-free intervals, verdicts from the claims table."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.findings.common import cells_where, median_of, ratio_text, study_rows, verdict_table
from loaderbench.analysis.questions.checkpointing import resume_rows, throughput_rows
from loaderbench.analysis.report.layout import md_table
from loaderbench.analysis.table.records import col, is_true, ok_rows


def _snapshot_values(rows: pd.DataFrame) -> list[int]:
    return sorted(int(n) for n in rows["snapshot_every_n_steps"].dropna().unique() if n > 0)


def cost_table(study: pd.DataFrame) -> str:
    ok = throughput_rows(study)
    ns = _snapshot_values(ok)
    out = []
    for (workload, cores, nw), grp in ok.groupby(["workload", "cores", "num_workers"], sort=True):
        plain = cells_where(grp, snapshot_every_n_steps=0)
        line = {"workload": workload, "cores": int(cores), "num_workers": int(nw)}
        line["plain samples/s"] = median_of(plain, "samples_per_s", star=True)
        for n in ns:
            cells = cells_where(grp, snapshot_every_n_steps=n)
            line[f"n = {n}"] = ratio_text(plain, cells) if len(cells) else "–"
        out.append(line)
    return md_table(pd.DataFrame(out))


def recovery_table(study: pd.DataFrame) -> str:
    res = resume_rows(study)
    steps = sorted(int(a) for a in res["resume_at"].dropna().unique())
    out = []
    for (nw, n), grp in res.groupby(["num_workers", "snapshot_every_n_steps"], sort=True):
        ok = ok_rows(grp)
        line = {"num_workers": int(nw), "snapshot_every_n_steps": int(n)}
        for at in steps:
            line[f"replayed at step {at}"] = median_of(cells_where(grp, resume_at=at), "resume_replayed_samples")
        for at in steps:
            line[f"restart to first batch at step {at}, s"] = median_of(
                cells_where(grp, resume_at=at), "resume_first_batch_s", star=True
            )
        once = sum(
            is_true(a) and is_true(b) for a, b in zip(col(ok, "resume_exactly_once"), col(ok, "resume_same_order"))
        )
        line["exactly once, in order"] = f"{once} of {len(grp)}"
        out.append(line)
    return md_table(pd.DataFrame(out))


def which_n(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    study = study_rows(frames[0], "checkpointing")
    reps = study.groupby("cell_id")["repetition"].nunique().max()
    batch = ", ".join(str(int(b)) for b in sorted(study["batch_size"].dropna().unique()))
    return (
        f"Throughput with snapshots every n steps over the plain DataLoader's, uninterrupted (medians over {reps} "
        f"repetitions, ratio intervals at their real coverage; below 1: the snapshots cost):\n\n"
        f"{cost_table(study)}\n\n"
        f"A resume after a SIGKILL (batch size {batch}): samples the resumed process loaded only to fast-forward, "
        f"its time from the restart to its first batch (building the dataset and loader, loading the state, the "
        f"replay), and the resumed epochs that delivered the uninterrupted epoch's samples exactly once and in "
        f"order:\n\n{recovery_table(study)}\n\n"
        f"{verdict_table(frames[0], ('checkpointing',))}"
    )

"""docs/findings.md's "threads or processes" block, rendered from the `threads` study's records: per workload and
core count, the main process against the best thread and process cells, their memory and first batch. Numbers as
in loaderbench.analysis.findings.common."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.findings.common import STAR, cells_where, median_of, ratio_text, study_rows, verdict_table
from loaderbench.analysis.report.layout import md_table
from loaderbench.analysis.table.derive import MIB
from loaderbench.analysis.table.records import col, ok_rows


def threads_block(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    """Per workload and core count: the main process, the best thread and process cells (throughput, PSS), the
    best thread over the best process with its interval, and the first batch at the most workers both ran."""
    study = ok_rows(study_rows(frames[0], "threads"))
    study = study.assign(worker_method=col(study, "worker_method", None))
    out = []
    for (workload, cores), grp in study.groupby(["workload", "cores"], sort=True):
        main = grp[grp["num_workers"] == 0]
        best = {}
        for method in ("thread", "process"):
            mine = grp[grp["worker_method"] == method]
            med = mine.groupby("num_workers")["samples_per_s"].median()
            if len(med):
                best[method] = mine[mine["num_workers"] == med.idxmax()]
        if len(best) < 2:
            continue
        t, p = best["thread"], best["process"]
        ran = [set(grp.loc[grp["worker_method"] == m, "num_workers"]) for m in ("thread", "process")]
        far = max(ran[0] & ran[1], default=None)  # the most workers both kinds ran
        ttfb = (
            f"({far}) "
            + ", ".join(
                median_of(cells_where(grp, worker_method=m, num_workers=far), "time_to_first_batch_s", 1e-3)
                for m in ("thread", "process")
            )
            if far is not None
            else "–"
        )
        out.append(
            {
                "workload": workload,
                "cores": int(cores),
                "main process samples/s": median_of(main, "samples_per_s", star=True),
                "best threads (w): samples/s": f"({int(t['num_workers'].iloc[0])}) "
                f"{median_of(t, 'samples_per_s', star=True)}",
                "best processes (w): samples/s": f"({int(p['num_workers'].iloc[0])}) "
                f"{median_of(p, 'samples_per_s', star=True)}",
                "threads / processes": ratio_text(p, t),
                "PSS MiB threads, processes": f"{median_of(t, 'pss_peak_bytes', MIB)}, "
                f"{median_of(p, 'pss_peak_bytes', MIB)}",
                "first batch ms (at w): threads, processes": ttfb,
            }
        )
    reps = study.groupby("cell_id")["repetition"].nunique().max() if len(study) else 0
    return (
        f"The same torchdata.nodes pipeline with thread and with process workers (medians over {reps} repetitions; "
        f"best: the num_workers of highest median; PSS of the cell, main process and workers together):\n\n"
        f"{md_table(pd.DataFrame(out))}\n\n{STAR}\n\n{verdict_table(frames[0], ('threads',))}"
    )

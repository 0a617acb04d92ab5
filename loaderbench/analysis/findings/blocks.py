"""The blocks of docs/findings.md (loaderbench.analysis.findings.page puts them between their markers): each one a
table of numbers, or of verdicts, rendered from one or two machines' shipped records.

Every number is a median over a cell's ok repetitions (a star marks a cell whose spread, IQR over the median,
is over 10%), a ratio of two cells' medians with its distribution-free interval, or a verdict of the claims
table as `make figures` decides it from the same records. Nothing here is measured or written by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from loaderbench.analysis.claims import CLAIMS, numbered
from loaderbench.analysis.claims.claims_table import apart
from loaderbench.analysis.findings.checkpointing import which_n
from loaderbench.analysis.findings.common import (
    STAR,
    cells_where,
    counts_text,
    decided,
    median_of,
    median_text,
    metric_values,
    ratio_text,
    study_rows,
    verdict_table,
)
from loaderbench.analysis.findings.gpu import gpu_feed_cells, ladder_rungs
from loaderbench.analysis.findings.provenance import conditions
from loaderbench.analysis.findings.reference_records import (
    code_line,
    machine_line,
    repetitions_line,
    software_line,
    wall_minutes,
)
from loaderbench.analysis.findings.shm import sharing_size_block, shm_size_block
from loaderbench.analysis.findings.threads import threads_block
from loaderbench.analysis.findings.verdict_history import flips_by_number
from loaderbench.analysis.questions import QUESTIONS
from loaderbench.analysis.questions.cheap_work import crossovers, inmem_rows
from loaderbench.analysis.report.layout import md_table
from loaderbench.analysis.rules.catalogue import SOURCES, WHERE
from loaderbench.analysis.rules.claim import GPU_REFERENCE, H200_REFERENCE, Metric
from loaderbench.analysis.table.derive import MIB, start_method_label, with_growth
from loaderbench.analysis.table.environment import env_one
from loaderbench.analysis.table.records import AXIS_COLUMNS, col
from loaderbench.analysis.text import axis_text, fmt_num, size_text


def studies_of(reference: str | None) -> tuple[str, ...]:
    """The studies that feed the questions whose records come from `reference` (None: this machine's): those with
    a table of cells declared, else the question's own study."""
    return tuple(dict.fromkeys(s for q in QUESTIONS if q.reference == reference for s in (q.tables or (q.name,))))


@dataclass(frozen=True)
class Block:
    """A generated block: the studies it reads of each machine its marker names, and how it renders."""

    name: str
    needs: tuple[tuple[str, ...], ...]  # per machine; () reads whatever studies it has (but some)
    takes: str  # what each machine folder of the marker is, in words
    render: Callable[[list[pd.DataFrame], list[dict[str, str]]], str]


# --------------------------------------------------------------------------------------------------------
# the machines


def where(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    cpu, *gpus = frames
    every = numbered(decided(apart(frames)))
    rows = [
        ("machine", machine_line(cpu)),
        ("software", software_line(cpu)),
        ("repetitions", repetitions_line(cpu)),
        ("code", code_line(cpu)),
        ("claims", f"{len(every)} numbered claims, decided from the records of every machine: {counts_text(every)}"),
        *[("GPU node", f"{machine_line(gpu)}; {software_line(gpu)}; code: {code_line(gpu)}") for gpu in gpus],
    ]
    return md_table(pd.DataFrame(rows, columns=["", " "]))


def study_times(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    df = frames[0]
    out = []
    for study, rows in df.groupby("study", sort=True):
        reps = rows.groupby("cell_id")["repetition"].nunique()
        out.append(
            {
                "study": f"`{study}`",
                "cells x repetitions": f"{rows['cell_id'].nunique()} x "
                + (f"{reps.max()}" if reps.min() == reps.max() else f"{reps.min()}-{reps.max()}"),
                "records": len(rows),
                "wall time": f"{wall_minutes(rows):.1f} min",
                "conditions": conditions(rows),
                "code": code_line(rows),
            }
        )
    gpu = env_one(df, "cuda_device")
    where = gpu if gpu not in ("?", "None") else env_one(df, "cpu_model")
    return f"On {where}:\n\n{md_table(pd.DataFrame(out))}"


# --------------------------------------------------------------------------------------------------------
# the quick study


def _workload_label(rows: pd.DataFrame) -> pd.Series:
    w = col(rows, "workload").astype(str)
    sleep = pd.to_numeric(col(rows, "sleep_ms"), errors="coerce")
    lab = w.where(w != "sleep", "sleep (" + sleep.map(lambda v: fmt_num(v)) + " ms/sample)")
    return lab.where(w != "jpeg", "jpeg (PIL, full pipeline)")


def quick_throughput(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    q = study_rows(frames[0], "quick")
    q = q[col(q, "jpeg_stage").astype(str) != "decode"].copy()
    q["label"] = _workload_label(q)
    workers = sorted(int(n) for n in q["num_workers"].dropna().unique())
    out = []
    for (label, cores), rows in q.groupby(["label", "cores"], sort=False):
        line = {"samples/s": f"{label}, {int(cores)} core{'s' if cores > 1 else ''}"}
        for n in workers:
            line[str(n)] = median_of(rows[rows["num_workers"] == n], "samples_per_s", star=True)
        out.append(line)
    table = pd.DataFrame(out).rename(columns={"samples/s": "num_workers"})
    reps = q.groupby("cell_id")["repetition"].nunique().max()
    return f"Medians over {reps} repetitions, samples/s:\n\n{md_table(table)}\n\n{STAR}"


def quick_measures(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    q = study_rows(frames[0], "quick")
    full = q[col(q, "jpeg_stage").astype(str) != "decode"]
    most = int(full["num_workers"].max())
    reps = q.groupby("cell_id")["repetition"].nunique().max()
    rows = [
        (
            f"run time of the quick study ({q['cell_id'].nunique()} cells x {reps} repetitions)",
            f"{wall_minutes(q):.1f} min",
        )
    ]
    decode = q[col(q, "jpeg_stage").astype(str) == "decode"]
    if not decode.empty:
        per = [
            f"{median_of(r, 'samples_per_s')} ({int(c)} core{'s' if c > 1 else ''})" for c, r in decode.groupby("cores")
        ]
        rows.append(("JPEG decode only, 0 workers, samples/s", ", ".join(per)))
    for workload in ("sleep", "cpu"):
        w = full[full["workload"] == workload]
        for cores, r in w.groupby("cores"):
            rows.append(
                (
                    f"`{workload}` on {int(cores)} core{'s' if cores > 1 else ''}: {most} workers over 0 workers",
                    ratio_text(cells_where(r, num_workers=0), cells_where(r, num_workers=most)),
                )
            )
    cpu2 = cells_where(full, workload="cpu", cores=2)
    if not cpu2.empty:
        med = cpu2.groupby("num_workers")["samples_per_s"].median()
        zero = med.get(0, np.nan)
        rows.append(
            (
                "`cpu` on 2 cores: the best median over 2 x the 0-worker rate (the two cores' ceiling)",
                f"{fmt_num(med.max())} of {fmt_num(2 * zero)} ({med.max() / (2 * zero):.2f}) "
                f"at {int(med.idxmax())} workers",
            )
        )
    jpeg2 = cells_where(full, workload="jpeg", cores=2)
    if not jpeg2.empty:
        at = cells_where(jpeg2, num_workers=2)
        for n in (4, 8):
            if n in set(jpeg2["num_workers"]):
                rows.append(
                    (
                        f"JPEG on 2 cores: {n} workers ({n // 2} x cores) over 2 (= cores)",
                        ratio_text(at, cells_where(jpeg2, num_workers=n)),
                    )
                )
        one, top = cells_where(jpeg2, num_workers=1), cells_where(jpeg2, num_workers=most)
        rows.append(
            (
                f"JPEG on 2 cores, 1 -> {most} workers: USS of the cell (main + workers), MiB",
                f"{median_of(one, 'uss_peak_bytes', MIB)} -> {median_of(top, 'uss_peak_bytes', MIB)}",
            )
        )
        rows.append(
            (
                f"JPEG on 2 cores, 1 -> {most} workers: time to the first batch, s",
                f"{median_of(one, 'time_to_first_batch_s')} -> {median_of(top, 'time_to_first_batch_s')}",
            )
        )
    return md_table(pd.DataFrame(rows, columns=["measure", "value"]))


# --------------------------------------------------------------------------------------------------------
# a claim study: its cells' medians, then its verdicts


#: per study, the metrics of its table of cells, as its question declares them
STUDY_METRICS: dict[str, tuple[Metric, ...]] = {s: m for q in QUESTIONS for s, m in q.tables.items()}


def _prepared(study: str, rows: pd.DataFrame) -> pd.DataFrame:
    rows = rows.copy()
    if study == "start-method":
        rows["start_method"] = start_method_label(rows)
        rows = rows.drop(columns=["forkserver_preload"], errors="ignore")
    if study.startswith("cow-memory"):
        grown = with_growth(rows)[["path", "end_mib_per_worker", "growth_mib_per_worker"]]
        rows = rows.merge(grown, on="path", how="left")
    return rows


def study_cells_md(study: str, rows: pd.DataFrame) -> str:
    """One line per cell: the axes the study varies, ok repetitions of all, and each metric's median."""
    rows = _prepared(study, rows)
    axes = [a for a in AXIS_COLUMNS if a in rows and rows[a].astype(str).nunique() > 1]
    out, order = [], []
    for _, cell in rows.groupby("cell_id", sort=False):
        first = cell.iloc[0]
        order.append(tuple((pd.isna(first[a]), str(type(first[a])), first[a]) for a in axes))
        line = {a: axis_text(first[a]) for a in axes}
        line["ok"] = f"{int((cell['status'] == 'ok').sum())}/{len(cell)}"
        for i, m in enumerate(STUDY_METRICS[study]):
            x = metric_values(cell, m.column)
            if m.agg == "max":
                line[m.header] = fmt_num(x.max() / m.scale) if len(x) else "–"
            else:
                line[m.header] = median_text(x, m.scale, star=i == 0)
        out.append(line)
    return md_table(pd.DataFrame([out[i] for i in sorted(range(len(out)), key=lambda i: order[i])]))


#: studies that measure some claims of a question named otherwise: (the question, the claims they show); the DDP
#: study's side-by-side cells decide the side-by-side rule too
PART_STUDIES = {
    "oversubscription-ddp": (
        "oversubscription",
        tuple(c.claim for c in CLAIMS if c.study == "oversubscription-ddp")
        + ("with R loaders side by side (DDP-like), R x W = cores beats R x cores workers",),
    )
}


def study_block(study: str) -> Callable[[list[pd.DataFrame], list[dict[str, str]]], str]:
    def render(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
        rows = study_rows(frames[0], study)
        reps = rows.groupby("cell_id")["repetition"].nunique().max()
        exact = STUDY_METRICS[study][0].agg == "max"
        head = (
            f"Per cell of {reps} repetitions, the largest fraction of repeated draws in any of them"
            if exact
            else f"Per cell of {reps} repetitions, the median over the ok ones"
        )
        parts = [f"{head} (ok: ok repetitions of all):", study_cells_md(study, rows)]
        parts += [] if exact else [STAR]
        # each claim study is named for the question it answers, or measures some of its claims
        question, picked = PART_STUDIES.get(study, (study, ()))
        return "\n\n".join([*parts, verdict_table(frames[0], (question,), claims=picked)])

    return render


# --------------------------------------------------------------------------------------------------------
# every numbered claim, and the cheap-work crossover


def all_claims(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    """The numbered claims: the verdict of their rows in the source's setting, what the suite's added settings
    found, from the records of every machine (a study measured on several machines decides on each)."""
    table = decided(apart(frames))
    index, flipped = numbered(table), flips_by_number(notes, table)
    shown = pd.DataFrame(
        {
            "#": index["number"],
            "claim": index["claim"],
            "source": index["source"],
            "where": index["where"],
            "verdict": [f"**{v}**{flipped.get(n, '')}" for n, v in zip(index["number"], index["verdict"])],
            "rules": index["rows"],
            "in the settings the suite added": index["elsewhere"],
        }
    )
    legend = "; ".join(f"{k}: {v}" for k, v in {**SOURCES, **WHERE}.items())
    return f"{len(index)} claims: {counts_text(index)}.\n\n{md_table(shown)}\n\nSources and where: {legend}."


def cheap_work(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    """Per core count and sample size: the best num_workers' throughput over 0 workers' at each per-sample cost
    (medians), and the crossover the claim's rule finds."""
    study = study_rows(frames[0], "cheap-work")
    rows = inmem_rows(study)
    found = {(c.cores, c.sample_bytes): c for c in crossovers(rows)}
    costs = sorted(rows["work_us"].dropna().unique())
    out = []
    for (cores, size), grp in rows.groupby(["cores", "sample_bytes"], sort=True):
        line = {"cores": int(cores), "sample": size_text(size)}
        for work in costs:  # every cost of the grid, in order; "–" where this core count did not measure it
            med = grp[grp["work_us"] == work].groupby("num_workers")["samples_per_s"].median()
            zero, best = med.get(0, np.nan), med.drop(0, errors="ignore").max()
            ratio = best / zero if len(med) else np.nan
            line[f"{fmt_num(work)} µs"] = f"{ratio:.2f}x" if np.isfinite(ratio) else "–"
        c = found.get((int(cores), int(size)))
        line["crossover"] = c.text() if c else "–"
        out.append(line)
    reps = study.groupby("cell_id")["repetition"].nunique().max()
    return (
        f"The best num_workers' samples/s over 0 workers' at each CPU cost per sample (medians over {reps} "
        f"repetitions; below 1: 0 workers are faster):\n\n{md_table(pd.DataFrame(out))}\n\n"
        f"{verdict_table(frames[0], ('cheap-work',))}"
    )


def lazy_block(frames: list[pd.DataFrame], notes: list[dict[str, str]]) -> str:
    """The eager and lazy datasets' cells; their claim (#24) is in the cow-memory block's verdicts."""
    rows = study_rows(frames[0], "cow-memory-lazy")
    reps = rows.groupby("cell_id")["repetition"].nunique().max()
    return (
        f"Per cell of {reps} repetitions, the median over the ok ones (ok: ok repetitions of all):\n\n"
        f"{study_cells_md('cow-memory-lazy', rows)}\n\n{STAR}"
    )


# --------------------------------------------------------------------------------------------------------

CPU = "the CPU machine"
GPU = "a GPU node"
H200 = "the H200 node"
#: what each machine folder of a marker is, by where its question's records come from
MACHINE = {None: CPU, GPU_REFERENCE: GPU, H200_REFERENCE: H200}
CPU_STUDIES, GPU_STUDIES, H200_STUDIES = (studies_of(r) for r in MACHINE)
BLOCKS: dict[str, Block] = {
    b.name: b
    for b in [
        Block("where", (("quick", *CPU_STUDIES), GPU_STUDIES, H200_STUDIES), f"{CPU}, {GPU}, {H200}", where),
        Block("quick-throughput", (("quick",),), CPU, quick_throughput),
        Block("quick-measures", (("quick",),), CPU, quick_measures),
        Block("cheap-work", (("cheap-work",),), CPU, cheap_work),
        Block("shm-size", (("shm-size", "shm-size-leaks"),), CPU, shm_size_block),
        Block("cow-memory-lazy", (("cow-memory-lazy",),), CPU, lazy_block),
        Block("sharing-size", (("sharing-size", "sharing-size-switch"),), CPU, sharing_size_block),
        Block("threads", (("threads",),), CPU, threads_block),
        Block("checkpointing", (("checkpointing",),), CPU, which_n),
        Block("claims", ((), (), ()), f"{CPU}, {GPU}, {H200}", all_claims),
        Block("ladder", (("ladder",),), GPU, ladder_rungs),
        Block("gpu-feed", (("gpu-feed",),), GPU, gpu_feed_cells),
        Block("study-times", ((),), "any machine", study_times),
    ]
}
# every other study with a table of cells declared by its question: that table and the question's verdicts
BLOCKS.update(
    {s: Block(s, ((s,),), MACHINE[q.reference], study_block(s)) for q in QUESTIONS for s in q.tables if s not in BLOCKS}
)

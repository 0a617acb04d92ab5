"""CUDA in forked workers (claim #12), read off the `gpu-decode` study: its model is on the GPU before the
DataLoader starts its workers, and its nvjpeg cells decode on the GPU in whichever process loads, so in workers
those use CUDA in a child of a process that initialized it; its torchvision cells fork workers that never touch
CUDA. The same study measures what decoding on the GPU gives against CPU workers (docs/findings.md)."""

from __future__ import annotations

import re

import pandas as pd

from loaderbench.analysis.rules.claim import H200_REFERENCE, Metric, Question, missing
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURABLE, Outcome

#: the decoder that runs on the GPU in the process that loads the sample
GPU_DECODER = "nvjpeg"
#: start methods whose workers are not forked from the cell process
NOT_FORKED = ("spawn", "forkserver")
_NO_GPU = "no CUDA device"
#: how CUDA names its failure in a message: torch's own words, the runtime's error code or its text
_CUDA_ERROR = re.compile(r"Cannot re-initialize CUDA in forked subprocess|cuda\w*Error\w*|CUDA error: [^.(\n]+")


def _repetitions(rows: pd.DataFrame) -> str:
    ok = int((rows["status"] == "ok").sum())
    return f"{ok}/{len(rows)} ok"


def _failures(rows: pd.DataFrame) -> str:
    """The failed repetitions' kinds and the CUDA words of their messages, each said once."""
    failed = rows[rows["status"] != "ok"]
    seen: dict[str, None] = {}
    for kind, message in zip(col(failed, "error_kind").astype(str), col(failed, "error_message").astype(str)):
        named = _CUDA_ERROR.search(message)
        seen[f"{kind}: {named.group(0) if named else message[:100]}"] = None
    return "; ".join(seen)


def _median(rows: pd.DataFrame) -> str:
    x = pd.to_numeric(col(ok_rows(rows), "samples_per_s"), errors="coerce").dropna()
    return f", {x.median():.0f} samples/s" if len(x) else ""


def cuda_breaks_forked_workers(rows: pd.DataFrame) -> Outcome:
    """#12: with the model on the GPU first, every repetition of a cell whose forked workers use CUDA fails, and
    the same cell with workers not forked (spawn, forkserver) runs."""
    r = rows[(col(rows, "device").astype(str) == "cuda") & (pd.to_numeric(col(rows, "num_workers", 0)) > 0)]
    if r.empty:
        return missing("needs cells with workers and the model on the GPU (device = cuda)")
    if r["status"].ne("ok").all() and col(r, "error_message").astype(str).str.contains(_NO_GPU).all():
        return Outcome(NOT_MEASURABLE, f"no CUDA device where these ran: run {QUESTION.study_file} on a GPU node")
    cuda = r[col(r, "decoder").astype(str) == GPU_DECODER]
    method = col(cuda, "start_method").astype(str)
    forked, apart = cuda[method == "fork"], cuda[method.isin(NOT_FORKED)]
    if forked.empty or apart.empty:
        return missing(f"needs {GPU_DECODER} cells with forked and with spawned (or forkserver) workers")
    plain = r[(col(r, "decoder").astype(str) != GPU_DECODER) & (col(r, "start_method").astype(str) == "fork")]
    evidence = (
        f"{GPU_DECODER} in forked workers: {_repetitions(forked)} ({_failures(forked)}); in workers started by "
        f"{' and '.join(sorted(set(col(apart, 'start_method').astype(str))))}: {_repetitions(apart)}"
        f"{_median(apart)}"
    )
    if not plain.empty:
        evidence += f"; forked workers that decode on the CPU, after the same CUDA start: {_repetitions(plain)}"
    forked_ok, apart_ok = (forked["status"] == "ok").sum(), (apart["status"] == "ok").sum()
    if forked_ok:
        return Outcome(FAILS, evidence)
    if apart_ok == len(apart):
        return Outcome(HOLDS, evidence)
    return Outcome(INCONCLUSIVE, evidence + " (workers failed without fork too: not fork's doing alone)")


def _needs(rows: pd.DataFrame) -> bool:
    """Workers that decode on the GPU."""
    workers = pd.to_numeric(col(rows, "num_workers", 0), errors="coerce").fillna(0) > 0
    return "decoder" in rows and bool(((col(rows, "decoder").astype(str) == GPU_DECODER) & workers).any())


QUESTION = Question(
    "gpu-decode",
    ("decoder", "num_workers", "start_method", "model", "device", "cores", "batch_size", "pin_memory", "non_blocking"),
    _needs,
    reference=H200_REFERENCE,
    figure="loaderbench.analysis.figures.questions.gpu_decode:decoding_on_the_gpu_against_cpu_workers",
    tables={"gpu-decode": (Metric("samples_per_s", "samples/s"), Metric("accelerator_busy_fraction", "AU"))},
)
QUESTION.add(
    "CUDA initialized before fork breaks forked workers (those that use CUDA)",
    f"with the model on the GPU before the workers start: holds if every repetition of the cells whose forked "
    f"workers use CUDA ({GPU_DECODER} decoding) fails and every repetition of the same cells with "
    f"{' or '.join(NOT_FORKED)} workers runs; does not hold if a forked one runs; the forked workers that "
    "decode on the CPU are shown beside them (counted facts, no interval)",
    cuda_breaks_forked_workers,
    number=12,
)

"""The workloads a study may name, and what each one is: the one list of them. The study vocabulary
(loaderbench.schema.axes), validation, the runner's warm imports and the benchmarks all read it. Each entry names
the module under loaderbench.workloads that builds its dataset; nothing here imports it, or torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    name: str
    module: str  # under loaderbench.workloads
    summary: str  # what each sample costs
    reads_images: bool = False  # reads the study's [dataset]: the JPEG files
    image_batches: bool = False  # batches of (images, labels): a real model step can consume them
    self_test: bool = False  # tests the harness, measures nothing about loading
    users_dataset: bool = False  # the dataset is the user's own: the suite's extras and `batched` do not apply

    def load(self):
        return importlib.import_module(f"loaderbench.workloads.{self.module}")


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in [
        Workload("sleep", "sleep", "sleep_ms of blocking wait per sample (I/O-bound)"),
        Workload("cpu", "cpu", "cpu_work thousand pure-Python loop iterations per sample (CPU-bound)"),
        Workload("zlib", "zlib_work", "compress zlib_kb KiB per sample (CPU-bound, the GIL released)"),
        Workload(
            "jpeg",
            "jpeg",
            "decode (and augment) one JPEG of the [dataset] per sample",
            reads_images=True,
            image_batches=True,
        ),
        Workload(
            "tutorial",
            "tutorial",
            "the PyTorch data-loading tutorial's 3x224x224 samples, sleep_ms each",
            image_batches=True,
        ),
        Workload(
            "inmem",
            "inmem",
            "samples already in memory (sample_bytes each) after work_us of CPU work: cheap loading",
        ),
        Workload("rng", "rng", "draws from torch, NumPy and random, to count repeats across workers and epochs"),
        Workload(
            "fault", "fault", "a fault at sample fault_at (worker crash, hang, OOM...): a self-test", self_test=True
        ),
        Workload(
            "shards",
            "shards",
            "stream the [dataset] as WebDataset tar shards (an IterableDataset), decode each JPEG",
            reads_images=True,
        ),
        Workload(
            "custom",
            "custom",
            "your own dataset, made by the study's factory (loaderbench/workloads/factory.py)",
            users_dataset=True,
        ),
    ]
}

"""loaderbench.workloads.inmem: samples held in memory of the size asked for, handed out without allocating, each
after the CPU work asked for (counted on the thread's own CPU clock, so the bound below cannot fail by noise)."""

from __future__ import annotations

import time

import torch

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import build_dataset
from loaderbench.workloads.inmem import POOL, spend_cpu


def _cell(**axes) -> CellConfig:
    return CellConfig.of({"workload": "inmem", "warmup_batches": 1, "measure_batches": 1, "seed": 0, **axes})


def test_spend_cpu_keeps_the_thread_on_the_cpu_for_at_least_the_work_asked():
    for us in (0.0, 500.0, 3000.0):
        before = time.thread_time_ns()
        spend_cpu(us)
        assert time.thread_time_ns() - before >= us * 1000


def test_samples_are_in_memory_and_of_the_size_asked():
    ds = build_dataset(_cell(work_us=0.0, sample_bytes=150528), length=100).dataset
    x, label = ds[3]
    assert x.dtype == torch.uint8 and x.numel() == 150528 and label == 3
    assert ds[3][0] is ds[3 + POOL][0]  # handed out, not made: no allocation per sample
    batched = build_dataset(_cell(work_us=10.0, sample_bytes=16, batched=True), length=100).dataset
    items = batched.__getitems__([0, 1, 2])
    assert [t.numel() for t, _ in items] == [16, 16, 16] and [lab for _, lab in items] == [0, 1, 2]


def test_the_default_sample_is_a_few_bytes_of_labels():
    ds = build_dataset(_cell(), length=10).dataset
    assert ds[0][0].numel() == 16 and ds.work_us == 0.0

"""Workloads: what each sample costs. Each comes per-sample (`__getitem__`) and batched (`__getitems__`)."""

from __future__ import annotations

from typing import Any

from torch.utils.data import Dataset


def build_dataset(config: dict[str, Any], length: int, prepared=None) -> Dataset:
    """The dataset object a cell's DataLoader reads, from the cell's config, with its index, payload and
    straggler (suite.workloads.extras). `length` is the number of samples per epoch; `prepared` is the
    PreparedDataset (jpeg only)."""
    from suite.workloads.extras import with_extras

    return with_extras(_base_dataset(config, length, prepared), config)


def _base_dataset(config: dict[str, Any], length: int, prepared) -> Dataset:
    workload, batched = config["workload"], config["batched"]
    if workload == "sleep":
        from suite.workloads.sleep import BatchedSleepDataset, SleepDataset

        cls = BatchedSleepDataset if batched else SleepDataset
        return cls(length, config["sleep_ms"], config["sample_kb"], config["tensors_per_sample"])
    if workload == "cpu":
        from suite.workloads.cpu import BatchedCpuDataset, CpuDataset

        cls = BatchedCpuDataset if batched else CpuDataset
        return cls(length, config["cpu_work"], config["sample_kb"], config["tensors_per_sample"])
    if workload == "jpeg":
        from suite.workloads.jpeg import BatchedJpegDataset, JpegDataset

        if prepared is None:
            raise ValueError("the jpeg workload needs a prepared dataset")
        cls = BatchedJpegDataset if batched else JpegDataset
        return cls(length, prepared.root, prepared.files, prepared.labels, config["decoder"],
                   config.get("jpeg_stage") or "full")
    if workload == "tutorial":
        from suite.workloads.tutorial import BatchedTutorialDataset, TutorialDataset

        return (BatchedTutorialDataset if batched else TutorialDataset)(length, config["sleep_ms"])
    if workload == "rng":
        from suite.workloads.rng import BatchedRngDataset, RngDataset

        return (BatchedRngDataset if batched else RngDataset)(length)
    if workload == "fault":  # a self-test of the harness (suite/workloads/faulty.py), not a benchmark
        from suite.workloads.faulty import BatchedFaultDataset, FaultDataset

        return (BatchedFaultDataset if batched else FaultDataset)(length, config["fault"], config["fault_at"],
                                                                  config.get("memory_limit_mb"))
    raise ValueError(f"unknown workload {workload!r}")

"""Real DDP ranks (`rank_mode = "ddp"`, loaderbench.measure.ddp) on one node: two ranks in a gloo process group
receive disjoint shares that cover each epoch (counted from the samples their loops received; an overlapping share
is reported as overlap), all-reduce their gradients every step, and a failing rank leaves none behind."""

from __future__ import annotations

import os
from collections import Counter

import psutil
import pytest

from loaderbench.measure.ddp import FEATURES, count_shares


def test_shares_are_counted_not_assumed():
    exact = count_shares([[[0, 2], [1, 3]], [[1, 3], [0, 2]]], 4)
    assert exact == {"epoch_samples": 4, "epochs_counted": 2, "share_reads": 8, "share_overlap": 0, "share_missing": 0}
    overlapping = count_shares([[[0, 1]], [[1, 2]]], 4)  # index 1 twice, index 3 never
    assert overlapping["share_overlap"] == 2 and overlapping["share_missing"] == 1
    assert count_shares([[[0, 1], [2, 3]], [[2, 3]]], 4)["epochs_counted"] == 1  # only epochs every rank read
    assert count_shares([[], []], 0)["epochs_counted"] == 0  # an iterable dataset: no sampler, nothing counted


def test_ddp_cells_refuse_adaptive_measuring(tmp_path):
    from loaderbench.errors import StudyError
    from loaderbench.study.study_file import parse_study

    raw = {
        "study": {"name": "a", "target_precision": 0.05, "min_windows": 10, "max_windows": 20, "max_measure_s": 5},
        "matrix": {"ranks": 2, "rank_mode": "ddp"},
    }
    with pytest.raises(StudyError, match='rank_mode = "ddp": DDP ranks step together'):
        parse_study(raw, where="a.toml", path=tmp_path / "a.toml")


def _study(tmp_path, name: str, matrix: dict, epochs: int = 2):
    from loaderbench.study.study_file import parse_study

    raw = {
        "study": {
            "name": name,
            "repetitions": 1,
            "warmup_batches": 2,
            "measure_batches": 6,
            "epochs": epochs,
            "timeout_s": 90,
            "remeasure_budget": 0,
        },
        "matrix": {"batch_size": 4, "cores": 2, "ranks": 2, "rank_mode": "ddp", "num_workers": 1, **matrix},
    }
    return parse_study(raw, where=name, path=tmp_path / f"{name}.toml")


def _run(tmp_path, study):
    from loaderbench.launch.local import run_local
    from loaderbench.schema.store import Store

    store = Store(tmp_path / "results")
    run_local(study, store)
    ((_, rec),) = list(store.records(study.name))
    return rec


@pytest.fixture
def all_reduces(tmp_path, monkeypatch):
    """Every torch.distributed.all_reduce call of the cells run in this test, one line "pid elements" each: the
    cell and its ranks are forked from this process, so the counting wrapper goes with them."""
    import torch.distributed as dist

    log = tmp_path / "all_reduce.log"
    real = dist.all_reduce

    def counted(tensor, *args, **kwargs):
        out = real(tensor, *args, **kwargs)
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()} {tensor.numel()}\n")
        return out

    monkeypatch.setattr(dist, "all_reduce", counted)
    return log


@pytest.mark.slow
def test_two_ddp_ranks_read_disjoint_shares_and_all_reduce_their_gradients(tmp_path, all_reduces):
    from loaderbench.study.window import plan_window
    from tests.test_record_typed import undeclared

    study = _study(tmp_path, "ddp", {"workload": "cpu", "cpu_work": 1})
    rec = _run(tmp_path, study)
    assert rec.ok, rec.error
    ddp = rec.metrics["ddp"]
    assert ddp["backend"] == "gloo" and ddp["world_size"] == 2 and ddp["nodes"] == 1
    # each epoch: every index of the dataset received by exactly one rank's loop
    assert ddp["epochs_counted"] == 2 and ddp["epoch_samples"] > 0
    assert ddp["share_reads"] == 2 * ddp["epoch_samples"]
    assert ddp["share_overlap"] == 0 and ddp["share_missing"] == 0
    # the ranks' own gradients differed (different samples); after the all-reduce they were one
    a, b = ddp["ranks"]
    assert a["grad_local"] != b["grad_local"]
    assert ddp["grads_equal"] and a["grad_reduced"] == pytest.approx(b["grad_reduced"], rel=1e-9)
    assert a["params"] == pytest.approx(b["params"], rel=1e-9)
    # the all-reduce happened: each rank reduced its whole gradient once per step
    steps = 2 * plan_window(study.cells[0].typed).epoch_batches
    calls = [tuple(map(int, line.split())) for line in all_reduces.read_text().splitlines()]
    assert sorted(Counter(pid for pid, _ in calls).values()) == [steps, steps]
    assert {n for _, n in calls} == {(FEATURES + 1) * FEATURES + (FEATURES + 1) * 10}  # the MLP's two layers
    assert 0 < ddp["allreduce_s"] < ddp["step_s"]  # timed, as a part of the step
    # per-rank and total throughput over the window both ranks shared
    assert len(rec.metrics["ranks"]) == 2 and all(r["samples_per_s"] > 0 for r in rec.metrics["ranks"])
    assert rec.metrics["ranks_common_window"]["seconds"] > 0 and rec.metrics["samples_per_s"] > 0
    assert rec.metrics["processes_peak"] >= 4  # both ranks and each one's worker, seen by the probe
    assert undeclared(rec.metrics) == []


@pytest.mark.slow
def test_an_overlapping_share_is_reported_as_overlap(tmp_path, monkeypatch):
    """Both ranks handed rank 0's share (as a sampler told the wrong rank would): the samples their loops received
    overlap wholly and half of each epoch is never read, and the record says so."""
    import torch.utils.data.distributed as distributed

    class RankZero(distributed.DistributedSampler):
        def __init__(self, dataset, num_replicas=None, rank=None, **kwargs):
            super().__init__(dataset, num_replicas, 0, **kwargs)

    monkeypatch.setattr(distributed, "DistributedSampler", RankZero)  # forked with the cell and its ranks
    rec = _run(tmp_path, _study(tmp_path, "ddp-overlap", {"workload": "cpu", "cpu_work": 1}))
    assert rec.ok, rec.error
    ddp = rec.metrics["ddp"]
    n = ddp["epoch_samples"]
    assert ddp["epochs_counted"] == 2 and n > 0 and ddp["share_reads"] == 2 * n
    assert ddp["share_overlap"] == 2 * n and ddp["share_missing"] == 2 * (n // 2)


@pytest.mark.slow
def test_a_failing_rank_fails_the_cell_and_leaves_no_rank_running(tmp_path):
    import torch

    from loaderbench.study.window import plan_window

    matrix = {"workload": "fault", "fault": "raise", "fault_at": 0}
    (cell,) = _study(tmp_path, "ddp-fault", matrix, epochs=1).cells
    samples = plan_window(cell.typed).epoch_batches * 4 * 2  # the dataset both shares cut
    perm = torch.randperm(samples, generator=torch.Generator().manual_seed(cell.typed.seed * 1000)).tolist()
    rec = _run(tmp_path, _study(tmp_path, "ddp-fault", {**matrix, "fault_at": perm[1::2][3]}, epochs=1))  # rank 1's
    assert rec.status == "failed"
    message = rec.error["message"]
    assert "DDP rank 1 failed" in message and "fault injected" in message, message
    assert rec.cleanup["processes_left"] == []
    seen = rec.cleanup["processes_seen"]
    assert len(seen) >= 3  # rank 0, rank 1 and at least one worker were there
    assert [p for p in seen if _running(p)] == []


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

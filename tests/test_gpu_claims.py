"""The GPU claims that the `gpu-decode` and `gpu-batch-size` studies decide (#12 CUDA in forked workers, #44 batch
size against GPU memory): each rule holds, fails and stays open on synthetic records made to show each case, says
"not measurable" where no step ran on a GPU, and decides the shipped H200 records as docs/findings.md says."""

from __future__ import annotations

import pandas as pd
import pytest

from loaderbench.analysis.claims.claims_table import BY_NAME, CLAIMS, carries, claims_table
from loaderbench.analysis.questions.gpu_batch_size import batch_size_balance
from loaderbench.analysis.questions.gpu_decode import cuda_breaks_forked_workers
from loaderbench.fake_records.gpu import gpu_batch_table, gpu_decode_table
from loaderbench.fake_records.questions import F, H, I, N, X
from tests.conftest import REPO


def test_cuda_in_forked_workers_holds_when_they_fail_and_spawned_ones_run():
    o = cuda_breaks_forked_workers(gpu_decode_table())
    assert o.verdict == H
    assert "nvjpeg in forked workers: 0/3 ok (cuda_after_fork: CUDA error: initialization error)" in o.evidence
    assert "in workers started by spawn: 3/3 ok" in o.evidence
    assert "forked workers that decode on the CPU, after the same CUDA start: 6/6 ok" in o.evidence


def test_cuda_in_forked_workers_fails_when_a_forked_one_runs():
    assert cuda_breaks_forked_workers(gpu_decode_table(forked_fail=False)).verdict == F


def test_cuda_in_forked_workers_is_open_when_spawned_ones_fail_too():
    o = cuda_breaks_forked_workers(gpu_decode_table(spawned_ok=False))
    assert o.verdict == I and "not fork's doing alone" in o.evidence


def test_cuda_in_forked_workers_needs_both_start_methods_and_a_gpu():
    df = gpu_decode_table()
    assert cuda_breaks_forked_workers(df[df["start_method"] != "spawn"]).verdict == N
    no_gpu = df.assign(
        status="failed", error_message='decoder = "nvjpeg" decodes on the GPU, and no CUDA device is visible'
    )
    assert cuda_breaks_forked_workers(no_gpu).verdict == X


def test_batch_size_holds_when_the_large_size_runs_out_and_a_balanced_one_is_near_the_best():
    # the best ran at 512 (2250), 128 reached 2140: 0.95x
    o = batch_size_balance(gpu_batch_table(rate=lambda bs: {32: 1650, 64: 2000, 128: 2150, 512: 2200, 2048: 0}[bs]))
    assert o.verdict == H, o.evidence
    assert "out of GPU memory at 2048 in every repetition; the sizes up to 512 ran" in o.evidence


def test_batch_size_fails_when_the_balanced_sizes_fall_well_short():
    rate = lambda bs: {32: 800.0, 64: 900.0, 128: 1000.0, 512: 2000.0, 2048: 0}[bs]
    assert batch_size_balance(gpu_batch_table(rate=rate)).verdict == F


def test_batch_size_balance_is_not_judged_where_the_loader_bound_the_step():
    """Loader-bound cells (the GPU busy 30% of the window) fall short of the best size for the loader's reasons:
    that says nothing of the GPU's balance, so the balance is left unmeasured, never refuted."""
    rate = lambda bs: {32: 800.0, 64: 900.0, 128: 1000.0, 512: 2000.0, 2048: 0}[bs]
    o = batch_size_balance(gpu_batch_table(rate=rate, au=0.3))
    assert o.verdict == N and "bound by the loader" in o.evidence, o.evidence


def test_batch_size_is_open_while_no_size_ran_out_of_memory():
    o = batch_size_balance(gpu_batch_table(oom_at=()))
    assert o.verdict == I and "none was large enough" in o.evidence


def test_batch_size_is_not_measurable_without_a_gpu_step():
    df = gpu_batch_table().assign(consumer="simulated (no CUDA device: 25 ms sleep instead of resnet50)")
    assert batch_size_balance(df).verdict == X


def test_the_gpu_questions_carry_only_their_own_studies():
    """A GPU batch-size sweep carries no "4 workers per GPU are enough" (it measures one num_workers), and the decode
    study's rows carry no gpu-feed claim (they vary the decoder, which gpu-feed's rules do not tell apart)."""
    few = next(c for c in CLAIMS if c.number == 38)
    assert few.decide(gpu_batch_table()).verdict == N
    decode = gpu_decode_table()
    assert not carries(BY_NAME["gpu-feed"], few, decode)
    assert carries(BY_NAME["gpu-decode"], BY_NAME["gpu-decode"].claims[0], decode)


@pytest.mark.parametrize(("number", "verdict"), [(12, H), (44, N)])
def test_the_shipped_h200_records_decide_the_gpu_claims(number, verdict):
    from loaderbench.analysis.table.records import load_records

    df, _ = load_records(REPO / "results" / "reference" / "h200", use_cache=False)
    table = claims_table(df)
    row = table[table["number"] == f"#{number}"].iloc[0]
    assert row["verdict"] == verdict, row["evidence"]
    assert isinstance(row["evidence"], str) and row["study"] in ("gpu-decode", "gpu-batch-size")
    assert pd.notna(row["rule"])

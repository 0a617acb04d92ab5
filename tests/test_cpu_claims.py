"""The rules of the batch-size (#43), delivery-order (#48) and default start method (#11) claims on synthetic
records, and the order a real loader delivers in: in the sampler's order with in_order=True, away from it when a
worker straggles with in_order=False."""

from __future__ import annotations

import pytest

from loaderbench.analysis.questions.batch_size import batch_time_grows, sample_time_flat
from loaderbench.analysis.questions.in_order import out_of_order_not_deterministic
from loaderbench.fake_records.questions import batch_table, in_order_table
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED

P99 = {(True, False): 0.01, (False, False): 0.01, (True, True): 0.1, (False, True): 0.02}
THR = {(True, False): 1000.0, (False, False): 1000.0, (True, True): 400.0, (False, True): 420.0}


def test_batch_time_grows_and_sample_time_stays():
    per_sample = batch_table()
    assert batch_time_grows(per_sample).verdict == HOLDS
    assert sample_time_flat(per_sample).verdict == HOLDS
    per_batch = batch_table(per_sample_s=0.0, per_batch_s=0.01)  # a batch costs the same whatever its size
    assert batch_time_grows(per_batch).verdict == FAILS
    assert sample_time_flat(per_batch).verdict == FAILS


def _order(in_order_moved, out_moved, out_prints):
    steady = [(0, "0000")] * 3
    return {
        (True, False): steady,
        (False, False): steady,
        (True, True): [(m, "0000" if m == 0 else f"i{m}") for m in in_order_moved],
        (False, True): list(zip(out_moved, out_prints)),
    }


@pytest.mark.parametrize(
    "in_order_moved, out_moved, out_prints, verdict",
    [
        ((0, 0, 0), (12, 9, 14), ("a", "b", "c"), HOLDS),
        ((0, 0, 0), (12, 12, 12), ("a", "a", "a"), INCONCLUSIVE),  # reordered, the same way each time
        ((0, 0, 0), (0, 0, 0), ("0000",) * 3, FAILS),  # never reordered
        ((0, 3, 0), (12, 9, 14), ("a", "b", "c"), FAILS),  # in order left the sampler's order
    ],
)
def test_out_of_order_delivery_rule(in_order_moved, out_moved, out_prints, verdict):
    rows = in_order_table(P99, THR, order=_order(in_order_moved, out_moved, out_prints))
    out = out_of_order_not_deterministic(rows)
    assert out.verdict == verdict, out.evidence


def test_out_of_order_rule_needs_the_order_metric():
    assert out_of_order_not_deterministic(in_order_table(P99, THR)).verdict == NOT_MEASURED


STRAGGLER = {
    "workload": "sleep",
    "sleep_ms": 1.0,
    "sample_kb": 4.0,
    "batch_size": 8,
    "cores": 2,
    "num_workers": 4,
    "slow_worker_ms": 10.0,  # worker 0 takes 11 ms a sample, the others 1 ms: its batches are overtaken
    "warmup_batches": 4,
    "measure_batches": 40,
}


@pytest.mark.slow
def test_a_real_loader_keeps_the_sampler_order_only_in_order(tmp_path):
    from tests.test_claim_cells import run_cell

    kept = run_cell(tmp_path / "in", {**STRAGGLER, "in_order": True})["metrics"]["order"]
    moved = run_cell(tmp_path / "out", {**STRAGGLER, "in_order": False})["metrics"]["order"]
    assert kept["out_of_order"] == 0 and kept["batches"] >= 44
    assert moved["out_of_order"] > 0 and moved["fingerprint"] != kept["fingerprint"]


def test_the_default_start_method_is_decided_per_python():
    import pandas as pd

    from loaderbench.analysis.questions.start_method import fork_is_the_default

    def rows(*pairs):
        return pd.DataFrame(
            [{"env_python": p, "env_os": "Linux-6.1-x86_64", "env_default_start_method": m} for p, m in pairs]
        )

    assert fork_is_the_default(rows(("3.11.7", "fork"), ("3.12.3", "fork"))).verdict == HOLDS
    out = fork_is_the_default(rows(("3.11.7", "fork"), ("3.14.0", "forkserver")))
    assert out.verdict == FAILS and "Python 3.14.0 on Linux: forkserver" in out.evidence
    assert fork_is_the_default(pd.DataFrame({"env_python": ["3.11.7"]})).verdict == NOT_MEASURED


def expected_default_start_method() -> str:
    """multiprocessing's documented default: fork on Linux up to Python 3.13, forkserver from 3.14 (on POSIX but
    macOS), spawn on macOS (since 3.8) and Windows."""
    import sys

    if sys.platform in ("darwin", "win32"):
        return "spawn"
    return "forkserver" if sys.version_info >= (3, 14) else "fork"


def test_the_record_knows_its_default_start_method():
    """The default this Python gives a DataLoader with no context, read afresh: not whatever this process set."""
    import multiprocessing

    from loaderbench.measure.fingerprint import default_start_method

    expected = expected_default_start_method()
    here = multiprocessing.get_start_method(allow_none=True)
    other = next(m for m in multiprocessing.get_all_start_methods() if m != expected)
    multiprocessing.set_start_method(other, force=True)
    try:
        assert default_start_method() == expected
    finally:
        multiprocessing.set_start_method(here, force=True)


def test_sharing_cost_by_tensor_size():
    from loaderbench.analysis.questions.sharing_size import fd_small_fs_large
    from loaderbench.fake_records.questions import sharing_size_table

    out = fd_small_fs_large(sharing_size_table())
    assert out.verdict == HOLDS and "they cross between 1 KiB and 256 KiB" in out.evidence, out.evidence
    same = sharing_size_table(rate=lambda s, kb: 1 / (60e-6 + 4e-6 * kb))  # no difference anywhere
    assert fd_small_fs_large(same).verdict == FAILS


FD, FS = "file_descriptor", "file_system"


@pytest.mark.parametrize(
    "persistent, fresh, verdict",
    [
        ([FD, FD, FD], [FD, FS, FS], HOLDS),  # persistent workers keep theirs; fresh ones take the new one
        ([FD, FS, FS], [FD, FS, FS], FAILS),
        ([FD, FD, FD], [FD, FD, FD], INCONCLUSIVE),  # the call changed nothing even for fresh workers
    ],
)
def test_set_sharing_strategy_after_start(persistent, fresh, verdict):
    from loaderbench.analysis.questions.sharing_size import switch_after_start_ignored
    from loaderbench.fake_records.questions import sharing_switch_table

    out = switch_after_start_ignored(sharing_switch_table(persistent, fresh))
    assert out.verdict == verdict, out.evidence


# peak USS per worker (MiB): NumPy-held images stay shared under fork, Python-object ones are copied; spawned
# workers each unpickle a copy of either
COPIED = {
    ("decoded", "fork"): 22.0,
    ("decoded", "spawn"): 310.0,
    ("decoded_objects", "fork"): 300.0,
    ("decoded_objects", "spawn"): 330.0,
}


@pytest.mark.parametrize(
    "eager, start_method, verdict",
    [
        ("decoded_objects", "fork", HOLDS),  # the source's setting: refcount writes copy every row read
        ("decoded", "fork", FAILS),  # an array's pixels stay shared: nothing to avoid
        ("decoded", "spawn", HOLDS),  # pickling gives every spawned worker its own copy
    ],
)
def test_lazy_datasets_avoid_duplication_per_start_method(eager, start_method, verdict):
    from loaderbench.analysis.questions.cow_memory import lazy_avoids_duplication
    from loaderbench.fake_records.questions import lazy_table

    out = lazy_avoids_duplication(eager, start_method)(lazy_table(COPIED))
    assert out.verdict == verdict, out.evidence
    assert "decoded images held: 287 MiB" in out.evidence and f"{start_method}, w=2" in out.evidence


def test_the_lazy_claim_is_decided_under_fork_alone():
    """#24's verdict comes from fork with a dataset of Python objects; spawn and NumPy arrays are reported beside
    it, never deciding it."""
    from loaderbench.analysis.claims import claims_table, numbered
    from loaderbench.fake_records.questions import lazy_table

    copied_only_under_spawn = {**COPIED, ("decoded_objects", "fork"): 21.0}
    for held, verdict in ((COPIED, HOLDS), (copied_only_under_spawn, FAILS)):
        row = numbered(claims_table(lazy_table(held))).set_index("number").loc["#24"]
        assert row["verdict"] == verdict, row.to_dict()
        assert "holds under spawn (NumPy arrays)" in row["elsewhere"]
        assert "does not hold under fork with images held as NumPy arrays" in row["elsewhere"]


HELD = {(True, False): 60.0, (True, True): 120.0, (False, False): 60.0, (False, True): 62.0}


@pytest.mark.parametrize(
    "stale, verdict",
    [({True: 192, False: 0}, HOLDS), ({True: 0, False: 0}, FAILS), ({True: 100, False: 0}, INCONCLUSIVE)],
)
def test_persistent_workers_miss_state(stale, verdict):
    from loaderbench.analysis.questions.persistence import persistent_miss_state
    from loaderbench.fake_records.questions import state_table

    out = persistent_miss_state(state_table(stale, HELD))
    assert out.verdict == verdict, out.evidence


def test_a_second_loader_doubles_what_persistent_workers_hold():
    from loaderbench.analysis.questions.persistence import second_loader_doubles
    from loaderbench.fake_records.questions import state_table

    stale = {True: 192, False: 0}
    assert second_loader_doubles(state_table(stale, HELD)).verdict == HOLDS
    flat = {**HELD, (True, True): 62.0}
    assert second_loader_doubles(state_table(stale, flat)).verdict == FAILS

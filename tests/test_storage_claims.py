"""loaderbench.analysis.questions.storage on synthetic records (loaderbench.fake_records.storage.storage_table:
Little's law with a core's
ceiling, a bandwidth cap, two round trips per request for a new connection): each rule holds where the
records say so, does not hold where they show the opposite, and stays inconclusive on scattered ones."""

from __future__ import annotations

from loaderbench.analysis.claims.claims_table import claims_table
from loaderbench.analysis.questions.storage import (
    FAR_PAST,
    http_rows,
    io_rule_of_thumb_over_http,
    per_request_costs_more,
    scale_until_bandwidth,
    shards_exactly_once,
)
from loaderbench.fake_records.questions import F, H, I, N, decide
from loaderbench.fake_records.storage import storage_rate, storage_table


def test_little_law_scaling_and_a_binding_cap_hold():
    assert storage_rate(16, 10.0) / storage_rate(1, 10.0) >= FAR_PAST  # the synthetic path itself
    assert decide(scale_until_bandwidth, storage_table()) == H


def test_a_cap_that_never_binds_does_not_hold():
    # a cap far above what the path carries: the capped curve is the uncapped one, nothing binds
    assert decide(scale_until_bandwidth, storage_table(cap_mbit=100_000.0)) == F


def test_scaling_stopped_by_the_core_does_not_hold():
    # a ceiling of 60 samples/s: at 10 ms, 16 workers gain less than FAR_PAST over one
    df = storage_table(per_request=("pooled", 1500.0))
    df.loc[df["samples_per_s"] > 60, "samples_per_s"] = 60.0
    assert decide(scale_until_bandwidth, df) == F


def test_a_connection_per_request_costs_more_than_workers_hide():
    assert decide(per_request_costs_more, storage_table()) == H
    # a "per_request" client as fast as the pooled one: the claim is shown false (within its margin)
    same = storage_table(per_request=("per_request", 1500.0))
    same.loc[same["http_client"] == "per_request", "samples_per_s"] = same[
        (same["http_client"] == "pooled") & (same["latency_ms"] == 10.0) & (same["bandwidth_mbit"] == 0)
    ]["samples_per_s"].to_numpy()
    assert decide(per_request_costs_more, same) == F


def test_scattered_repetitions_are_inconclusive():
    assert decide(per_request_costs_more, storage_table(spread=0.4)) == I


def test_shards_counts_decide_exactly_once():
    assert decide(shards_exactly_once, storage_table()) == H
    assert decide(shards_exactly_once, storage_table(split_dups=3)) == F  # split shards read twice
    assert decide(shards_exactly_once, storage_table(none_dups=0)) == F  # unsplit, yet no copy seen


def test_without_http_cells_nothing_is_measured():
    local = storage_table()
    local = local[local["storage"] == "local"]
    assert http_rows(local).empty
    assert decide(scale_until_bandwidth, local) == N
    assert decide(per_request_costs_more, local) == N


def test_the_storage_study_carries_its_claims_and_not_the_cpu_ones():
    table = claims_table(storage_table(full=(10.0,)))
    mine = table[table["question"] == "storage"]
    assert set(mine["verdict"]) == {H} and set(mine["study"]) == {"storage"}, mine[mine["verdict"] != H]["evidence"]
    over = table[table["question"] == "oversubscription"]
    assert (over["verdict"] == N).all()  # reading over HTTP is not CPU-bound loading


def test_two_to_four_workers_per_core_suffice_where_the_wait_is_one_to_three_decodes():
    """Full pipeline over HTTP on one core: at 10 ms the decoding (3 ms a sample) fills the core from about 4
    workers, so 4 x cores reaches the optimum; at 50 ms it takes about 17 workers, so 4 x cores falls far short."""
    assert decide(io_rule_of_thumb_over_http, storage_table(full=(10.0,))) == H
    out = io_rule_of_thumb_over_http(storage_table(full=(10.0, 50.0)))
    assert out.verdict == F and "50 ms, 1 core: w=4 / w=16" in out.evidence
    assert decide(io_rule_of_thumb_over_http, storage_table(full=(10.0,), nws=(1, 2, 4))) == N  # nothing beyond
    assert decide(io_rule_of_thumb_over_http, storage_table()) == N  # reading only: no optimum to find

"""Rule kinds (loaderbench.analysis.rules.kinds): the English a kind writes comes from its fields, and a kind decides
fake records with a known effect as the effect says."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from loaderbench.analysis.questions.start_method import _sm
from loaderbench.analysis.rules.claim import Claim
from loaderbench.analysis.rules.kinds import FEWEST, MOST, AllOf, Custom, Equivalent, Of, Shift
from loaderbench.fake_records.questions import F, H, N, X, decide, sm_table
from loaderbench.stats.verdicts import Outcome, at_least, at_most

#: spawn's first batch is 3x fork's at one worker; spawn's grows 1.6x from 1 to 4 workers (sm_table's model)
TTFB = {"fork": 1.0, "forkserver": 2.0, "forkserver+preload": 1.5, "spawn": 3.0}


def first_batch(a: str, b: str, region, **fields) -> Shift:
    return Shift(
        "time_to_first_batch_s",
        "time to first batch",
        {"method": a},
        {"method": b},
        region,
        ("num_workers", "payload_mb"),
        frame=_sm,
        **fields,
    )


def test_the_rule_text_names_the_threshold_of_its_field():
    rule = first_batch("fork", "spawn", at_least(2.0))
    assert "spawn's time to first batch is at least 2x fork's" in rule.text()
    assert "at every worker count x payload" in rule.text()
    moved = dataclasses.replace(rule, region=at_least(3.5))
    assert "at least 3.5x" in moved.text() and "2x" not in moved.text()
    assert "at most 0.8x" in dataclasses.replace(rule, region=at_most(0.8)).text()
    band = Equivalent("samples_per_s", "throughput", {"in_order": True}, {"in_order": False}, 0.1)
    assert "within 0.9..1.1x" in band.text() and "equivalence" in band.text()
    assert "within 0.8..1.2x" in Equivalent("samples_per_s", "throughput", {"x": 1}, {"x": 2}, 0.2).text()
    diff = Shift("m", "peak USS", {"b": "numpy_bytes"}, {"b": "list_str"}, at_least(10.0), log=False, unit=" MiB")
    assert "list_str's peak USS exceeds numpy_bytes' by at least 10 MiB" in diff.text()
    assert "at the smallest payload" in dataclasses.replace(rule, where={"payload_mb": FEWEST}).text()
    assert rule.text().endswith("fork's")
    assert dataclasses.replace(rule, note="why").text().endswith("; why")


def test_a_claim_takes_its_rule_text_and_decision_from_a_kind():
    rule = first_batch("fork", "spawn", at_least(2.0))
    claim = Claim("start-method", "spawn starts slower", rule)
    assert claim.rule == rule.text() and claim.kind is rule and claim.decide is rule
    # a rule text still needs its decide function
    with pytest.raises(ValueError, match="decide"):
        Claim("start-method", "spawn starts slower", "holds if ...")
    # a kind with a decide function of its own (a noise guard around it): the text is the kind's
    guarded = Claim("start-method", "spawn starts slower", rule, lambda rows: Outcome(H, "guarded"))
    assert guarded.rule == rule.text() and guarded.decide(pd.DataFrame()).evidence == "guarded"


@pytest.mark.parametrize(("least", "verdict"), [(2.0, H), (2.9, H), (3.2, F), (5.0, F)])
def test_a_shift_on_fake_rows_with_a_known_ratio(least, verdict):
    # spawn / fork = 3.0 at one worker and 4.8 at four (sm_table grows spawn's 1.2x per extra worker)
    rule = first_batch("fork", "spawn", at_least(least))
    out = rule(sm_table(TTFB))
    assert out.verdict == verdict
    assert "w=1, 0 MiB: time to first batch spawn / fork 3x" in out.evidence
    assert f">= {least:g}x" in out.evidence


def test_a_shift_at_most_and_its_missing_cells():
    assert decide(first_batch("spawn", "fork", at_most(0.5)), sm_table(TTFB)) == H
    assert decide(first_batch("spawn", "fork", at_most(0.2)), sm_table(TTFB)) == F
    out = first_batch("fork", "spawn", at_least(2.0))(sm_table(TTFB, reps=2))
    assert out.verdict == N and out.evidence.startswith("needs fork and spawn cells")


def test_extremes_resolve_per_group_and_of_takes_another_axis():
    # spawn's first batch at 4 workers over 1 worker: 1.6x
    grows = Shift(
        "time_to_first_batch_s",
        "time to first batch",
        {"method": "spawn", "num_workers": FEWEST},
        {"method": "spawn", "num_workers": MOST},
        at_least(1.5),
        ("payload_mb",),
        frame=_sm,
    )
    out = grows(sm_table(TTFB))
    assert out.verdict == H and "w=4 / w=1 1.6x" in out.evidence
    assert "at the most workers is at least 1.5x that at the fewest workers" in grows.text()
    assert decide(dataclasses.replace(grows, region=at_least(2.0)), sm_table(TTFB)) == F
    # one worker count only: the extremes are the same cells, nothing to compare
    assert decide(grows, sm_table(TTFB, nws=(4,))) == N
    # Of: a side at the value of another axis of the group (num_workers = payload, only where both are 4)
    cells = sm_table(TTFB, nws=(1, 4), payloads=(4.0,))
    of = Shift(
        "time_to_first_batch_s",
        "time to first batch",
        {"method": "spawn", "num_workers": 1},
        {"method": "spawn", "num_workers": Of("payload_mb")},
        at_least(1.5),
        ("payload_mb",),
        frame=_sm,
    )
    assert decide(of, cells) == H and "num_workers = payload_mb" in of.text()


def test_all_of_fails_with_one_part_and_groups_the_evidence():
    both = AllOf((first_batch("fork", "spawn", at_least(2.0)), first_batch("fork", "forkserver", at_least(1.5))))
    out = both(sm_table(TTFB))
    assert out.verdict == H
    assert out.evidence.count("w=1, 0 MiB:") == 1  # both parts of one group under one head
    assert (
        "spawn's time to first batch is at least 2x fork's, and forkserver's time to first batch is at least 1.5x"
        in both.text()
    )
    refuted = AllOf((first_batch("fork", "spawn", at_least(2.0)), first_batch("fork", "forkserver", at_least(2.5))))
    assert decide(refuted, sm_table(TTFB)) == F


def test_custom_and_guard():
    rule = Custom(lambda rows: Outcome(H, "counted"), "holds if it is counted")
    assert rule.text() == "holds if it is counted" and decide(rule, pd.DataFrame()) == H
    guarded = first_batch("fork", "spawn", at_least(2.0), guard=lambda rows: Outcome(X, "no GPU"))
    assert decide(guarded, sm_table(TTFB)) == X

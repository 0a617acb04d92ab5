"""A verdict that flips between two shipped copies of a study is reported as unstable."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.findings.verdict_history import UNSTABLE, flips, flips_by_number, remember
from loaderbench.fake_records.questions import in_order_table

P99 = {(True, False): 0.01, (False, False): 0.01, (True, True): 0.08, (False, True): 0.02}
SAME = {(True, False): 1000.0, (False, False): 1000.0, (True, True): 400.0, (False, True): 420.0}
FASTER = {**SAME, (False, True): 800.0}
PERMANENT = "#47 in_order=False leaves mean throughput about the same when one worker is slow on every sample"


def test_a_claim_decided_differently_by_the_last_two_copies_is_unstable():
    meta: dict = {}
    remember(meta, "in-order", in_order_table(P99, SAME))
    assert flips(meta) == {}  # one copy: nothing to compare
    remember(meta, "in-order", in_order_table(P99, SAME))
    assert flips(meta) == {}  # the same verdicts again: stable
    remember(meta, "in-order", in_order_table(P99, FASTER))
    found = flips(meta)
    key = f"in-order|{PERMANENT}"
    assert list(found) == [key], found
    assert found[key].startswith("unstable: holds at ") and "then does not hold at" in found[key]
    decided_here = pd.DataFrame({"study": ["in-order"], "number": ["#47"], "claim": [PERMANENT.split(" ", 1)[1]]})
    assert flips_by_number([{UNSTABLE + key: found[key]}], decided_here) == {"#47": f" ({found[key]})"}
    # a claim the table decides on another study's records is not marked by this one's flip
    assert flips_by_number([{UNSTABLE + key: found[key]}], decided_here.assign(study="quick")) == {}
    remember(meta, "in-order", in_order_table(P99, FASTER))
    assert flips(meta) == {}  # decided alike twice: settled
    for _ in range(10):
        remember(meta, "in-order", in_order_table(P99, FASTER))
    assert len(meta["history"]["in-order"]) == 5  # a bounded history


def test_a_flip_that_settle_decided_is_no_longer_unstable():
    """A settle run that held or refuted the claim, as the copied records still decide it, settles the flip; one
    that left the claim open, or decided it otherwise than the copy does, does not."""
    key = f"in-order|{PERMANENT}"

    def after_flip(settle: dict | None) -> dict:
        meta: dict = {}
        remember(meta, "in-order", in_order_table(P99, SAME))
        remember(meta, "in-order", in_order_table(P99, FASTER), settle)
        return flips(meta)

    assert key in after_flip(None)
    assert after_flip({"after": {PERMANENT: "does not hold"}, "left": {}}) == {}
    assert key in after_flip({"after": {PERMANENT: "does not hold"}, "left": {PERMANENT: "open at 9 repetitions"}})
    assert key in after_flip({"after": {PERMANENT: "holds"}, "left": {}})  # not what the copy decides

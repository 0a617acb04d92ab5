"""`loaderbench settle`: which claims are open, which cells they read, and the loop that measures only those cells
until the claims are decided or the budget is spent (its measuring replaced by records written here)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import loaderbench.settle.rounds as rounds
from loaderbench.analysis.claims.claims_table import BY_NAME, decide_claims
from loaderbench.errors import LoaderbenchError
from loaderbench.fake_records.questions import in_order_table, rec
from loaderbench.settle.needs import cells_read, estimate, open_claims
from loaderbench.stats.verdicts import HOLDS, INCONCLUSIVE, at_least, decide_shift

WIDE = 0.3  # repetitions at 0.7, 1.0 and 1.3 of the value: every interval reaches both sides
P99_BASE = {(True, False): 0.01, (False, False): 0.01, (True, True): 0.08, (False, True): 0.02}
THR_BASE = {(True, False): 1000.0, (False, False): 1000.0, (True, True): 400.0, (False, True): 420.0}

PERMANENT = "in_order=False leaves mean throughput about the same when one worker is slow on every sample"


def test_the_estimate_is_read_from_the_rules_own_evidence():
    out = decide_shift([100, 104, 96], [108, 113, 104], at_least(1.05), label="x")
    assert out.verdict == INCONCLUSIVE, out.evidence
    assert estimate(out.evidence) is not None and f"about {estimate(out.evidence)} repetitions" in out.evidence
    assert (
        estimate(
            "b / a 1.1x [0.9-1.3x] (75%, 2 v 2): 2 v 2 repetitions reach at most 75% (this decision needs a "
            "nominal 90%: 3 per cell reach 90%)"
        )
        == 3
    )
    assert estimate("holds") is None


def test_the_cells_a_rule_reads_are_those_whose_absence_changes_its_outcome():
    rows = in_order_table(P99_BASE, THR_BASE, occasional={True: 900.0, False: 910.0})
    rule = next((q, j) for q in ("in-order",) for j, c in enumerate(BY_NAME[q].claims) if c.claim == PERMANENT)
    outcome = decide_claims(rows, [rule])[rule]
    read = cells_read(rule, rows, outcome)
    permanent = rows[(rows["slow_worker_ms"] > 0) & rows["slow_every"].isna()]
    assert sorted(read) == sorted(permanent["cell_id"].unique())


def _write(results: Path, records: list[dict]) -> None:
    for r in records:
        folder = results / r["study"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{r['cell_id']}-r{r['repetition']}.json").write_text(json.dumps(r))


def test_settling_measures_only_the_cells_open_claims_read_until_they_are_decided(tmp_path, monkeypatch):
    # a permanent straggler's throughput scatters +-30% over 3 repetitions: "about the same" is inconclusive; the
    # repetitions measured later scatter 0.1%, so a few more settle it
    records, truth = [], {}
    for io, slow, r in [(io, s, r) for io in (True, False) for s in (0.0, 10.0) for r in range(3)]:
        thr = 400.0 if slow else 1000.0
        spread = WIDE if slow else 0.01
        cfg = {"in_order": io, "slow_worker_ms": slow, "num_workers": 4}
        one = rec(
            "in-order",
            cfg,
            {"batch_wait_s": {"p99": 0.02, "p50": 0.001}, "samples_per_s": thr * (1 + spread * (r - 1))},
            r,
        )
        truth[one["cell_id"]] = (cfg, thr)
        records.append(one)
    _write(tmp_path, records)
    asked: list[tuple[int, list[str]]] = []

    def measure(study, results, repetitions, cells):
        asked.append((repetitions, cells))
        for cell in cells:
            cfg, thr = truth[cell]
            for r in range(3, repetitions):
                out = rec(
                    "in-order",
                    cfg,
                    {"batch_wait_s": {"p99": 0.02, "p50": 0.001}, "samples_per_s": thr * (1 + 0.001 * (r % 3 - 1))},
                    r,
                )
                _write(Path(results), [out])
        return 0

    monkeypatch.setattr(rounds, "_measure", measure)
    done = rounds.settle(
        SimpleNamespace(name="in-order", path=Path("in-order.toml")), tmp_path, budget_min=10, say=lambda _: None
    )
    name = f"#47 {PERMANENT}"
    assert done.before[name] == INCONCLUSIVE and done.after[name] == HOLDS, done
    straggling = {c for c, (cfg, _) in truth.items() if cfg["slow_worker_ms"]}
    assert asked and all(set(cells) <= straggling for _, cells in asked)  # never the control cells
    assert [n for n, _ in asked] == list(range(4, 4 + len(asked)))  # one more repetition a round
    assert done.repetitions[name] == 3 + len(asked)
    assert rounds.write(done, tmp_path).exists()


def test_a_budget_too_small_for_a_round_measures_nothing(tmp_path, monkeypatch):
    records = [
        rec(
            "in-order",
            {"in_order": io, "slow_worker_ms": 10.0, "num_workers": 4},
            {"batch_wait_s": {"p99": 0.02, "p50": 0.001}, "samples_per_s": 400.0 * (1 + WIDE * (r - 1))},
            r,
        )
        for io in (True, False)
        for r in range(3)
    ]
    _write(tmp_path, records)
    monkeypatch.setattr(rounds, "_measure", lambda *a: pytest.fail("measured beyond the budget"))
    done = rounds.settle(
        SimpleNamespace(name="in-order", path=Path("x")), tmp_path, budget_min=0.01, say=lambda _: None
    )
    assert done.rounds == 0 and "budget" in done.stopped
    assert any("open at 3 repetitions" in why for why in done.left.values())


def test_a_study_without_records_is_one_clear_error(tmp_path):
    with pytest.raises(LoaderbenchError, match="run it first"):
        rounds.settle(SimpleNamespace(name="in-order", path=Path("x")), tmp_path, budget_min=1)


def test_open_claims_say_why_repetitions_cannot_settle_them():
    rows = in_order_table(P99_BASE, THR_BASE)  # no delivery order in these records: #48 reads nothing measured
    why = {o.claim.number: o.why_not for o in open_claims(rows)}
    assert why.get(48), why

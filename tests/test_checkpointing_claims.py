"""The checkpointing question's rules (loaderbench.analysis.questions.checkpointing) on synthetic records: snapshot
cost, its fall with n, the replay that grows with n and its bound, and exactly-once resumes."""

from __future__ import annotations

from loaderbench.analysis.questions import checkpointing as K
from loaderbench.fake_records.questions import ckpt_rate, ckpt_table
from loaderbench.stats.verdicts import FAILS, HOLDS


def test_a_ten_percent_cost_at_every_step_that_falls_with_n_holds():
    df = ckpt_table()
    assert K.snapshots_cost(df).verdict == HOLDS
    assert K.cost_falls_with_n(df).verdict == HOLDS


def test_snapshots_that_cost_nothing_refute_the_cost():
    df = ckpt_table(rate=lambda w, c, nw, n: ckpt_rate(w, c, nw, 0))
    o = K.snapshots_cost(df)
    assert o.verdict == FAILS, o.evidence
    assert K.cost_falls_with_n(df).verdict == FAILS


def test_torchdata_s_replay_grows_with_n_and_keeps_its_bound():
    df = ckpt_table()
    assert K.replay_grows_with_n(df).verdict == HOLDS
    o = K.replay_bound(df)
    assert o.verdict == HOLDS and "54 of 54 resumes" in o.evidence, o.evidence


def test_a_replay_of_every_worker_s_prefetch_breaks_the_stated_bound():
    df = ckpt_table(replay=lambda at, n, nw, bs: (at % n) * bs * nw)
    assert K.replay_bound(df).verdict == FAILS


def test_a_resume_that_loses_samples_refutes_exactly_once():
    assert K.resumes_exactly_once(ckpt_table()).verdict == HOLDS
    o = K.resumes_exactly_once(ckpt_table(exactly_once=False))
    assert o.verdict == FAILS and "0 of 54" in o.evidence and "864 lost" in o.evidence, o.evidence


def test_a_failed_resume_refutes_exactly_once():
    df = ckpt_table()
    df.loc[df["resume_at"] == 63, "status"] = "failed"
    assert K.resumes_exactly_once(df).verdict == FAILS

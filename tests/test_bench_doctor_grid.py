"""The doctor-against-grid part of `make bench` (loaderbench/bench/doctor_vs_grid.py): the grid's settings, the
doctor's choice read from doctor.json, the score's arithmetic on synthetic runs, and the loop it runs. No
wall-clock assertions."""

from __future__ import annotations

import json

import pytest

from loaderbench.bench import doctor_loop
from loaderbench.bench import doctor_vs_grid as dg


def test_the_grid_runs_every_worker_count_and_persistence_only_with_workers():
    got = dg.grid_settings((0, 2, 4))
    assert got == [
        {"num_workers": 0},
        {"num_workers": 2, "persistent_workers": False},
        {"num_workers": 2, "persistent_workers": True},
        {"num_workers": 4, "persistent_workers": False},
        {"num_workers": 4, "persistent_workers": True},
    ]
    assert dg.setting_args({"num_workers": 4, "persistent_workers": True, "prefetch_factor": 4}) == [
        *("--num-workers", "4", "--prefetch-factor", "4", "--persistent-workers"),
    ]
    assert dg.setting_args({"num_workers": 0, "persistent_workers": True}) == ["--num-workers", "0"]


def test_the_doctors_choice_is_what_it_offers_to_paste_else_the_loops_own():
    start = {"num_workers": 0}
    validated = {"paste": "DataLoader(..., num_workers=4)", "in_loop": {"changes": {"num_workers": 4}}}
    doc = {"processes": [{"loaders": [validated]}]}
    assert dg.doctor_choice(doc, start) == {"num_workers": 4}
    # searched, but the loop's own rounds did not show it faster: nothing to paste, the loop keeps its setting
    doc = {"processes": [{"loaders": [{"tune": {"changes": {"num_workers": 4}}}]}]}
    assert dg.doctor_choice(doc, start) == start
    assert dg.doctor_choice({"processes": []}, start) == start


def test_the_score_pairs_the_holdout_by_repetition_and_divides_the_costs():
    grid = [{"wall_s": 10.0}, {"wall_s": 30.0}]
    holdout = []
    for rep in range(6):
        holdout += [
            {"arm": "doctor", "repetition": rep, "steps_per_s": 96.0 + rep},
            {"arm": "grid", "repetition": rep, "steps_per_s": 100.0 + rep},
        ]
    s = dg.score(grid, {"wall_s": 8.0}, holdout)
    assert s["cost_ratio"] == pytest.approx(0.2) and s["grid_cost_s"] == 40.0
    assert s["fraction_of_best"]["estimate"] == pytest.approx((98.5 / 102.5 + 99.5 / 103.5) / 2, rel=1e-3)
    assert s["met"] is True
    assert dg.score(grid, {"wall_s": 20.0}, holdout)["met"] is False  # half the grid's cost
    assert dg.score(grid, {"wall_s": 8.0}, [])["met"] is None


def test_the_loop_prints_its_steps_per_second_after_the_first_epoch(capsys):
    doctor_loop.main(["--kind", "step", "--num-workers", "0", "--epochs", "2", "--batches", "3"])
    out = json.loads(capsys.readouterr().out.strip())
    assert out["steps"] == 3 and out["steps_per_s"] > 0  # the second epoch's three steps

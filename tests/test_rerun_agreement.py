"""Bench part 8's arithmetic: agreement of two runs' medians, and the reference's own noise."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from loaderbench.bench import rerun_agreement as ra
from loaderbench.bench.result_tables import rerun_agreement as draw


def _cells(values: dict[str, float]) -> dict[str, dict[str, list[float]]]:
    return {c: {m: [v] for m in ra.MEASURES} for c, v in values.items()}


def test_agreement_counts_cells_within_each_tolerance():
    a = _cells({"x": 100.0, "y": 100.0, "z": 100.0, "w": 100.0})
    b = _cells({"x": 103.0, "y": 92.0, "z": 80.0, "w": 100.0})  # 3%, 8%, 20%, 0%
    got = ra.agreement(a, b)["raw"]
    assert got["cells"] == 4
    assert got["within_5pct"] == pytest.approx(0.5) and got["within_10pct"] == pytest.approx(0.75)
    assert got["worst_deviation"] == pytest.approx(0.20)


def test_the_references_own_noise_is_measured_in_pairs(monkeypatch):
    """Each pair is two readings back to back on the one CPU asked for; the noise is the relative change within a
    pair (never across pairs), and the warm-up reading before the first pair counts in none."""
    from loaderbench.measure import machine_speed

    # pair i reads python 100 then 100 + i (a change of i%), jpeg 50 then 50 - i (2i%); the warm-up reads wildly
    readings = [(1.0, 1.0)]
    for i in (5, 0, 10, 3, 8, 1, 9, 2, 7, 4, 6):  # in no order
        readings += [(100.0, 50.0), (100.0 + i, 50.0 - i)]
    asked: list[list[int]] = []

    def run_reference(cpus):
        asked.append(list(cpus))
        python, jpeg = readings[len(asked) - 1]
        return {"python_per_s": python, "jpeg_per_s": jpeg}

    monkeypatch.setattr(machine_speed, "run_reference", run_reference)
    got = ra.reference_repeatability(cpu=3, pairs=11)
    assert asked == [[3]] * len(readings)
    assert (got["pairs"], got["cpu"]) == (11, 3)
    # changes 0%..10% (python) and 0%..20% (jpeg): the median is the 6th, the 90th percentile the 10th of 11
    assert got["python"] == pytest.approx({"median": 0.05, "p90": 0.09, "max": 0.10})
    assert got["jpeg"] == pytest.approx({"median": 0.10, "p90": 0.18, "max": 0.20})


def test_the_table_states_the_references_own_noise():
    row = {"cells": 1, "within_5pct": 1.0, "within_10pct": 1.0, "median_deviation": 0.0, "worst_deviation": 0.0}
    noise = {"python": {"median": 0.012, "p90": 0.07, "max": 0.11}, "jpeg": {"median": 0.05, "p90": 0.17, "max": 0.36}}
    result = {
        "study": "quick",
        "cells": 1,
        "repetitions": 3,
        "margins": {"speed": 0.25, "others": 0.1, "remeasure_budget": 0.2},
        "agreement": {m: row for m in ra.MEASURES},
        "reference_run2_over_run1": 1.01,
        "reference_repeatability": {"pairs": 40, "cpu": 0, **noise},
        "runs": [{"noise": {"repetitions": 3}}, {"noise": {"repetitions": 3}}],
    }
    console = Console(file=io.StringIO(), width=200)
    draw(result, console)
    out = console.file.getvalue()
    assert "40 pairs back to back on CPU 0" in out and "p90 7.0%" in out and "max 36.0%" in out

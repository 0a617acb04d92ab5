"""The command line behaves like its peers: --version, help for every argument, exit status that CI can use,
--json where a machine reads the output, -k to run a subset, one cell in seconds."""

import argparse
import json
import subprocess
import sys

import pytest

from loaderbench.cli import build_parser
from tests.conftest import REPO


def cli(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, "-m", "loaderbench", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_version():
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("loaderbench ")


def test_every_argument_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        assert p.description, name
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help and action.help.strip(), (name, action.dest)


MIXED = """[study]
name = "mixed"
repetitions = 1
warmup_batches = 1
measure_batches = 2
[matrix]
workload = "fault"
fault = ["none", "raise"]
num_workers = 0
batch_size = 2
"""


@pytest.mark.slow
def test_run_exits_non_zero_after_running_every_cell_when_one_failed(tmp_path):
    study = tmp_path / "mixed.toml"
    study.write_text(MIXED)
    out = cli("run", study, "--results", tmp_path / "r")
    assert out.returncode == 1, out.stderr
    recs = [json.loads(p.read_text()) for p in (tmp_path / "r" / "mixed").glob("*.json")]
    assert sorted(r["status"] for r in recs) == ["failed", "ok"]
    again = cli("run", study, "--results", tmp_path / "r", "--no-retry-failed")
    assert again.returncode == 0 and "nothing to do" in again.stderr


@pytest.mark.slow
def test_run_k_runs_only_the_matching_cells(tmp_path):
    study = tmp_path / "mixed.toml"
    study.write_text(MIXED)
    out = cli("run", study, "--results", tmp_path / "r", "-k", "fault=none")
    assert out.returncode == 0, out.stderr
    recs = [json.loads(p.read_text()) for p in (tmp_path / "r" / "mixed").glob("*.json")]
    assert [r["config"]["fault"] for r in recs] == ["none"]


def test_k_terms_take_alternatives_and_all_terms_must_match():
    from loaderbench.study.plan import matches
    from loaderbench.study.study_file import load_study

    cells = load_study("loaderbench/studies/quick.toml").cells
    picked = [c for c in cells if matches(c, "num_workers=0|2 workload=cpu")]
    assert picked and {c.config["num_workers"] for c in picked} == {0, 2}
    assert {c.config["workload"] for c in picked} == {"cpu"}
    assert len(picked) < len([c for c in cells if matches(c, "num_workers=0|2")])


def test_plan_json_counts_and_estimates(tmp_path):
    out = cli("plan", "loaderbench/studies/quick.toml", "--results", tmp_path, "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["cells"] == 44 and plan["counts"]["missing"] == 44 * plan["repetitions"]
    assert plan["estimate"]["pending"] == 44 * plan["repetitions"] and plan["estimate"]["pending_s"] > 0


def test_a_cluster_study_plans_against_the_profiles_node():
    here = cli("validate", "loaderbench/studies/scaling.toml")
    assert here.returncode == 2 and "--cluster" in here.stderr
    out = cli("plan", "--cluster", "slurm/slurm.toml", "loaderbench/studies/scaling.toml")
    assert out.returncode == 0, out.stderr
    assert "node-hours" in out.stdout and "280 cells" in out.stdout
    js = json.loads(
        cli("validate", "--json", "--cluster", "slurm/slurm.toml", "loaderbench/studies/scaling.toml").stdout
    )
    assert js == [
        {
            "study_file": "loaderbench/studies/scaling.toml",
            "ok": True,
            "name": "scaling",
            "cells": 280,
            "repetitions": js[0]["repetitions"],
        }
    ]


def test_validate_json_reports_each_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[study]\nname = "b"\n[matrix]\nnum_workers = -1\n')
    out = cli("validate", "--json", "loaderbench/studies/quick.toml", bad)
    assert out.returncode == 2
    got = json.loads(out.stdout)
    assert [g["ok"] for g in got] == [True, False] and "num_workers = -1" in got[1]["error"]


def test_status_json_without_submissions(tmp_path):
    out = cli("status", "--results", tmp_path, "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == []


@pytest.mark.slow
def test_one_cell_measured_with_a_record(tmp_path):
    out = cli(
        "cell",
        "--set",
        "workload=sleep",
        "--set",
        "sleep_ms=1",
        "--set",
        "num_workers=2",
        "--set",
        "measure_batches=8",
        "--results",
        tmp_path,
        "--json",
    )
    assert out.returncode == 0, out.stderr
    (rec,) = json.loads(out.stdout[out.stdout.index("[") : out.stdout.rindex("]") + 1])
    assert rec["status"] == "ok" and rec["metrics"]["samples_per_s"] > 0
    assert len(list((tmp_path / "cell").glob("*.json"))) == 1


def test_a_bad_set_is_one_clear_error(tmp_path):
    out = cli("cell", "--set", "num_workers=[1, 2]", "--results", tmp_path)
    assert out.returncode == 2 and "one value per axis" in out.stderr and "Traceback" not in out.stderr
    out = cli("cell", "--set", "num_workerz=2", "--results", tmp_path)
    assert out.returncode == 2 and "did you mean 'num_workers'" in out.stderr

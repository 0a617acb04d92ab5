"""End to end through the CLI: a tiny study runs, records and figures appear, a rerun measures nothing."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

TINY = """
[study]
name = "tiny"
repetitions = 2
warmup_batches = 1
measure_batches = 3
[dataset]
kind = "synthetic-jpeg"
images = 16
[matrix]
workload = ["sleep", "jpeg"]
num_workers = [0, 2]
cores = [1]
batch_size = [4]
sleep_ms = [1.0]
"""


def cli(*args, module="loaderbench"):
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def test_tiny_study_records_and_figures(tmp_path):
    study = tmp_path / "tiny.toml"
    study.write_text(TINY)
    results, figures = tmp_path / "results", tmp_path / "figures"
    out = cli("run", study, "--results", results)
    assert out.returncode == 0, out.stderr
    files = sorted((results / "tiny").glob("*.json"))
    assert len(files) == 2 * 2 * 2
    for f in files:
        rec = json.loads(f.read_text())
        assert rec["status"] == "ok", rec.get("error")
        assert rec["schema"] == "loaderbench.record/2"
        assert len(rec["env"]["cpus_allowed"]) == rec["config"]["cores"] == 1
        m = rec["metrics"]
        assert m["samples_per_s"] > 0 and m["time_to_first_batch_s"] > 0
        assert m["memory_bytes"]["pss_peak"] > 0 and m["open_fds_peak"] > 0
        # every cell's epoch: warm-up and tail of the study's largest pipeline (2 workers x 2), a window of two
        assert m["window"] == {
            "mode": "steady",
            "warmup_batches": 4,
            "measure_batches": 8,
            "tail_batches": 4,
            "epoch_batches": 16,
            "window_batches": 8,
            "max_windows": 1,
        }
        assert len(rec["raw"]["got"][0]) == 16
    mtimes = {f: f.stat().st_mtime_ns for f in files}

    again = cli("run", study, "--results", results)
    assert again.returncode == 0 and "nothing to do" in again.stderr
    assert {f: f.stat().st_mtime_ns for f in files} == mtimes

    drawn = cli(results, "--figures", figures, "--formats", "png,pdf", module="loaderbench.analysis")
    assert drawn.returncode == 0, drawn.stderr
    for name in (
        "throughput_vs_workers.png",
        "throughput_vs_workers.pdf",
        "oversubscription.png",
        "summary.csv",
        "summary.md",
    ):
        assert (figures / "tiny" / name).stat().st_size > 0
    assert "tiny" in (figures / "tiny" / "summary.md").read_text()


def test_bad_study_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[study]\nname = "b"\n[matrix]\nnum_workers = [-1]\n')
    out = cli("run", bad, "--results", tmp_path / "r")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert str(bad) in out.stderr and "num_workers = -1" in out.stderr
    assert not (tmp_path / "r").exists()

"""`loaderbench compare A B` on two synthetic result sets with a known change."""

import json
import subprocess
import sys

import pytest

from loaderbench.schema.record import Record
from loaderbench.schema.store import Store
from tests.conftest import REPO

CELLS = {
    "c000000000000a1": {"workload": "cpu", "num_workers": 4, "cores": 2},
    "c000000000000b2": {"workload": "sleep", "num_workers": 2, "cores": 1},
}


def write(root, rates: dict[str, list[float]]) -> None:
    store = Store(root)
    for cell_id, values in rates.items():
        for rep, v in enumerate(values):
            config = {**CELLS.get(cell_id, {"workload": "jpeg", "num_workers": 1, "cores": 1}), "batch_size": 32}
            rec = Record(
                study="s",
                cell_id=cell_id,
                repetition=rep,
                config=config,
                status="ok",
                launcher={"kind": "local"},
                started_at="2026-01-01T00:00:00+00:00",
                finished_at="2026-01-01T00:00:01+00:00",
                metrics={"samples_per_s": v},
            )
            store.write(rec)


def test_compare_finds_the_known_change(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    write(a, {"c000000000000a1": base, "c000000000000b2": base})
    write(
        b,
        {
            "c000000000000a1": [v * 1.3 for v in base],
            "c000000000000b2": [v * 1.002 for v in base],
            "c000000000000c3": base,
        },
    )
    from loaderbench.analysis.report.compare_runs import compare_results, render

    report = compare_results(a, b)
    by = {c["cell_id"]: c for c in report["cells"]}
    assert by["c000000000000a1"]["verdict"] == "faster" and abs(by["c000000000000a1"]["ratio"] - 1.3) < 1e-9
    assert by["c000000000000a1"]["ci_low"] > 1.05
    assert by["c000000000000b2"]["verdict"] == "equivalent"
    assert report["only_in_b"] == ["s/c000000000000c3"] and report["only_in_a"] == []
    assert report["summary"]["verdicts"] == {"equivalent": 1, "faster": 1}
    text = render(report)
    assert "faster" in text and "cpu w=4 c=2" in text and "1 cells only in b" in text


def test_compare_command_prints_json(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, {"c000000000000a1": [100.0, 101.0, 99.0]})
    write(b, {"c000000000000a1": [80.0, 81.0, 79.0]})
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench", "compare", str(a), str(b), "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    (cell,) = json.loads(out.stdout)["cells"]
    assert cell["ratio"] < 0.85 and cell["n_a"] == cell["n_b"] == 3
    # every B below every A: at 3 v 3 the widest interval has exactly the 90% every decision is made at
    assert cell["verdict"] == "slower" and cell["ci_coverage"] == pytest.approx(0.9) and cell["ci_high"] < 0.95


def test_cells_that_differ_in_one_axis_get_different_labels(tmp_path):
    from loaderbench.analysis.report.compare_runs import compare_results

    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        store = Store(root)
        for cell_id, stage in (("c00000000000d01", "decode"), ("c00000000000f01", "full")):
            for rep in range(3):
                config = {"workload": "jpeg", "num_workers": 0, "cores": 1, "jpeg_stage": stage}
                store.write(
                    Record(
                        study="s",
                        cell_id=cell_id,
                        repetition=rep,
                        config=config,
                        status="ok",
                        launcher={"kind": "local"},
                        started_at="2026-01-01T00:00:00+00:00",
                        finished_at="2026-01-01T00:00:01+00:00",
                        metrics={"samples_per_s": 100.0 + rep},
                    )
                )
    labels = sorted(c["label"] for c in compare_results(a, b)["cells"])
    assert labels == ["jpeg w=0 c=1 jpeg_stage=decode", "jpeg w=0 c=1 jpeg_stage=full"]


def test_a_study_folder_instead_of_a_results_folder_is_one_clear_error(tmp_path):
    a = tmp_path / "a"
    write(a, {"c000000000000a1": [100.0, 101.0, 99.0]})
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench", "compare", str(a / "s"), str(a / "s")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "give a results folder" in out.stderr and str(a / "s") in out.stderr

"""Adding a question is one module and one study file: with a copy of the package that has only those two added, the
study file validates, `make figures` decides the new question's claim on its records and draws its figure, and the
findings page has a block for its study. Nothing else is touched."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import loaderbench

TOY = '''"""Do two workers load faster than none? (a toy question, added by a test)"""

from __future__ import annotations

from loaderbench.analysis.rules.claim import Metric, Question
from loaderbench.analysis.rules.kinds import Shift
from loaderbench.analysis.table.records import ok_rows
from loaderbench.stats.verdicts import at_least

FASTER = 1.5

two_beat_none = Shift(
    "samples_per_s", "samples/s", {"num_workers": 0}, {"num_workers": 2}, at_least(FASTER), frame=ok_rows
)


def toy_curve(df, study, out):
    """Samples/s against workers."""
    import matplotlib.pyplot as plt  # the figure's libraries only when it is drawn

    from loaderbench.analysis.figures.questions.shared import claims_header, drawable, line_points, save_with_note

    rows = drawable(df)
    fig, ax = plt.subplots(figsize=(5, 3))
    points = line_points(ax, ok_rows(rows), "num_workers", "samples_per_s", [])
    claims_header(fig, f"Toy ({study})", df, study, "toy")
    return save_with_note(fig, df, study, out, "toy_curve", "Median over repetitions.", points, per="point")


QUESTION = Question(
    "toy",
    ("num_workers",),
    lambda rows: "question" in rows and bool((rows["question"] == "toy").any()),
    figure="loaderbench.analysis.questions.toy:toy_curve",
    tables={"toy": (Metric("samples_per_s", "samples/s"),)},
)
QUESTION.add("two workers load faster than none", two_beat_none)
'''

STUDY = """[study]
name = "toy"
question = "toy"

[matrix]
workload = "sleep"
num_workers = [0, 2]
"""


def _copy_with_toy(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    shutil.copytree(
        Path(loaderbench.__file__).parent, root / "loaderbench", ignore=shutil.ignore_patterns("__pycache__")
    )
    (root / "loaderbench" / "analysis" / "questions" / "toy.py").write_text(TOY)
    (root / "loaderbench" / "studies" / "toy.toml").write_text(STUDY)
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _records(root: Path, results: Path) -> None:
    code = f"""
from loaderbench.fake_records.questions import rec
from loaderbench.fake_records.studies import write_records
records = [
    rec("toy", {{"num_workers": n, "question": "toy"}}, {{"samples_per_s": rate * (1 + 0.01 * r)}}, r)
    for n, rate in ((0, 100.0), (2, 190.0))
    for r in range(5)
]
write_records({str(results)!r}, records)
"""
    done = _run(root, "-c", code)
    assert done.returncode == 0, done.stderr


def test_a_toy_question_is_one_module_and_one_study_file(tmp_path):
    root = _copy_with_toy(tmp_path)
    checked = _run(root, "-m", "loaderbench", "validate", str(root / "loaderbench" / "studies" / "toy.toml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    results, figures = tmp_path / "results", tmp_path / "figures"
    _records(root, results)
    drawn = _run(root, "-m", "loaderbench.analysis", str(results), "--figures", str(figures))
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    with open(figures / "claims.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["claim"] == "two workers load faster than none")
    assert (row["question"], row["study"], row["verdict"]) == ("toy", "toy", "holds"), row
    assert "is at least 1.5x" in row["rule"], row  # the kind wrote the rule's text from its threshold
    assert list(figures.rglob("toy_curve.png"))
    block = _run(
        root,
        "-c",
        "from loaderbench.analysis.findings.blocks import BLOCKS; "
        "from loaderbench.analysis.table.records import load_records; "
        f"df, _ = load_records({str(results)!r}); print(BLOCKS['toy'].render([df], [{{}}]))",
    )
    assert block.returncode == 0, block.stderr
    assert "samples/s" in block.stdout and "| **holds** |" in block.stdout
    # the question is the package's own only in the copy
    assert "toy" not in json.dumps([p.name for p in Path(loaderbench.__file__).parent.rglob("toy*")])

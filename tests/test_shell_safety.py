"""Paths and names never reach a shell unquoted: a study or results path with spaces, quotes, `;`, `$( )` or
backticks runs the study and nothing else, locally and in the commands built for Slurm and containers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

EVIL = "we ird; touch PWNED1 'q' \"dq\" $(touch PWNED2) `touch PWNED3` & touch PWNED4 | cat"

TINY = """[study]
name = "tiny"
repetitions = 1
warmup_batches = 1
measure_batches = 2

[matrix]
workload = "fault"
num_workers = 0
batch_size = 2
"""


def _no_markers(*dirs: Path) -> None:
    for d in dirs:
        found = [p for p in d.rglob("PWNED*")] if d.is_dir() else []
        assert not found, f"a shell ran injected text: {found}"


def test_local_run_with_a_hostile_path(tmp_path):
    folder = tmp_path / EVIL
    folder.mkdir()
    study = folder / "study; touch PWNED5 'x'.toml"
    study.write_text(TINY)
    results = tmp_path / f"results {EVIL}"
    for cmd in (["plan", study, "--results", results], ["run", study, "--results", results]):
        out = subprocess.run(
            [sys.executable, "-m", "loaderbench", *map(str, cmd)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
    recs = list((results / "tiny").glob("*.json"))
    assert len(recs) == 1 and json.loads(recs[0].read_text())["status"] == "ok"
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench.analysis", str(results), "--figures", str(tmp_path / f"fig {EVIL}")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    _no_markers(tmp_path, REPO)


def test_slurm_and_container_commands_are_quoted(tmp_path, monkeypatch):
    """The sbatch script built for an Apptainer profile whose image, binds and log folder are hostile: run by
    bash with stand-ins for srun and apptainer, every path arrives as one argument and nothing else runs."""
    pytest.importorskip("submitit")
    from loaderbench.launch.slurm import make_executor
    from loaderbench.study.cluster_profile import load_profile

    weird = tmp_path / EVIL
    weird.mkdir()
    image, bind = weird / "img 'x'.sif", weird / "data; dir"
    profile = tmp_path / "p.toml"
    profile.write_text(
        '[slurm]\nnode_cores = 4\n[container]\nkind = "apptainer"\n'
        f"image = {json.dumps(str(image))}\nbinds = [{json.dumps(str(bind))}]\n"
        f"python = {json.dumps('python3; touch PWNED6')}\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "argv.jsonl"
    for tool in ("srun", "apptainer", "module"):
        fake = bin_dir / tool
        fake.write_text(
            f"#!{sys.executable}\nimport json, sys\nopen({str(log)!r}, 'a').write(json.dumps(sys.argv) + '\\n')\n"
        )
        fake.chmod(0o755)
    # submitit's SlurmExecutor looks for `srun` on PATH when it is built: the stand-in, not a real Slurm that
    # only exists here if another test happened to install it first
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    logs = weird / "logs $(touch PWNED7)"
    executor = make_executor(load_profile(profile), logs, cores=1, gpus=0, study="tiny", time_limit_min=5)
    slurm = executor._executor
    script = slurm._make_submission_file_text(slurm._submitit_command_str, "uid")
    (tmp_path / "job.sh").write_text(script)
    out = subprocess.run(["bash", str(tmp_path / "job.sh")], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    srun = next(c for c in calls if Path(c[0]).name == "srun")
    command = srun[srun.index("apptainer") :]
    assert command[:3] == ["apptainer", "exec", "--nv"]
    assert f"--bind={bind}" in command and str(image) in command
    assert command[command.index(str(image)) + 1 :] == [
        "python3; touch PWNED6",
        "-u",
        "-m",
        "submitit.core._submit",
        str(logs),
    ]
    assert any(str(logs) in a for a in srun[: srun.index("apptainer")]), "the log paths reach srun whole"
    _no_markers(tmp_path, REPO)


def test_python_command_round_trips():
    """What the container's interpreter line says is what a shell gives back, argument for argument."""
    from loaderbench.launch.slurm import python_command

    class C:
        kind, image, binds, python = "apptainer", f"/x/{EVIL}.sif", [f"/d/{EVIL}"], "python3"

    class S:
        container = C()

    class P:
        settings = S()

    line = python_command(P())
    assert shlex.split(line) == ["apptainer", "exec", "--nv", f"--bind=/d/{EVIL}", f"/x/{EVIL}.sif", "python3"]

"""The checks before a study goes to a Slurm queue (loaderbench.launch.preflight): a container image that is not
there, a folder the nodes cannot write, a time limit shorter than a cell, each one clear error that names the
profile and the key, before anything is submitted; through `loaderbench submit --dry-run`, which needs no Slurm."""

from __future__ import annotations

from pathlib import Path

import pytest

from loaderbench.cli import main
from loaderbench.errors import ProfileError
from loaderbench.launch.preflight import check_submission, writable
from loaderbench.study.cluster_profile import load_profile
from loaderbench.study.estimate import StudyEstimate


def profile(tmp_path: Path, slurm: str = "", container: str = "") -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(f"[slurm]\nnode_cores = 2\ntime_limit_min = 5\n{slurm}\n[container]\n{container}\n")
    return path


def estimate(longest_s: float) -> StudyEstimate:
    return StudyEstimate(
        cells=1, repetitions=1, pending=1, pending_s=longest_s, longest_s=longest_s, core_hours=0.0, calibrated=0
    )


def problems(exc: pytest.ExceptionInfo) -> list[str]:
    return [ln for ln in str(exc.value).splitlines() if ln.startswith("  - ")]


def test_a_submission_that_would_run_passes(tmp_path):
    p = load_profile(profile(tmp_path))
    check_submission(p, tmp_path / "results", tmp_path / "logs", estimate(60.0))
    assert (tmp_path / "results").is_dir() and (tmp_path / "logs").is_dir()
    assert not list((tmp_path / "results").iterdir())  # the write test leaves nothing behind


def test_a_missing_image_is_one_error(tmp_path):
    sif = tmp_path / "images" / "loaderbench.sif"
    p = load_profile(profile(tmp_path, container=f'kind = "apptainer"\nimage = "{sif}"'))
    with pytest.raises(ProfileError) as exc:
        check_submission(p, tmp_path / "results", tmp_path / "logs", estimate(60.0))
    (problem,) = problems(exc)
    assert str(p.path) in str(exc.value) and "[container] image" in problem and str(sif) in problem
    assert "make sif" in problem
    sif.parent.mkdir()
    sif.write_bytes(b"SIF")
    check_submission(p, tmp_path / "results", tmp_path / "logs", estimate(60.0))


def test_a_folder_nobody_can_write_is_one_error(tmp_path):
    # a path under a regular file cannot be made, not even by root
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert writable(blocked / "results") is not None
    p = load_profile(profile(tmp_path))
    with pytest.raises(ProfileError) as exc:
        check_submission(p, blocked / "results", tmp_path / "logs", estimate(60.0))
    (problem,) = problems(exc)
    assert problem.startswith("  - [slurm] results:") and str(blocked / "results") in problem
    assert "every node must be able to write it" in problem
    with pytest.raises(ProfileError) as exc:
        check_submission(p, tmp_path / "results", blocked / "logs", estimate(60.0))
    (problem,) = problems(exc)
    assert problem.startswith("  - [slurm] logs:")


def test_a_time_limit_shorter_than_a_cell_is_one_error(tmp_path):
    p = load_profile(profile(tmp_path))
    check_submission(p, tmp_path / "r", tmp_path / "l", estimate(5 * 60.0))  # exactly the limit: fits
    with pytest.raises(ProfileError) as exc:
        check_submission(p, tmp_path / "r", tmp_path / "l", estimate(5 * 60.0 + 1))
    (problem,) = problems(exc)
    assert "[slurm] time_limit_min = 5" in problem and "5m01s" in problem


def test_every_problem_at_once(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    p = load_profile(profile(tmp_path, container='kind = "apptainer"\nimage = "/nowhere/x.sif"'))
    with pytest.raises(ProfileError) as exc:
        check_submission(p, blocked / "r", blocked / "l", estimate(3600.0))
    assert len(problems(exc)) == 4


SLOW_STUDY = """
[study]
name = "slow"
repetitions = 1
warmup_batches = 1
measure_batches = 200
timeout_s = 120
[matrix]
workload = ["sleep"]
sleep_ms = [200.0]
num_workers = [0]
cores = [1]
batch_size = [32]
"""


@pytest.mark.parametrize(
    "slurm, container, expect",
    [
        (
            "",
            'kind = "apptainer"\nimage = "/nowhere/loaderbench.sif"',
            "[container] image = '/nowhere/loaderbench.sif'",
        ),
        ('results = "{blocked}/results"\nlogs = "{tmp}/logs"', "", "[slurm] results:"),
        ("", "", "[slurm] time_limit_min = 5: shorter than the longest cell repetition's estimate"),
    ],
)
def test_submit_dry_run_fails_on_each_check_with_one_error_and_exit_2(tmp_path, capsys, slurm, container, expect):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    study = tmp_path / "slow.toml"
    # a fast study for the image and folder checks; the slow one (200 ms a sample) for the time limit
    text = SLOW_STUDY if "time_limit" in expect else SLOW_STUDY.replace("200.0", "0.0")
    study.write_text(text)
    prof = profile(tmp_path, slurm=slurm.format(blocked=blocked, tmp=tmp_path), container=container)
    rc = main(
        ["submit", str(study), "--cluster", str(prof), "--dry-run"]
        + ([] if slurm else ["--results", str(tmp_path / "r")])
    )
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith(f"error: {prof}: cannot submit:") and expect in err
    assert err.count("\n  - ") == 1, err
    assert "Traceback" not in err

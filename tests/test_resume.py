"""Checkpointable loading (loaderbench.measure.resume, checkpoint_state): a loader resumed from its saved state after
its process was SIGKILLed delivers the rest of the epoch exactly once and in order, under fork and spawn, and
replays what torchdata's snapshots leave to replay; a damaged or foreign state is a classified failure. The
end-to-end cells run through the real launcher and runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from loaderbench.errors import StudyError
from loaderbench.measure.failures import classify_exception
from loaderbench.storage.exactly_once import resumed_sequence
from loaderbench.study.one_cell import one_cell_study
from tests.conftest import REPO


def test_a_resumed_sequence_that_continues_the_reference_is_exactly_once():
    got = resumed_sequence([3, 1, 2, 0], [3, 1], [2, 0])
    assert got["exactly_once"] and got["same_order"] and got["lost"] == got["duplicated"] == 0


def test_a_resume_that_restarts_from_zero_duplicates_and_one_that_skips_loses():
    restarted = resumed_sequence([3, 1, 2, 0], [3, 1], [3, 1, 2, 0])
    assert restarted["duplicated"] == 2 and restarted["lost"] == 0 and not restarted["exactly_once"]
    skipped = resumed_sequence([3, 1, 2, 0], [3, 1], [0])
    assert skipped["lost"] == 1 and skipped["first_divergence"] == 2 and not skipped["exactly_once"]


def test_a_sampler_with_replacement_may_repeat_what_the_reference_repeats():
    got = resumed_sequence([1, 1, 2], [1], [1, 2])
    assert got["exactly_once"] and got["same_order"]
    reordered = resumed_sequence([1, 2, 3], [1], [3, 2])
    assert reordered["exactly_once"] and not reordered["same_order"] and reordered["first_divergence"] == 1


@pytest.mark.parametrize("damage", ["truncate", "garbage", "missing"])
def test_a_damaged_state_file_is_refused_and_classified(tmp_path, damage):
    from loaderbench.measure.checkpoint_state import CheckpointError, load_state, save_state

    path = str(tmp_path / "state.pt")
    save_state(path, {"_num_yielded": 3, "_snapshot": {"_snapshot_step": 2}})
    assert load_state(path)["_num_yielded"] == 3
    if damage == "truncate":
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) // 2)
    elif damage == "garbage":
        with open(path, "wb") as fh:
            fh.write(b"not a checkpoint")
    else:
        os.remove(path)
    with pytest.raises(CheckpointError) as caught:
        load_state(path)
    classified = classify_exception(caught.value)
    assert classified["kind"] == "checkpoint_error" and path in classified["message"]


def test_a_state_saved_by_another_torchdata_is_refused(tmp_path, monkeypatch):
    import loaderbench.measure.checkpoint_state as checkpoint_state

    path = str(tmp_path / "state.pt")
    real = checkpoint_state.library_versions
    monkeypatch.setattr(checkpoint_state, "library_versions", lambda: {**real(), "torchdata": "0.0.1"})
    checkpoint_state.save_state(path, {"_num_yielded": 3})
    monkeypatch.setattr(checkpoint_state, "library_versions", real)
    with pytest.raises(checkpoint_state.CheckpointError, match=r"saved by torchdata 0\.0\.1"):
        checkpoint_state.load_state(path)


def test_resume_at_needs_a_stateful_loader_and_one_rank():
    with pytest.raises(StudyError, match="snapshot_every_n_steps >= 1 with resume_at"):
        one_cell_study(["workload=inmem", "resume_at=3"])
    with pytest.raises(StudyError, match="ranks = 1 with resume_at"):
        one_cell_study(["workload=inmem", "resume_at=3", "snapshot_every_n_steps=2", "ranks=2"])
    (cell,) = one_cell_study(["workload=shards", "resume_at=3", "snapshot_every_n_steps=2"]).cells
    assert cell["resume_at"] is None  # an iterable dataset's samples have no index to check a resume by


# A study through the real launcher and runner, in a fresh interpreter: its records, one per cell. With truncate,
# the state the interrupted loader saves is cut in half, as a kill during a write that is not atomic leaves it.
SCRIPT = r"""
import json, sys
args = json.loads(sys.argv[1])
if args["truncate"]:
    import loaderbench.measure.checkpoint_state as checkpoint_state
    real = checkpoint_state.save_state

    def truncated(path, state):
        size = real(path, state)
        with open(path, "r+b") as fh:
            fh.truncate(size // 2)
        return size // 2

    checkpoint_state.save_state = truncated
from loaderbench.launch.local import run_local
from loaderbench.schema.store import Store
from loaderbench.study.study_file import load_study

study = load_study(args["study"])
store = Store(args["results"])
run_local(study, store, retry_failed=True)
print(json.dumps([store.read(study.name, cell.cell_id, 0).to_json() for cell in study.cells]))
"""

# 64 in-memory samples in batches of 4: 16 batches. Snapshots every 4 steps; the kill comes after step 6, between
# the snapshots at steps 4 and 8, so a resume with workers reads steps 5 and 6 again.
STUDY = """
[study]
name = "resume"
repetitions = 1
window = "epoch"
warmup_batches = 0
measure_batches = 16
timeout_s = 120

[matrix]
workload = "inmem"
batch_size = 4
cores = 2
snapshot_every_n_steps = 4
resume_at = 6
num_workers = {workers}
start_method = {methods}
"""


def run_study(tmp_path, workers: list[int], methods: list[str], truncate: bool = False) -> dict:
    """{(num_workers, start_method): record} of the study's cells (start_method None without workers)."""
    path = tmp_path / "resume.toml"
    path.write_text(STUDY.format(workers=json.dumps(workers), methods=json.dumps(methods)))
    args = {"study": str(path), "results": str(tmp_path / "results"), "truncate": truncate}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(args)],
        cwd=REPO,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    records = json.loads(out.stdout.strip().splitlines()[-1])
    return {(r["config"]["num_workers"], r["config"]["start_method"]): r for r in records}


@pytest.mark.slow
def test_a_loader_killed_between_snapshots_resumes_exactly_once_under_fork_and_spawn(tmp_path):
    records = run_study(tmp_path, [0, 2], ["fork", "spawn"])
    assert set(records) == {(0, None), (2, "fork"), (2, "spawn")}
    for (workers, method), rec in records.items():
        assert rec["status"] == "ok", (method, rec.get("error"))
        resume = rec["metrics"]["resume"]
        assert resume["delivered_before"] == 6 * 4 and resume["delivered_after"] == 10 * 4, resume
        assert resume["exactly_once"] and resume["same_order"] and resume["lost"] == resume["duplicated"] == 0
        assert rec["cleanup"]["processes_killed"] == 0, rec["cleanup"]  # the kill left nothing for the runner
        if workers:
            assert resume["snapshot_step"] == 4 and resume["steps_since_snapshot"] == 2, resume
            assert resume["replayed_samples"] == 2 * 4, resume  # the two steps since the last snapshot, again
        else:  # the loader's own state, taken at the step: the sampler skips ahead, nothing is loaded again
            assert resume["replayed_samples"] == 0, resume


@pytest.mark.slow
def test_a_truncated_state_fails_the_cell_never_restarts_the_epoch(tmp_path):
    (rec,) = run_study(tmp_path, [2], ["fork"], truncate=True).values()
    assert rec["status"] == "failed" and rec["error"]["kind"] == "checkpoint_error", rec.get("error")
    assert "truncated or corrupt" in rec["error"]["message"]

"""The custom workload: a user's own dataset from a factory named in the study file.

Bad factories are one clear StudyError each before anything runs; good ones measure like any workload (map-style
and iterable, fork, spawn and forkserver workers importing the user's module from a folder outside the
project), with the module's hash in the cell id and the record; an iterable dataset whose workers all yield
the same samples gets a warning in its record; faults in the user's dataset are classified records.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loaderbench.errors import StudyError
from loaderbench.study.study_file import load_study

PIPELINE = '''
import time
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


class Squares(Dataset):
    def __init__(self, n, size):
        self.n, self.size = n, size

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((self.size,), float(i)), i


class Stream(IterableDataset):
    """Counts 0..n-1, each worker its share (or, unsharded, every worker all of it)."""

    def __init__(self, n, shard):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        start, step = (info.id, info.num_workers) if (self.shard and info is not None) else (0, 1)
        for i in range(start, self.n, step):
            yield torch.full((8,), float(i)), i


class Raising(Squares):
    def __getitem__(self, i):
        raise ValueError(f"cannot decode sample {i}: truncated file")


def make(n=64, size=16):
    return Squares(n, size)


def sharded(n=100000):
    return Stream(n, shard=True)


def unsharded(n=100000):
    return Stream(n, shard=False)


def short(n=100000):
    return Stream(5, shard=True)


def raising(n=64, size=16):
    return Raising(n, size)


def with_collate(n=64, size=16):
    return {"dataset": Squares(n, size), "collate_fn": collate}


def collate(samples):
    return torch.stack([s[0] for s in samples]) * 2


def needs_root(root, image_size=224):
    return Squares(8, image_size)


def fails(n=64, size=16):
    raise FileNotFoundError("/data/train does not exist")


def not_a_dataset(n=64, size=16):
    return 42


def a_generator(n=64, size=16):
    yield 1


def hangs(n=64, size=16):
    time.sleep(600)


def crashes(n=64, size=16):
    import ctypes
    ctypes.string_at(0)


def unpicklable(n=64, size=16):
    d = Squares(n, size)
    d.transform = lambda x: x
    return d
'''

EDITED = """
from pipe import Squares


def make(n=64):
    return Squares(n, 4)
"""


def study_text(name: str, factories: list[str], extra: str = "", args: str = "", timeout_s: float = 120) -> str:
    listed = ", ".join(f'"{f}"' for f in factories)
    return (
        f'[study]\nname = "{name}"\nrepetitions = 1\nwarmup_batches = 1\nmeasure_batches = 4\nremeasure_budget = 0\n'
        f'timeout_s = {timeout_s}\n[matrix]\nworkload = ["custom"]\nfactory = [{listed}]\nbatch_size = [4]\n{extra}\n'
        f"[factory_args]\n{args}\n"
    )


@pytest.fixture
def pipeline_dir(tmp_path: Path) -> Path:
    """A folder outside the project holding the user's modules `pipe.py` and `edited.py`."""
    folder = tmp_path / "my_project"
    folder.mkdir()
    (folder / "pipe.py").write_text(PIPELINE)
    (folder / "edited.py").write_text(EDITED)
    return folder


def write_study(folder: Path, text: str) -> Path:
    path = folder / "study.toml"
    path.write_text(text)
    return path


def problem_of(folder: Path, factory: str, args: str = "", timeout_s: float = 120, extra: str = "") -> str:
    with pytest.raises(StudyError) as exc:
        load_study(write_study(folder, study_text("bad", [factory], args=args, timeout_s=timeout_s, extra=extra)))
    return str(exc.value)


# --- bad factories: one clear error each, before anything runs ------------------------------------------------


def test_module_not_found_names_the_file_searched_and_the_folder(pipeline_dir):
    msg = problem_of(pipeline_dir, "pipline:make")
    assert str(pipeline_dir / "study.toml") in msg
    assert "factory = 'pipline:make'" in msg and "no module 'pipline'" in msg
    assert str(pipeline_dir / "pipline.py") in msg and f"folder {pipeline_dir}" in msg and "sys.path" in msg
    assert "did you mean 'pipe'" in msg


def test_no_such_callable_lists_what_the_module_defines(pipeline_dir):
    msg = problem_of(pipeline_dir, "pipe:maek")
    assert "has no 'maek'" in msg and str(pipeline_dir / "pipe.py") in msg
    assert "make" in msg and "sharded" in msg


def test_a_factory_that_raises_is_reported_with_its_message(pipeline_dir):
    msg = problem_of(pipeline_dir, "pipe:fails")
    assert "raised FileNotFoundError: /data/train does not exist" in msg and "pipe.py:" in msg


@pytest.mark.parametrize(
    "factory, says",
    [
        ("pipe:not_a_dataset", "returned an int, not a dataset; allowed: a torch.utils.data.Dataset"),
        ("pipe:a_generator", "returned a generator, an iterator"),
    ],
)
def test_a_factory_returning_no_dataset_says_what_it_returned(pipeline_dir, factory, says):
    assert says in problem_of(pipeline_dir, factory)


def test_arguments_the_factory_does_not_accept_are_named_with_its_signature(pipeline_dir):
    msg = problem_of(pipeline_dir, "pipe:make", args="sise = 3\nn = 8")
    assert "[factory_args] sise: not accepted by pipe:make(n=64, size=16); it accepts n, size" in msg
    assert "did you mean size" in msg


def test_a_required_argument_missing_from_factory_args_is_named(pipeline_dir):
    msg = problem_of(pipeline_dir, "pipe:needs_root")
    assert "[factory_args] root: missing; pipe:needs_root(root, image_size=224) requires it" in msg


def test_a_factory_that_hangs_ends_at_the_studys_timeout(pipeline_dir):
    msg = problem_of(pipeline_dir, "pipe:hangs", timeout_s=2)
    assert "did not return within timeout_s = 2 s" in msg


def test_a_factory_that_crashes_the_checking_process_is_reported(pipeline_dir):
    msg = problem_of(pipeline_dir, "pipe:crashes")
    assert "the process checking it was killed by SIGSEGV" in msg


def test_spawn_needs_a_dataset_that_pickles(pipeline_dir):
    msg = problem_of(pipeline_dir, "pipe:unpicklable", extra='num_workers = [2]\nstart_method = ["spawn"]')
    assert "cannot be pickled" in msg and "start_method = spawn" in msg and "lambda" in msg


def test_custom_without_a_factory_and_a_malformed_one(pipeline_dir):
    path = write_study(pipeline_dir, '[study]\nname = "x"\n[matrix]\nworkload = "custom"\n')
    with pytest.raises(StudyError, match=r"\[matrix\] factory: missing; allowed: workload = \"custom\" needs"):
        load_study(path)
    assert "not of the allowed form; allowed: module:callable" in problem_of(pipeline_dir, "pipe.make")


# --- the duplicate check, seen alone ----------------------------------------------------------------------------


def test_samples_are_identified_by_their_strings_through_random_augmentations():
    import torch

    from loaderbench.measure.observers import sample_fingerprints

    keys = ["a", "b", "c", "d"]
    first, by_strings = sample_fingerprints([torch.rand(4, 3, 8, 8), torch.arange(4), keys])
    again, _ = sample_fingerprints([torch.rand(4, 3, 8, 8), torch.arange(4), keys])  # other crops of the same keys
    assert by_strings and first == again and len(set(first)) == 4
    plain, by_strings = sample_fingerprints([torch.arange(8.0).reshape(4, 2), torch.zeros(4)])
    assert not by_strings and len(set(plain)) == 4


def test_only_the_tail_is_checked_and_each_epoch_apart():
    import torch

    from loaderbench.measure.observers import ObservedStep, TailDuplicates

    tail = TailDuplicates(first_index=2, num_workers=2)
    step = ObservedStep(lambda batch: None, [tail])
    same = [torch.zeros(2, 3), torch.tensor([7, 8])]
    for _ in range(2):  # two epochs of four batches: the same two samples in every batch
        for _ in range(4):
            step(same)
        step.next_epoch()
    # batches 2 and 3 of each epoch are checked: 4 samples per epoch, the second batch's 2 seen before
    assert tail.metrics() == {"duplicate_samples": 4, "duplicate_checked_samples": 8}
    assert "with num_workers = 2" in tail.warnings()[0]
    assert not TailDuplicates(first_index=0, num_workers=1).warnings()


# --- identity: arguments and the module's content, never its folder -------------------------------------------


def test_cell_id_follows_the_arguments_and_the_module_file_not_its_folder(pipeline_dir, tmp_path):
    ids = lambda path: sorted(c.cell_id for c in load_study(path).cells)
    base = ids(write_study(pipeline_dir, study_text("ident", ["pipe:make"], args="n = 8")))
    moved = tmp_path / "elsewhere"
    shutil.copytree(pipeline_dir, moved)
    study = load_study(moved / "study.toml")
    assert ids(moved / "study.toml") == base
    assert study.cells[0].config["factory_root"] == str(moved.resolve())
    assert ids(write_study(pipeline_dir, study_text("ident", ["pipe:make"], args="n = 9"))) != base
    (pipeline_dir / "pipe.py").write_text(PIPELINE + "\n# tuned\n")
    assert ids(write_study(pipeline_dir, study_text("ident", ["pipe:make"], args="n = 8"))) != base


# --- measured through the local launcher ----------------------------------------------------------------------


def records(results: Path, study: str) -> dict[tuple, dict]:
    out = {}
    for f in (results / study).glob("*.json"):
        rec = json.loads(f.read_text())
        c = rec["config"]
        out[(c["factory"], c["num_workers"], c["start_method"])] = rec
    return out


@pytest.mark.slow
def test_map_style_and_iterable_cells_measure_and_flag_unsharded_workers(pipeline_dir, tmp_path):
    from loaderbench.launch.local import run_local
    from loaderbench.schema.store import Store
    from loaderbench.workloads.factory import sha256_file

    extra = (
        'num_workers = [0, 2]\nstart_method = ["fork", "spawn", "forkserver"]\n'
        '[[exclude]]\nfactory = ["pipe:sharded", "pipe:unsharded", "pipe:with_collate"]\n'
        'start_method = ["spawn", "forkserver"]\n'
        '[[exclude]]\nnum_workers = 0\nstart_method = ["spawn", "forkserver"]'
    )
    study = load_study(
        write_study(
            pipeline_dir,
            study_text("custom-ok", ["pipe:make", "pipe:sharded", "pipe:unsharded", "pipe:with_collate"], extra=extra),
        )
    )
    summary = run_local(study, Store(tmp_path / "results"))
    assert summary.measured == 10 and not summary.failed, [r["error"] for r in summary.failed]
    recs = records(tmp_path / "results", "custom-ok")
    digest = sha256_file(pipeline_dir / "pipe.py")
    for rec in recs.values():
        assert rec["status"] == "ok" and rec["metrics"]["samples_per_s"] > 0
        assert rec["metrics"]["memory_bytes"]["pss_peak"] > 0 and rec["metrics"]["open_fds_peak"] > 0  # probed
        assert rec["config"]["factory_sha256"] == digest
        assert rec["env"]["factory"] == {
            "spec": rec["config"]["factory"],
            "module_file": str(pipeline_dir / "pipe.py"),
            "root": str(pipeline_dir),
            "sha256": digest,
        }
    for method in ("fork", "spawn", "forkserver"):  # workers started fresh import pipe.py from its folder too
        assert recs[("pipe:make", 2, method)]["metrics"]["samples_per_s"] > 0
    unsharded = recs[("pipe:unsharded", 2, "fork")]
    assert unsharded["metrics"]["duplicate_samples"] > 0
    assert "duplicate samples" in unsharded["warnings"][0] and "get_worker_info()" in unsharded["warnings"][0]
    for key in [("pipe:sharded", 2, "fork"), ("pipe:sharded", 0, None), ("pipe:unsharded", 0, None)]:
        rec = recs[key]
        assert rec["metrics"]["duplicate_checked_samples"] > 0 and rec["metrics"]["duplicate_samples"] == 0
        assert "warnings" not in rec
    assert "duplicate_samples" not in recs[("pipe:make", 2, "fork")]["metrics"]  # map-style: sampled by the suite


@pytest.mark.slow
def test_faults_in_the_users_dataset_are_classified_records(pipeline_dir, tmp_path):
    from loaderbench.launch.local import run_local
    from loaderbench.schema.store import Store

    extra = "num_workers = [2]\nulimit_nofile = [512]\nmemory_limit_mb = [4096]"
    study = load_study(
        write_study(
            pipeline_dir, study_text("custom-faults", ["pipe:raising", "pipe:short", "edited:make"], extra=extra)
        )
    )
    (pipeline_dir / "edited.py").write_text(EDITED.replace("n=64", "n=65"))  # after validation, before the run
    run_local(study, Store(tmp_path / "results"))
    recs = records(tmp_path / "results", "custom-faults")
    raising = recs[("pipe:raising", 2, "fork")]
    assert raising["status"] == "failed" and raising["error"]["kind"] == "worker_error"
    assert "ValueError: cannot decode sample" in raising["error"]["message"]
    short = recs[("pipe:short", 2, "fork")]
    assert short["status"] == "failed" and short["error"]["kind"] == "dataset_error"
    assert "epoch ended after 0 batches; each epoch needs" in short["error"]["message"]
    changed = recs[("edited:make", 2, "fork")]
    assert (
        changed["error"]["kind"] == "dataset_error"
        and "changed since the study was validated" in changed["error"]["message"]
    )
    for rec in recs.values():
        assert rec["env"]["limits"]["nofile"] == 512


def test_the_shipped_examples_validate():
    from tests.conftest import REPO

    for name in ("imagefolder", "webdataset_tar"):
        study = load_study(REPO / "examples" / name / "study.toml", max_cores=2)
        assert {c["workload"] for c in study.cells} == {"custom"}
        assert all(len(c.config["factory_sha256"]) == 64 for c in study.cells)

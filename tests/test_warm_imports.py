"""The runner's warm imports (loaderbench.measure.warm): a process that forks cells imports torchvision and
scipy only for the cells that use them, and no cell's measuring loop imports a module of torchvision, scipy,
torch, numpy, PIL or pyarrow: what a cell uses was imported before the loop, in the runner or in the cell's set-up.
The host's fingerprint names torchvision's version without importing it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import torchvision

# A fresh interpreter, as a task process starts: the warm imports of the listed cells, then each cell's rank
# measured here (num_workers = 0: its samples load in this process), the modules new during its loop listed.
SCRIPT = r"""
import json, sys
args = json.loads(sys.argv[1])
from loaderbench.measure.warm import study_imports, warm_imports
from loaderbench.study.one_cell import one_cell_study

cells = [one_cell_study(settings).cells[0].typed for settings in args["cells"]]
warm_imports(study_imports(cells))
warmed = sorted(m for m in sys.modules if m.split(".")[0] in ("torchvision", "scipy"))

from loaderbench.measure.loop import run_loop
from loaderbench.measure.rank import measure_rank
from loaderbench.workloads import DataSource

prepared = None
if args["dataset"]:
    from loaderbench.datasets import DatasetSpec, ensure_dataset
    spec = DatasetSpec(kind="synthetic-jpeg", images=4)
    prepared = ensure_dataset(spec, cache_dir=args["dataset"], workers=1, overrides={"scale": 0.1})

in_loops = []
for cell in cells:
    def loop(*a, **kw):
        before = set(sys.modules)
        try:
            return run_loop(*a, **kw)
        finally:
            in_loops.append(sorted(set(sys.modules) - before))
    metrics, _ = measure_rank(cell, 0, DataSource(prepared), loop=loop)
    assert metrics["measured_samples"] > 0, metrics
from loaderbench.measure.fingerprint import package_versions

version = package_versions()["torchvision"]  # what the host's fingerprint says, after the cells
print(json.dumps({"warmed": warmed, "in_loops": in_loops, "torchvision": version, "imported": list(sys.modules)}))
"""

SMALL = ["num_workers=0", "batch_size=2", "warmup_batches=1", "measure_batches=3"]
WATCHED = ("torchvision", "scipy", "torch", "numpy", "PIL", "pyarrow")


def warm_then_measure(cells: list[list[str]], dataset: str | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps({"cells": [SMALL + c for c in cells], "dataset": dataset})],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def watched(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in WATCHED]


def test_cells_without_images_import_no_torchvision_and_their_loops_import_nothing_watched():
    cells = [
        ["workload=sleep", "sleep_ms=0"],
        ["workload=cpu"],
        ["workload=zlib"],
        ["workload=inmem"],
        ["workload=rng"],
        ["workload=tutorial", "sleep_ms=0", "model=tutorial"],
        ["workload=inmem", "index_backing=arrow"],
        ["workload=inmem", "target_precision=0.5", "max_measure_s=5"],  # the stopping rule: scipy.special
    ]
    got = warm_then_measure(cells)
    assert not any(m.startswith("torchvision") for m in got["imported"])
    assert got["torchvision"] == torchvision.__version__
    assert "scipy.special" in got["warmed"] and "scipy.stats" not in got["warmed"]
    assert [watched(new) for new in got["in_loops"]] == [[]] * len(cells), got["in_loops"]


def test_cells_that_decode_jpegs_have_torchvision_before_their_loop(tmp_path):
    cells = [
        [f"workload={workload}", f"decoder={decoder}", *extra]
        for workload, extra in (("jpeg", []), ("shards", ["shard_samples=2"]))
        for decoder in ("pil", "torchvision")
    ]
    got = warm_then_measure(cells, dataset=str(tmp_path))
    assert "torchvision.transforms.v2" in got["warmed"] and "scipy" not in got["warmed"]
    assert got["torchvision"] == torchvision.__version__
    assert [watched(new) for new in got["in_loops"]] == [[]] * len(cells), got["in_loops"]


def test_a_study_s_cells_share_one_set_of_imports_whichever_of_them_a_process_runs():
    """What any cell of a study needs is imported for all of them (a settle round of its sleep cells alone, or one
    Slurm array task, maps the same modules as the whole run did), so their memory reads alike."""
    from loaderbench.measure.warm import SCIPY, TORCHVISION, study_imports
    from loaderbench.study.one_cell import one_cell_study

    def cell(*settings: str):
        return one_cell_study(SMALL + list(settings)).cells[0].typed

    sleep, jpeg = cell("workload=sleep"), cell("workload=jpeg")
    adaptive = cell("workload=cpu", "target_precision=0.5")
    assert study_imports([sleep]) == []
    assert study_imports([sleep, jpeg]) == [TORCHVISION]
    assert study_imports([sleep, jpeg, adaptive]) == sorted([SCIPY, TORCHVISION])


PRELOAD = r"""
import json, multiprocessing.forkserver as fs, sys
from loaderbench.measure.warm import warm_imports
from loaderbench.measure.rank import measure_rank
from loaderbench.study.one_cell import one_cell_study
from loaderbench.workloads import DataSource

warm_imports([])  # a study without image cells
cell = one_cell_study(json.loads(sys.argv[1])).cells[0].typed
measure_rank(cell, 0, DataSource(None))
print(json.dumps(fs._forkserver._preload_modules))
"""


def test_the_fork_server_preloads_what_a_forked_worker_would_inherit():
    settings = ["workload=sleep", "sleep_ms=0", "num_workers=1", "start_method=forkserver", "forkserver_preload=true"]
    out = subprocess.run(
        [sys.executable, "-c", PRELOAD, json.dumps(SMALL[1:] + settings)], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    preload = json.loads(out.stdout.splitlines()[-1])
    assert preload[0] == "torch" and "torchvision" not in preload  # the parent has no torchvision to share
    assert preload[-1].startswith("loaderbench.workloads")  # the dataset's module

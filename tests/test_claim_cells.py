"""Real cells measure what the claims read. The claims' own tests decide on records they build; these run cells
through the real launcher and runner and check the measurement against what physics fixes:

- rng: workers seeded with one constant draw the same numbers, so every draw of the epoch has a twin (duplicate
  fraction 1.0, within the epoch and across epochs); torch's default seeding gives each worker its own (0.0);
- cow-memory: a forked worker reading a Python list of str copies the pages of the objects it touches (their
  reference counts are written), so its USS grows by tens of MiB; the same index as NumPy fixed-width bytes is
  one object and stays shared;
- a model-consumer cell on a CPU runs the simulated step, and its record and its figure say "simulated".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

MIB = 2**20

# One cell through the real launcher (fresh process per repetition, probes, record) in a fresh interpreter. With
# constant_seed, the rng workload's seeding worker_init_fn is replaced by one that seeds every worker alike.
SCRIPT = r"""
import json, random, sys
import numpy as np
import torch
args = json.loads(sys.argv[1])
if args["constant_seed"]:
    import loaderbench.workloads.rng as rng

    def constant_seed(worker_id):
        random.seed(0)
        np.random.seed(0)
        torch.manual_seed(0)

    rng.seed_all_worker_init = constant_seed
from loaderbench.launch.local import run_local
from loaderbench.schema.store import Store
from loaderbench.study.one_cell import one_cell_study

study = one_cell_study(args["set"])
store = Store(args["results"])
run_local(study, store, retry_failed=True)
(cell,) = study.cells
print(json.dumps(store.read(study.name, cell.cell_id, 0).to_json()))
"""


def run_cell(tmp_path, settings: dict, constant_seed: bool = False) -> dict:
    sets = [
        f"{k}={json.dumps(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else v}"
        for k, v in settings.items()
    ]
    args = {"set": sets, "results": str(tmp_path / "results"), "constant_seed": constant_seed}
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # a CPU cell, on a GPU node too
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    assert rec["status"] == "ok", rec.get("error")
    return rec


RNG = {
    "workload": "rng",
    "batch_size": 16,
    "cores": 2,
    "num_workers": 2,
    "start_method": "fork",
    "window": "epoch",
    "warmup_batches": 0,
    "measure_batches": 16,
    "epochs": 2,
}


def test_workers_seeded_alike_draw_only_twins(tmp_path):
    rec = run_cell(tmp_path, {**RNG, "worker_init": "seed_all"}, constant_seed=True)
    dups = rec["metrics"]["rng_duplicates"]
    for source in ("python", "numpy", "torch"):
        assert dups[source]["within_epoch"] == 1.0, dups
        assert dups[source]["across_epochs"] == 1.0, dups  # restarted workers seed alike again


def test_torch_seeds_each_worker_apart_by_default(tmp_path):
    rec = run_cell(tmp_path, {**RNG, "worker_init": "none"})
    dups = rec["metrics"]["rng_duplicates"]
    assert dups["torch"] == {"within_epoch": 0.0, "across_epochs": 0.0}, dups


COW = {
    "workload": "sleep",
    "sleep_ms": 0.0,
    "sample_kb": 0.004,
    "batch_size": 1024,
    "cores": 2,
    "num_workers": 1,
    "start_method": "fork",
    "index_items": 2_000_000,
    "gc_freeze": True,  # no GC pass copying what the worker inherited: the index's share alone
    "window": "epoch",
    "warmup_batches": 0,
    "measure_batches": 400,
    "probe_interval_s": 0.2,
    "memory_interval_s": 0.2,
}


def test_a_forked_worker_copies_a_list_index_as_it_reads_and_shares_numpy_bytes(tmp_path):
    """Peak USS per worker, as the claim reads it (the growth over the probe's timeline misses what the worker
    copied before the first sample with it alive, which on a loaded machine can be most of it)."""
    from loaderbench.analysis.questions.cow_memory import GROW_MIB
    from loaderbench.analysis.table.derive import timeline_growth

    peak = {}
    for backing in ("list_str", "numpy_bytes"):
        rec = run_cell(tmp_path / backing, {**COW, "index_backing": backing})
        _, top = timeline_growth(rec["metrics"]["memory_timeline"], 1)
        assert top == top, f"{backing}: fewer than 3 probe samples with the worker alive"
        peak[backing] = top / MIB
    # ~400,000 of 2,000,000 str objects read at random: the pages holding most of them are copied (tens of MiB)
    assert peak["list_str"] - peak["numpy_bytes"] >= GROW_MIB, peak
    # the same reads of a 61 MiB fixed-width bytes array write nothing: it stays shared, the worker's whole private
    # memory is a fraction of it
    index_mib = COW["index_items"] * 32 / MIB
    assert peak["numpy_bytes"] < index_mib / 2, peak


def test_a_model_cell_on_a_cpu_is_labelled_simulated_in_its_record_and_figure(tmp_path, kept):
    from loaderbench.analysis.figures.accelerator_busy import accelerator_utilization_vs_workers
    from loaderbench.analysis.table.records import load_records

    rec = run_cell(
        tmp_path,
        {
            "workload": "tutorial",
            "sleep_ms": 0.0,
            "model": "resnet50",
            "device": "auto",
            "step_ms": 5.0,
            "step_kind": "sleep",
            "num_workers": 1,
            "cores": 1,
            "batch_size": 4,
            "warmup_batches": 2,
            "measure_batches": 6,
        },
    )
    m = rec["metrics"]
    assert m["consumer"].startswith("simulated (no CUDA device: 5 ms sleep instead of resnet50"), m["consumer"]
    assert 0 < m["accelerator_busy_fraction"] < 1
    df, _ = load_records(tmp_path / "results", use_cache=False)
    paths = accelerator_utilization_vs_workers(df, "cell", tmp_path / "figures")
    assert paths and all(p.exists() for p in paths)
    ((fig, _),) = kept
    assert "SIMULATED step: no GPU here" in fig._suptitle.get_text()

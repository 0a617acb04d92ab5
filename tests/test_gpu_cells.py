"""The GPU path end to end: real cells with a model step on CUDA, pinned and not, with and without the
side-stream prefetcher, through the CLI, and what their records say. Skipped where no CUDA device is
visible; run on a GPU node with `make test`."""

import json
import os
import subprocess
import sys

import pytest
import torch

from tests.conftest import REPO

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here"),
]

STUDY = """
[study]
name = "gpu-tiny"
repetitions = 1
warmup_batches = 2
measure_batches = 4
[dataset]
kind = "synthetic-jpeg"
images = 64
[matrix]
workload = ["jpeg"]
model = ["tutorial"]
device = ["cuda"]
num_workers = [0, 2]
cores = [2]
batch_size = [8]
pin_memory = [false, true]
non_blocking = [true]
prefetcher = [false, true]
"""


def test_cuda_cells_record_the_accelerator(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    study = tmp_path / "gpu-tiny.toml"
    study.write_text(STUDY)
    results = tmp_path / "results"
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench", "run", str(study), "--results", str(results)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    records = [json.loads(f.read_text()) for f in sorted((results / "gpu-tiny").glob("*.json"))]
    assert len(records) == 8
    for rec in records:
        cfg, m = rec["config"], rec["metrics"]
        assert rec["status"] == "ok", rec.get("error")
        assert rec["env"]["cuda_available"] and rec["env"]["cuda_device"] == torch.cuda.get_device_name(0)
        assert m["consumer"] == "gpu" and m["gpu_name"] == rec["env"]["cuda_device"]
        assert m["pin_memory_effective"] is cfg["pin_memory"]  # pinning is real where there is a GPU
        assert 0 < m["accelerator_busy_fraction"] <= 1.0
        assert m["h2d_bytes"] > 0 and m["h2d_gbps"] > 0
        assert 0.0 <= m["h2d_overlap_fraction"] <= 1.0
        assert m["samples_per_s"] > 0

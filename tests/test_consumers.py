"""Consumers: the simulated step, a real model step on the CPU, and the CUDA path where a GPU exists."""

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch

from loaderbench.measure.consumers import ModelConsumer, SimulatedConsumer, make_consumer
from loaderbench.schema.cell import CellConfig
from tests.conftest import REPO


def batches(n, bs=4, dim=64):
    return [(torch.randn(bs, 3, dim, dim), torch.randint(0, 10, (bs,))) for _ in range(n)]


def run(consumer, items):
    import time

    t0 = time.perf_counter()
    for b in consumer.wrap(items):
        consumer(b)
    return time.perf_counter() - t0


def waiting(items, wait_s: float):
    """The items, each after a wait: a loader the step has to wait for."""
    import time

    for item in items:
        time.sleep(wait_s)
        yield item


def test_simulated_step_au_is_its_share_of_wall_time():
    """AU counts the measured steps' time only, over the window's wall time: a step of 5 ms that waits 10 ms for
    every batch is busy at most a third of the time, however the machine schedules it."""
    c = SimulatedConsumer(5.0, "sleep")
    wall = run(c, waiting([None] * 4, 0.010))
    m = c.metrics([1, 2, 3], wall)  # the first step is outside the window
    assert m["consumer"] == "simulated"
    assert m["compute_s"] == pytest.approx(sum(c.step_s[1:]))
    assert m["compute_s"] >= 3 * 0.005  # a sleep lasts at least as long as asked
    assert m["accelerator_busy_fraction"] == pytest.approx(m["compute_s"] / wall)
    # the waits are not busy time: the wall time holds 4 waits of 10 ms beside the steps, so AU stays below
    assert m["accelerator_busy_fraction"] <= m["compute_s"] / (m["compute_s"] + 0.040)


def test_model_step_on_cpu_trains():
    c = ModelConsumer("tutorial", "cpu", non_blocking=False, prefetcher=True)
    assert c.prefetcher is False  # a CUDA-stream prefetcher means nothing on the CPU
    before = [p.detach().clone() for p in c.model.parameters()]
    wall = run(c, batches(3))
    m = c.metrics(list(range(1, 3)), wall)
    assert m["consumer"] == "cpu" and 0 < m["accelerator_busy_fraction"] <= 1.0
    assert any(not torch.equal(a, b) for a, b in zip(before, c.model.parameters()))


def test_no_gpu_falls_back_to_labelled_simulation(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = dict(model="resnet50", device="auto", non_blocking=True, prefetcher=False, step_ms=25.0, step_kind="sleep")
    c = make_consumer(CellConfig(**cfg, warmup_batches=0, measure_batches=1, seed=0))
    assert isinstance(c, SimulatedConsumer) and c.kind.startswith("simulated (no CUDA device")
    with pytest.raises(RuntimeError, match="no CUDA device"):
        make_consumer(CellConfig(**{**cfg, "device": "cuda"}, warmup_batches=0, measure_batches=1, seed=0))


CUDA_CHECK = """
import json, sys, time
import torch
from loaderbench.measure.consumers import ModelConsumer
c = ModelConsumer("tutorial", "cuda", non_blocking=True, prefetcher=sys.argv[1] == "True")
items = [(torch.randn(4, 3, 224, 224).pin_memory(), torch.randint(0, 10, (4,)).pin_memory()) for _ in range(6)]
t0 = time.perf_counter()
for b in c.wrap(items):
    c(b)
print(json.dumps(c.metrics(list(range(2, 6)), time.perf_counter() - t0)))
"""


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device here: the GPU path runs where one exists "
    "(make local STUDY=loaderbench/studies/gpu-feed.toml)",
)
@pytest.mark.parametrize("prefetcher", [False, True])
def test_cuda_events_measure_compute_and_copies(prefetcher):
    # in a process of its own: CUDA initialized in this test worker would break every cell it forks later
    out = subprocess.run(
        [sys.executable, "-c", CUDA_CHECK, str(prefetcher)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout.strip().splitlines()[-1])
    assert m["consumer"] == "gpu" and 0 < m["accelerator_busy_fraction"] <= 1.0
    assert m["h2d_s"] > 0 and m["h2d_gbps"] > 0
    assert 0.0 <= m["h2d_overlap_fraction"] <= 1.0


def test_runner_refuses_to_fork_cells_from_a_cuda_process(monkeypatch):
    from loaderbench.errors import LoaderbenchError
    from loaderbench.measure.runner import run_task

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(LoaderbenchError, match="CUDA is initialized in the process that forks the cells"):
        run_task(None, None, {})


def test_smallest_feeding_config():
    from loaderbench.analysis.figures.accelerator_busy import smallest_feeding_config

    rows = []
    for cores in (2, 4):
        for w in (0, 2, 4):
            au = min(1.0, 0.2 + 0.1 * w * cores)
            rows += [
                {
                    "model": "resnet50",
                    "prefetcher": False,
                    "cores": cores,
                    "num_workers": w,
                    "accelerator_busy_fraction": au,
                }
            ] * 3
    out = smallest_feeding_config(pd.DataFrame(rows))
    row = out.iloc[0]
    # 2 cores reach 0.9 at w=4 (0.2 + 0.8 = 1.0 >= 0.9; w=2 gives 0.6)
    assert (row["cores"], row["num_workers"]) == (2, 4)

"""The doctor's samples beside the loop: the workers' USS and PSS, and the accelerator's utilization read from
nvidia-smi (a stand-in script here: this machine may have no GPU)."""

from __future__ import annotations

import os
import stat
import time

import pytest

from loaderbench.doctor import accelerator, workers
from loaderbench.doctor.page import render

FAKE_SMI = """#!/bin/sh
# index, utilization.gpu, memory.used: GPU 3 idle, GPU 5 busy
echo "3, 0, 100"
echo "5, 80, 2048"
"""


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    path = tmp_path / "nvidia-smi"
    path.write_text(FAKE_SMI)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return path


def test_a_worker_s_pss_is_at_least_its_uss():
    # PSS = its own pages + its share of those it shares: never below its own (a forked child shares the parent's)
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    try:
        sampler = workers.WorkerSampler(lambda: [pid])
        sampler._sample()
        sampler._sample()
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    seen = sampler.samples[-1]["workers"][str(pid)]
    assert seen["pss"] >= seen["uss"] > 0
    summary = workers.summarize(sampler.samples, cores=1)
    assert summary["workers"][str(pid)]["pss_end"] == seen["pss"]
    assert summary["series"]["workers_pss"][-1] == seen["pss"]


def _sampled(monkeypatch, device, visible: str, readings: int = 2) -> accelerator.UtilizationSampler:
    """A sampler asked `readings` times while the process uses CUDA device `device` under CUDA_VISIBLE_DEVICES."""
    monkeypatch.setattr(accelerator, "cuda_device", lambda: device)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    s = accelerator.UtilizationSampler(interval_s=0.0)
    for _ in range(readings):
        s.maybe_sample()
    return s


def test_the_gpu_read_is_the_one_cuda_visible_devices_maps_the_device_to(fake_smi, monkeypatch):
    s = _sampled(monkeypatch, 1, "3,5")
    assert s.gpu_index == 5 and [r["utilization"] for r in s.readings] == [80.0, 80.0]
    out = accelerator.summarize(s.readings)
    assert out["utilization_mean"] == 80.0 and out["memory_used_mib_peak"] == 2048.0 and out["samples"] == 2
    # named by UUID: which is which is not known, so the mean over every GPU listed
    s = _sampled(monkeypatch, 1, "GPU-1234,GPU-5678", readings=1)
    assert s.gpu_index is None and s.readings[0]["utilization"] == 40.0


def test_no_cuda_in_use_or_no_nvidia_smi_reads_nothing(fake_smi, monkeypatch, tmp_path):
    monkeypatch.setattr(accelerator, "cuda_device", lambda: None)
    s = accelerator.UtilizationSampler(interval_s=0.0)
    s.maybe_sample()
    assert s.readings == [] and accelerator.summarize(s.readings) is None
    monkeypatch.setattr(accelerator, "cuda_device", lambda: 0)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    s = accelerator.UtilizationSampler(interval_s=0.0)
    s.maybe_sample()
    assert s.readings == []


def test_the_page_shows_the_accelerator_when_it_was_read(fake_smi, monkeypatch):
    s = _sampled(monkeypatch, 0, "5")
    lo = {
        "name": "#1",
        "diagnosis": "data-bound",
        "warnings": [],
        "workers": {},
        "settings": {},
        "accelerator": accelerator.summarize(s.readings),
    }
    page = render({"command": ["python", "train.py"], "status": "ok", "processes": [{"loaders": [lo]}]})
    assert "The GPU ran a kernel 80% of the time" in page and "up to 2048 MiB" in page
    lo["accelerator"] = None  # no CUDA in use: no section
    assert "Accelerator" not in render({"command": ["python"], "status": "ok", "processes": [{"loaders": [lo]}]})

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


class _Worker:
    """A stand-in for psutil.Process: its RSS and USS are set by the test; each page-table walk is counted, with the
    thread that made it."""

    def __init__(self):
        self.rss, self.uss, self.walks = 100 << 20, 50 << 20, []

    def oneshot(self):
        import contextlib

        return contextlib.nullcontext()

    def cpu_times(self):
        import types

        return types.SimpleNamespace(user=1.0, system=0.0)

    def memory_info(self):
        import types

        return types.SimpleNamespace(rss=self.rss)

    def num_fds(self):
        return 7

    def memory_full_info(self):
        import threading
        import types

        self.walks.append(threading.current_thread().name)
        return types.SimpleNamespace(uss=self.uss, pss=self.uss + (10 << 20))


def _sampler_at(monkeypatch, worker):
    clock = {"t": 0.0}
    monkeypatch.setattr(workers.time, "perf_counter", lambda: clock["t"])
    sampler = workers.WorkerSampler(lambda: [4242])
    monkeypatch.setattr(sampler, "_proc", lambda pid: worker)
    return sampler, clock


def test_the_page_tables_are_walked_at_the_first_sample_then_on_a_schedule_that_backs_off_while_memory_is_flat(
    monkeypatch,
):
    worker = _Worker()
    sampler, clock = _sampler_at(monkeypatch, worker)
    walked_at = []
    for i in range(60):  # 30 s of samples every 0.5 s
        clock["t"] = 0.5 * i
        before = len(worker.walks)
        sampler._sample()
        if len(worker.walks) > before:
            walked_at.append(clock["t"])
    # every MEMORY_INTERVAL_S (2 s) at first, doubling up to 2**MEMORY_BACKOFF times (16 s) while flat
    assert walked_at == [0.0, 2.0, 6.0, 14.0]  # the next one at 30 s
    assert workers.MEMORY_INTERVAL_S == 2.0 and workers.MEMORY_BACKOFF == 3
    summary = workers.summarize(sampler.samples, cores=1)
    w = summary["workers"]["4242"]
    assert w["memory_walks"] == len(walked_at) and w["uss_growth"] == 0
    assert summary["series"]["memory_t_s"] == walked_at  # the memory series holds the walked samples only


def test_a_worker_whose_rss_rises_is_walked_at_the_next_sample_and_the_schedule_starts_again(monkeypatch):
    worker = _Worker()
    sampler, clock = _sampler_at(monkeypatch, worker)
    for t in (0.0, 2.0, 2.5):  # walks at 0 and 2; the next is due at 6
        clock["t"] = t
        sampler._sample()
    assert len(worker.walks) == 2
    worker.rss, worker.uss = int(worker.rss * 1.06), worker.uss + (30 << 20)  # copy-on-write: pages turn private
    clock["t"] = 3.0
    sampler._sample()
    assert len(worker.walks) == 3  # RSS passed its last walk's by more than RISE
    clock["t"] = 4.5
    sampler._sample()
    assert len(worker.walks) == 3
    clock["t"] = 5.0  # the USS had risen: the next walk 2 s after it, not 4
    sampler._sample()
    assert sampler.walks == 4  # the baseline, at 10 s, at 20 s, and now
    growth = workers.summarize(sampler.samples, cores=1)["workers"]["4242"]["uss_growth"]
    assert growth == 30 << 20


def test_start_reads_no_page_tables_in_the_caller_s_thread_and_stop_reads_them_last(monkeypatch):
    worker = _Worker()
    sampler = workers.WorkerSampler(lambda: [4242], interval_s=60.0)
    monkeypatch.setattr(sampler, "_proc", lambda pid: worker)
    sampler.start()
    assert not sampler.samples[0]["workers"]["4242"]["walked"]  # the loop's thread only read the cheap values
    deadline = time.monotonic() + 10
    while not worker.walks and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert worker.walks == ["loaderbench-doctor-sampler", "MainThread"]
    assert sampler.samples[-1]["workers"]["4242"]["walked"]


def test_prepare_walks_in_a_thread_of_its_own_and_start_takes_that_walk_as_its_first_sample_s(monkeypatch):
    worker = _Worker()
    sampler = workers.WorkerSampler(lambda: [4242], interval_s=60.0)
    monkeypatch.setattr(sampler, "_proc", lambda pid: worker)
    sampler.prepare()
    sampler.start()  # waits for the baseline walk
    assert worker.walks == ["loaderbench-doctor-baseline"]
    first = sampler.samples[0]["workers"]["4242"]
    assert first["walked"] and first["uss"] == 50 << 20
    time.sleep(0.2)  # the background thread's first task walks only workers the baseline did not see
    worker.uss += 8 << 20
    sampler.stop()
    assert worker.walks == ["loaderbench-doctor-baseline", "MainThread"]
    summary = workers.summarize(sampler.samples, cores=1, sampler_cpu_s=sampler.cpu_s)
    assert summary["workers"]["4242"]["uss_growth"] == 8 << 20 and summary["workers"]["4242"]["memory_walks"] == 2


def test_within_the_measured_steps_the_walks_keep_to_their_share_of_the_time(monkeypatch):
    # each walk costs 50 ms of CPU: within the measured steps, one is made only once the walks made there, and the
    # next, fit in WALK_SHARE of the time since they began (10 s for the first at 0.5%), whatever the schedule says
    worker = _Worker()
    sampler, clock = _sampler_at(monkeypatch, worker)
    cpu = {"s": 0.0}
    walk = worker.memory_full_info

    def costly_walk():
        cpu["s"] += 0.05
        return walk()

    worker.memory_full_info = costly_walk
    monkeypatch.setattr(workers.time, "thread_time", lambda: cpu["s"])
    sampler._walk_now()  # the baseline, as `prepare` makes it
    sampler._sample(walk=False, adopt=True)  # as `start` does, at 0 s
    sampler._started = 0.0
    walked_at = []
    for i in range(1, 60):
        clock["t"] = 0.5 * i
        before = len(worker.walks)
        sampler._sample()
        if len(worker.walks) > before:
            walked_at.append(clock["t"])
    assert workers.WALK_SHARE == 0.005
    assert walked_at == [10.0, 20.0]  # the schedule alone would walk at 2, 6, 14 and 30 s
    assert sampler.window_cpu_s == pytest.approx(0.10) and sampler.cpu_s == pytest.approx(0.15)
    # a worker new to the sampler is walked at once: it has no baseline
    sampler._pids = lambda: [4242, 4343]
    clock["t"] = 30.0
    sampler._sample()
    assert sampler.walks == 4  # the baseline, at 10 s, at 20 s, and now


def test_a_watched_loader_s_workers_are_walked_before_and_after_the_measured_steps_not_within_them():
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from loaderbench.doctor.api import watch

    loader = DataLoader(TensorDataset(torch.zeros(512, 4)), batch_size=4, num_workers=2)
    watched = watch(loader, steps=20, warmup=5, headspace=0, echo=False)
    for _ in watched:
        pass
    (lw,) = watched.session.watches.values()
    report = lw.sampler
    summary = workers.summarize(report.samples, cores=1, sampler_cpu_s=report.cpu_s)
    assert len(summary["workers"]) == 2
    assert all(w["memory_walks"] == 2 for w in summary["workers"].values())  # the baseline and the last
    assert report.samples[0]["workers"] and all(w["walked"] for w in report.samples[0]["workers"].values())
    assert report.window_cpu_s < report.cpu_s

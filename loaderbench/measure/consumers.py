"""The consumer of each batch: a simulated training step (sleep or busy CPU, labelled simulated), or a real
training step of a model (forward, backward, SGD) on the GPU when there is one, else on the CPU.

On a GPU the timings come from CUDA events, never from wall-clock guesses: compute time per step (its
kernels, start to end), host-to-device copy time and bandwidth, whether copies overlapped compute, and how long
the host stayed inside the copy calls against the copies' time on the device (a non_blocking copy from pinned
memory returns at once, so the host goes on while the copy is in flight; a blocking one returns when it is done).
Accelerator utilization AU = compute time / wall time of the measured window (MLPerf Storage's definition;
a configuration "keeps up" at AU >= 0.9).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from loaderbench.measure.loop import make_step
from loaderbench.schema.cell import CellConfig


def build_model(name: str):
    import torch.nn as nn

    if name == "resnet50":
        from torchvision.models import resnet50

        return resnet50(weights=None, num_classes=1000)
    if name == "tutorial":

        class SmallTransformerModel(nn.Module):  # the tutorial's conv + transformer
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(
                    nn.Conv2d(3, 32, kernel_size=7, stride=4, padding=3),
                    nn.ReLU(),
                    nn.Conv2d(32, 64, kernel_size=3, stride=2, padding=1),
                    nn.ReLU(),
                    nn.AdaptiveAvgPool2d((7, 7)),
                )
                layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
                self.transformer = nn.TransformerEncoder(layer, num_layers=2)
                self.classifier = nn.Linear(64, 10)

            def forward(self, x):
                x = self.features(x)
                b, c, h, w = x.shape
                x = self.transformer(x.view(b, c, h * w).permute(0, 2, 1))
                return self.classifier(x.mean(dim=1))

        return SmallTransformerModel()
    raise ValueError(f"unknown model {name!r}")


def busy_metrics(step_s: list[float], steps: list[int], window_s: float) -> dict:
    """A consumer timed on the host: its time in the measured `steps` and the share of the window that fills."""
    busy = sum(step_s[i] for i in steps)
    return {"accelerator_busy_fraction": busy / window_s if window_s > 0 else None, "compute_s": busy}


def copied_bytes(tensors, device) -> int:
    """The bytes a copy of `tensors` to `device` moves: none for a tensor already there (decoder = "nvjpeg" decodes
    onto the GPU)."""
    return sum(t.element_size() * t.nelement() for t in tensors if t.device.type != device.type)


class SimulatedConsumer:
    """step_ms of sleep or busy CPU per batch; its 'compute' is that step, labelled simulated."""

    kind = "simulated"

    def __init__(self, step_ms: float, step_kind: str | None):
        self._step = make_step(step_ms, step_kind)
        self.step_s: list[float] = []
        self.simulated_ms = step_ms

    def wrap(self, iterable: Iterable) -> Iterable:
        return iterable

    def __call__(self, batch: Any) -> None:
        if self.simulated_ms:
            t0 = time.perf_counter()
            self._step(batch)
            self.step_s.append(time.perf_counter() - t0)
        else:
            self.step_s.append(0.0)

    def metrics(self, steps: list[int], window_s: float) -> dict:
        """`steps`: indices of the measured steps (loaderbench.measure.loop.measured_steps)."""
        return {"consumer": self.kind, **busy_metrics(self.step_s, steps, window_s)}


class ModelConsumer:
    """A real training step. On CUDA: events around the copy and the compute of every step; on CPU: the
    step is synchronous, so perf_counter times it exactly."""

    def __init__(self, model: str, device: str, non_blocking: bool, prefetcher: bool):
        import torch

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError('device = "cuda" but no CUDA device is visible in this cell')
        self.torch = torch
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.kind = "gpu" if self.cuda else "cpu"
        self.model_name = model
        self.model = build_model(model).to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.loss = torch.nn.CrossEntropyLoss()
        self.non_blocking = non_blocking
        self.prefetcher = prefetcher and self.cuda
        self.copy_stream = torch.cuda.Stream() if self.prefetcher else None
        self.ref = None
        self.compute_events: list = []  # (start, end) per step
        self.copy_events: list = []  # (start, end, bytes) per step
        self.copy_host_s: list[float] = []  # per step: the host's time inside the copy calls
        self.step_s: list[float] = []
        if self.cuda:
            self.ref = torch.cuda.Event(enable_timing=True)
            self.ref.record()

    def _event(self):
        ev = self.torch.cuda.Event(enable_timing=True)
        ev.record(self.torch.cuda.current_stream())
        return ev

    def _to_device(self, batch):
        data, labels = batch[0], batch[1]
        nbytes = copied_bytes((data, labels), self.device)
        if self.cuda:
            start = self._event()
        t0 = time.perf_counter()
        data = data.to(self.device, non_blocking=self.non_blocking)
        labels = labels.to(self.device, non_blocking=self.non_blocking)
        host = time.perf_counter() - t0
        if self.cuda:
            self.copy_events.append((start, self._event(), nbytes))
            self.copy_host_s.append(host)
        return data, labels

    def wrap(self, iterable: Iterable) -> Iterable:
        return _Prefetcher(iterable, self) if self.prefetcher else iterable

    def __call__(self, batch: Any) -> None:
        if not getattr(batch, "on_device", False):
            batch = self._to_device(batch)
        data, labels = batch[0], batch[1]
        labels = labels.long() % 10 if self.model_name == "tutorial" else labels.long() % 1000
        t0 = time.perf_counter()
        start = self._event() if self.cuda else None
        out = self.model(data)
        loss = self.loss(out, labels)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        if self.cuda:
            self.compute_events.append((start, self._event()))
        self.step_s.append(time.perf_counter() - t0)

    def metrics(self, steps: list[int], window_s: float) -> dict:
        """`steps`: indices of the measured steps (loaderbench.measure.loop.measured_steps)."""
        torch = self.torch
        out: dict[str, Any] = {"consumer": self.kind, "model": self.model_name, "device": str(self.device)}
        if not self.cuda:
            out.update(busy_metrics(self.step_s, steps, window_s))
            return out
        torch.cuda.synchronize()
        ref = self.ref
        if ref is None:
            raise RuntimeError("the consumer's reference CUDA event was never recorded")
        t = lambda ev: ref.elapsed_time(ev) / 1000.0
        compute = [(t(a), t(b)) for a, b in (self.compute_events[i] for i in steps)]
        copies = [(t(a), t(b), n) for a, b, n in self.copy_events]
        copies = [copies[i] for i in steps] if len(copies) == len(self.compute_events) else copies
        busy = sum(b - a for a, b in compute)
        copy_s = sum(b - a for a, b, _ in copies)
        host = self.copy_host_s
        host_s = sum(host[i] for i in steps) if len(host) == len(self.compute_events) else sum(host)
        copy_bytes = sum(n for _, _, n in copies)
        overlap = 0.0
        for a, b, _ in copies:  # copy time that ran while some step's kernels ran
            for c, d in compute:
                overlap += max(0.0, min(b, d) - max(a, c))
        out.update(
            accelerator_busy_fraction=busy / window_s if window_s > 0 else None,
            compute_s=busy,
            h2d_s=copy_s,
            h2d_bytes=copy_bytes,
            h2d_gbps=(copy_bytes / copy_s / 1e9) if copy_s > 0 else None,
            h2d_overlap_fraction=(overlap / copy_s) if copy_s > 0 else None,
            h2d_host_blocked_fraction=(host_s / copy_s) if copy_s > 0 and host else None,
            gpu_name=torch.cuda.get_device_name(self.device),
        )
        return out


class _DeviceBatch(tuple):
    on_device = True


class _Prefetcher:
    """The tutorial's DataPrefetcher: batch N+1 is copied on a side stream while batch N computes."""

    def __init__(self, iterable: Iterable, consumer: ModelConsumer):
        self.iterable, self.c = iterable, consumer

    def __iter__(self) -> Iterator:
        torch, c = self.c.torch, self.c
        it = iter(self.iterable)

        def load():
            try:
                batch = next(it)
            except StopIteration:
                return None
            nbytes = copied_bytes(batch[:2], c.device)
            with torch.cuda.stream(c.copy_stream):
                start = torch.cuda.Event(enable_timing=True)
                start.record(c.copy_stream)
                data = batch[0].to(c.device, non_blocking=True)
                labels = batch[1].to(c.device, non_blocking=True)
                end = torch.cuda.Event(enable_timing=True)
                end.record(c.copy_stream)
            c.copy_events.append((start, end, nbytes))
            return data, labels

        nxt = load()
        while nxt is not None:
            torch.cuda.current_stream().wait_stream(c.copy_stream)
            data, labels = nxt
            data.record_stream(torch.cuda.current_stream())
            labels.record_stream(torch.cuda.current_stream())
            nxt = load()
            yield _DeviceBatch((data, labels))


def make_consumer(cell: CellConfig) -> SimulatedConsumer | ModelConsumer:
    """model = none: the simulated step. A model with device = auto and no CUDA device: the simulated step
    stands in when step_ms > 0 (the GPU study on a CPU-only machine, labelled simulated), else the model
    runs on the CPU. device = cuda without a GPU is an error, device = cpu runs the model on the CPU."""
    model = cell.model
    if model == "none":
        return SimulatedConsumer(cell.step_ms, cell.step_kind)
    device = cell.device or "auto"
    if device == "auto" and cell.step_ms:
        import torch

        if not torch.cuda.is_available():
            sim = SimulatedConsumer(cell.step_ms, cell.step_kind)
            sim.kind = f"simulated (no CUDA device: {cell.step_ms:g} ms {cell.step_kind} instead of {model})"
            return sim
    return ModelConsumer(model, device, bool(cell.non_blocking), bool(cell.prefetcher))

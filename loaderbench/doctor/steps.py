"""One watched loader's steps: the time each `next()` blocked (data wait) and the time the loop spent between
two `next()` calls (the step), from two clock reads per batch; and the loop thread's CPU time in the waits and
steps of a sample of the batches (loaderbench.doctor.cpu_sample).

Per batch the log keeps two numbers, when the batch was asked for and when it arrived; a step runs from one
batch's arrival to the next `next()`. The few batches the watch itself spent time on (a phase's start or end, a
CPU sample) say where their step starts instead, after the watch's own work; a step that the next `next()` did not
end (the loop left the iterator, or the iterator ended) says where it ends, or that it is not known."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

clock = time.perf_counter
cpu_clock = time.thread_time

NAN = float("nan")


@dataclass
class Columns:
    """The log as per-batch columns, in seconds (NaN: not known)."""

    t_start: np.ndarray
    wait_s: np.ndarray
    step_s: np.ndarray
    phase: list[str]
    epoch_start: list[bool]
    wait_cpu_s: np.ndarray  # the loop thread's CPU time inside next(), on sampled batches
    step_cpu_s: np.ndarray  # and between two next() calls
    cpu_weight: np.ndarray  # a sampled batch's weight (one over the chance it was sampled); 0: not sampled


@dataclass
class StepLog:
    """Per-batch times of one loader. Each batch has a phase: "warmup" (not counted), "measure" (the diagnosis
    rests on these), "headspace" (batches replayed from memory), "ab-A" or "ab-B" (an in-loop A/B round)."""

    asked: list[float] = field(default_factory=list)  # clock when next() was called
    arrived: list[float] = field(default_factory=list)  # clock when it returned the batch
    #: batch -> where its step starts, where not at its arrival (the watch worked after it)
    step_from: dict[int, float] = field(default_factory=dict)
    #: batch -> where its step ends, where not at the next batch's `asked` (None: not known)
    step_to: dict[int, float | None] = field(default_factory=dict)
    segments: list[tuple[int, str]] = field(default_factory=list)  # (first batch, phase), in order
    epoch_starts: list[int] = field(default_factory=list)  # batches that were the first of an iterator
    cpu_batch: list[int] = field(default_factory=list)  # the sampled batches
    cpu_weight: list[float] = field(default_factory=list)
    cpu_wait: list[float] = field(default_factory=list)
    cpu_step: list[float] = field(default_factory=list)  # NaN until the next next() reads the clock
    _edits: int = field(default=0, repr=False, compare=False)
    _cached: tuple | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.asked)

    # --- written by the watch outside its fast path -----------------------------------------------------------

    def begin(self, first: int, phase: str) -> None:
        """Batches from ``first`` on are of ``phase``."""
        if self.segments and self.segments[-1][0] == first:
            self.segments[-1] = (first, phase)
        else:
            self.segments.append((first, phase))
        self._edits += 1

    def end_step(self, batch: int, at: float | None) -> None:
        """Batch ``batch``'s step ends at ``at`` (None: its end is not known), unless its end is known already."""
        if batch >= 0 and batch not in self.step_to:
            self.step_to[batch] = at
            self._edits += 1

    def mark_epoch(self, batch: int) -> None:
        """Batch ``batch`` was the first of an iterator."""
        self.epoch_starts.append(batch)
        self._edits += 1

    def start_step(self, batch: int, at: float) -> None:
        self.step_from[batch] = at
        self._edits += 1

    def add_cpu(self, batch: int, weight: float, wait_cpu: float) -> None:
        self.cpu_batch.append(batch)
        self.cpu_weight.append(weight)
        self.cpu_wait.append(wait_cpu)
        self.cpu_step.append(NAN)
        self._edits += 1

    def close_cpu(self, step_cpu: float) -> None:
        """The last sampled batch's step took ``step_cpu`` of the loop thread's CPU time."""
        self.cpu_step[-1] = step_cpu
        self._edits += 1

    # --- read ---------------------------------------------------------------------------------------------------

    def columns(self) -> Columns:
        """The log as columns (computed once per change of the log)."""
        key = (len(self.asked), self._edits)
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        n = key[0]
        asked, arrived = np.array(self.asked[:n], dtype=float), np.array(self.arrived[:n], dtype=float)
        start, end = arrived.copy(), np.full(n, NAN)
        end[:-1] = asked[1:]
        for i, t in self.step_from.items():
            if i < n:
                start[i] = t
        for i, t_end in self.step_to.items():
            if i < n:
                end[i] = NAN if t_end is None else t_end
        phase: list[str] = []
        bounds = [first for first, _ in self.segments[1:]] + [n]
        for (first, name), stop in zip(self.segments, bounds):
            phase += [name] * (min(stop, n) - min(first, n))
        phase += ["warmup"] * (n - len(phase))  # (a log without segments)
        epoch = [False] * n
        for i in self.epoch_starts:
            if i < n:
                epoch[i] = True
        wait_cpu, step_cpu, weight = np.full(n, NAN), np.full(n, NAN), np.zeros(n)
        for i, w, c_wait, c_step in zip(self.cpu_batch, self.cpu_weight, self.cpu_wait, self.cpu_step):
            if i < n:
                wait_cpu[i], step_cpu[i], weight[i] = c_wait, c_step, w
        cols = Columns(asked, arrived - asked, end - start, phase, epoch, wait_cpu, step_cpu, weight)
        self._cached = (key, cols)
        return cols

    @property
    def wait_s(self) -> list[float]:
        return self.columns().wait_s.tolist()

    @property
    def step_s(self) -> list[float]:
        return self.columns().step_s.tolist()

    @property
    def phase(self) -> list[str]:
        return list(self.columns().phase)

    @property
    def epoch_start(self) -> list[bool]:
        return list(self.columns().epoch_start)

    @property
    def t_start(self) -> list[float]:
        return self.columns().t_start.tolist()

    @property
    def wait_cpu_s(self) -> list[float]:
        """The loop thread's CPU time inside next() (NaN: the batch was not sampled)."""
        return self.columns().wait_cpu_s.tolist()

    @property
    def step_cpu_s(self) -> list[float]:
        """The loop thread's CPU time between two next() calls (NaN: not sampled, or its step not known)."""
        return self.columns().step_cpu_s.tolist()

    def indices(self, phase: str) -> list[int]:
        """Steps of ``phase`` whose step time is known."""
        cols = self.columns()
        known = ~np.isnan(cols.step_s)
        return [i for i, p in enumerate(cols.phase) if p == phase and known[i]]

    def count(self, phase: str) -> int:
        return sum(1 for p in self.columns().phase if p == phase)

    def to_json(self) -> dict:
        cols = self.columns()
        t0 = float(cols.t_start[0]) if len(cols.t_start) else 0.0
        return {
            "t_s": [round(t - t0, 6) for t in cols.t_start.tolist()],
            "wait_s": [round(w, 7) for w in cols.wait_s.tolist()],
            "step_s": [None if s != s else round(s, 7) for s in cols.step_s.tolist()],
            "phase": list(cols.phase),
            "epoch_start": list(cols.epoch_start),
        }

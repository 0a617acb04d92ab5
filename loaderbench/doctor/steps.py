"""One watched loader's steps: the time each `next()` blocked (data wait) and the time the loop spent between
two `next()` calls (the step), read with two clock reads per batch, and the loop thread's CPU time in each (two
reads of its CPU clock)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

clock = time.perf_counter
cpu_clock = time.thread_time


@dataclass
class StepLog:
    """Per-step times of one loader, in seconds. ``phase`` says what each step was: "warmup" (not counted),
    "measure" (the diagnosis rests on these) or "headspace" (batches replayed from memory)."""

    wait_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    phase: list[str] = field(default_factory=list)
    epoch_start: list[bool] = field(default_factory=list)
    t_start: list[float] = field(default_factory=list)
    wait_cpu_s: list[float] = field(default_factory=list)  # the loop thread's CPU time inside next()
    step_cpu_s: list[float] = field(default_factory=list)  # and between two next() calls

    def add(self, t0: float, wait: float, phase: str, first_of_iterator: bool, wait_cpu: float = 0.0) -> None:
        """A batch arrived: ``wait`` seconds in next() (``wait_cpu`` of them on a CPU), asked for at ``t0``; its
        step is not known yet."""
        self.t_start.append(t0)
        self.wait_s.append(wait)
        self.wait_cpu_s.append(wait_cpu)
        self.step_s.append(float("nan"))
        self.step_cpu_s.append(float("nan"))
        self.phase.append(phase)
        self.epoch_start.append(first_of_iterator)

    def close_step(self, step: float, step_cpu: float = float("nan")) -> None:
        """The loop came back for the next batch: the last batch's step took ``step`` seconds (``step_cpu`` of the
        loop thread's CPU time)."""
        if self.step_s:
            self.step_s[-1] = step
            self.step_cpu_s[-1] = step_cpu

    def indices(self, phase: str) -> list[int]:
        """Steps of ``phase`` whose step time is known."""
        return [i for i, p in enumerate(self.phase) if p == phase and self.step_s[i] == self.step_s[i]]

    def count(self, phase: str) -> int:
        return sum(1 for p in self.phase if p == phase)

    def to_json(self) -> dict:
        t0 = self.t_start[0] if self.t_start else 0.0
        return {
            "t_s": [round(t - t0, 6) for t in self.t_start],
            "wait_s": [round(w, 7) for w in self.wait_s],
            "step_s": [None if s != s else round(s, 7) for s in self.step_s],
            "phase": list(self.phase),
            "epoch_start": list(self.epoch_start),
        }

"""Watching one loader: its iterator wrapped so that every `next()` is timed, the phases (warm-up, measure,
headspace, done) and what happens when the loader's diagnosis is ready."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from loaderbench.doctor.steps import StepLog, clock, cpu_clock

WARMUP, MEASURE, HEADSPACE, AB, DONE = "warmup", "measure", "headspace", "ab", "done"


@dataclass(frozen=True)
class WatchPlan:
    """How long to watch: ``warmup`` steps not counted, then ``steps`` measured steps (or ``seconds`` of
    them, when given), then ``headspace`` steps replayed from memory (0: none)."""

    warmup: int = 5
    steps: int = 200
    seconds: float | None = None
    headspace: int = 20
    stop: bool = False
    #: a setting to validate in the loop (A B A B rounds): the changes, or {"auto": True}; None: none
    try_changes: dict | None = None
    ab_rounds: int = 4
    ab_steps: int = 10
    #: search the loader's settings on its dataset (loaderbench.doctor.tuning), then validate the winner in the loop
    tune: bool = False
    tune_budget_s: float = 60.0
    tune_trials: int = 24

    def to_json(self) -> dict:
        return asdict(self)


#: Batches kept for the headspace replay (references to batches the loop already had).
CACHED_BATCHES = 8


def _pinned(batch: Any) -> bool | None:
    """Whether the batch's tensors arrive in pinned memory (None: no tensor in it)."""
    import torch

    found: list[bool] = []

    def visit(x: Any) -> None:
        if len(found) > 16:
            return
        if isinstance(x, torch.Tensor):
            found.append(bool(x.is_pinned()) if x.device.type == "cpu" else True)
        elif isinstance(x, dict):
            for v in x.values():
                visit(v)
        elif isinstance(x, list | tuple):
            for v in x:
                visit(v)

    visit(batch)
    return all(found) if found else None


class LoaderWatch:
    """One watched loader (or loaders built again at the same place): its settings, its steps, its workers."""

    def __init__(
        self,
        loader: Any,
        name: str,
        plan: WatchPlan,
        on_done: Callable[[LoaderWatch], None],
        say: Callable[[str], None] | None = None,
        agree: Callable[[str, dict], tuple[dict, dict]] | None = None,
    ):
        from loaderbench.cores import allowed_cores
        from loaderbench.doctor.settings import read_settings
        from loaderbench.doctor.workers import WorkerSampler, worker_pids

        self.name = name
        self.plan = plan
        self.settings = read_settings(loader)
        self.cores = allowed_cores()
        self.log = StepLog()
        self.state = WARMUP if plan.warmup > 0 else MEASURE
        self.pinned: bool | None = None
        self._pinned_read = False  # read off the first measured batch (a batch without a tensor leaves None)
        self.iterators = 0
        self._cache: deque = deque(maxlen=CACHED_BATCHES)
        self._replay: Iterator | None = None
        self._measured = 0
        self._warmed = 0
        self._replayed = 0
        self._t_measure: float | None = None
        self._current: Any = None
        self._on_done = on_done
        self.sampler = WorkerSampler(lambda: worker_pids(self._current))
        self._sampling = False
        self.note: str | None = None
        self.loader = loader
        self.ab: Any = None
        self.ab_result: dict | None = None
        self.tune_result: dict | None = None
        self.say = say  # progress for the terminal (None: say nothing)
        #: under several ranks: (loader, this rank's winner) -> (the changes every rank validates, how they agreed)
        self.agree = agree

    # --- the phases ----------------------------------------------------------------------------------------

    def _start_measure(self) -> None:
        self.state = MEASURE
        self._t_measure = clock()
        self.sampler.start()
        self._sampling = True

    def _end_measure(self) -> None:
        if self._sampling:
            self.sampler.stop()
            self._sampling = False
        if self.plan.headspace > 0 and self._cache:
            self.state = HEADSPACE
            self._replay = itertools.cycle(list(self._cache))
        else:
            if self.plan.headspace > 0:
                self.note = "no batch was kept to replay"
            self._after_headspace()

    def _after_headspace(self) -> None:
        self._cache.clear()
        self._replay = None
        if self.plan.tune:
            changes = self._tune()
            if not changes:
                self._finish()
                return
        elif self.plan.try_changes is None:
            self._finish()
            return
        else:
            changes = self._changes_to_try()
            if not changes:
                return
        from loaderbench.doctor.abtest import InLoopAB

        self.ab = InLoopAB(self.loader, changes, self.plan.ab_rounds, self.plan.ab_steps)
        self.ab.start()
        self.state = AB

    def _tune(self) -> dict:
        """Search the loader's settings while the loop waits; the winner's changes ({}: none to validate). Under
        several ranks, the changes every rank agreed on."""
        changes = self._search()
        if self.agree is None or self.tune_result is None:
            return changes
        agreed, info = self.agree(self.name, changes)
        self.tune_result["agreement"] = info
        if agreed != changes and self.say is not None:
            self.say(f"loader {self.name}: the ranks agreed on {agreed or 'no change'} (ranks {info['from_ranks']})")
        if agreed and not changes:
            self.ab_result = None
        elif not agreed and changes:
            self.ab_result = {"note": "nothing to validate in the loop: most ranks found no better setting"}
        return agreed

    def _search(self) -> dict:
        from loaderbench.doctor.report import loader_report
        from loaderbench.doctor.tuning import LoopShape, TuneBudget, tune_loader

        budget = TuneBudget(self.plan.tune_budget_s, self.plan.tune_trials)
        report = loader_report(self, timeline=False)
        if report["verdict"] == "not data-bound":
            note = f"the loop is {report['verdict']}: leave the loader"
            self.tune_result = {"changes": {}, "stop": "not searched", "note": note}
            return {}
        if self.say is not None:
            self.say(
                f"loader {self.name}: searching its settings (at most {budget.trials} trials, {budget.seconds:g} s) "
                "while the loop waits"
            )
        loop = LoopShape.of_report(report)
        self.tune_result = tune_loader(self.loader, self.settings, float(self.cores["cores"]), loop, budget)
        changes = self.tune_result["changes"]
        if not changes:
            why = self.tune_result.get("note") or "the best setting the search found is the current one"
            self.ab_result = {"note": f"nothing to validate in the loop: {why}; keep the current loader"}
        return changes

    def _changes_to_try(self) -> dict:
        """The changes `--try` gives, or the diagnosis suggests ({}: none, and the watch is finished)."""
        from loaderbench.doctor.abtest import candidate

        assert self.plan.try_changes is not None
        changes = dict(self.plan.try_changes)
        if changes.pop("auto", False):
            from loaderbench.doctor.report import loader_report

            verdict = loader_report(self, timeline=False)["verdict"]
            changes = candidate(self.settings, verdict, float(self.cores["cores"])) or {}
            if not changes:
                self.ab_result = {"note": f"nothing to try in the loop: {verdict}"}
                self._finish()
        return changes

    def _close_ab(self) -> None:
        """End an in-loop A/B in progress, keeping its result, and the watch."""
        if self.ab is not None:
            self.ab.close()
            self.ab_result = self.ab.result(self.log.wait_s, self.log.step_s)
            self.ab = None
        self.state = DONE
        self._cache.clear()

    def _finish(self) -> None:
        self._close_ab()
        self._replay = None
        self._on_done(self)

    def finish_early(self, reason: str) -> None:
        """The run ends before the plan did (the script finished, failed or was interrupted)."""
        if self.state == DONE:
            return
        if self._sampling:
            self.sampler.stop()
            self._sampling = False
        self.note = reason
        self._close_ab()

    def _after(self, phase: str, batch: Any) -> None:
        if phase == WARMUP:
            self._warmed += 1
            if self._warmed >= self.plan.warmup:
                self._start_measure()
        elif phase == MEASURE:
            self._measured += 1
            if not self._pinned_read:
                self.pinned, self._pinned_read = _pinned(batch), True
            if self.plan.headspace > 0:
                self._cache.append(batch)
            enough = self._measured >= self.plan.steps if self.plan.seconds is None else False
            if self.plan.seconds is not None and self._t_measure is not None:
                enough = clock() - self._t_measure >= self.plan.seconds
            if enough:
                self._end_measure()
        elif phase == HEADSPACE:
            self._replayed += 1
            if self._replayed >= self.plan.headspace:
                self._after_headspace()
        elif phase == AB:
            self.ab.record(len(self.log.wait_s) - 1)
            if self.ab.done():
                self._finish()

    def wrap(self, iterator: Any) -> WatchedIterator:
        self.iterators += 1
        self._current = iterator
        if self.state == MEASURE and not self._sampling:
            self._start_measure()
        return WatchedIterator(iterator, self)

    def replay(self) -> Any:
        assert self._replay is not None
        return next(self._replay)


class WatchedIterator:
    """A loader's iterator, timed: two clock reads per batch, the batch handed on unchanged."""

    def __init__(self, inner: Any, watch: LoaderWatch):
        self._inner = inner
        self._watch = watch
        self._last: float | None = None
        self._last_cpu = 0.0
        self._first = True

    def __iter__(self) -> WatchedIterator:
        return self

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __next__(self) -> Any:
        w = self._watch
        if w.state == DONE:
            if self._last is not None:  # the last watched step ends here
                w.log.close_step(clock() - self._last, cpu_clock() - self._last_cpu)
                self._last = None
            return next(self._inner)
        t0, c0 = clock(), cpu_clock()
        if self._last is not None:
            w.log.close_step(t0 - self._last, c0 - self._last_cpu)
        phase = w.state
        try:
            if phase == HEADSPACE:
                batch = w.replay()
            elif phase == AB:
                batch = w.ab.next_batch(self._inner)
            else:
                batch = next(self._inner)
        except StopIteration:
            self._last = None
            if w._sampling and w.state == MEASURE:
                w.sampler._sample()
            raise
        w.log.add(t0, clock() - t0, phase if phase != AB else f"ab-{w.ab.arm}", self._first, cpu_clock() - c0)
        self._first = False
        # the watch's own bookkeeping (an A B round's switch of iterators included) is neither wait nor step
        w._after(phase, batch)
        self._last, self._last_cpu = clock(), cpu_clock()
        return batch

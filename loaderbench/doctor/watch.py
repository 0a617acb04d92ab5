"""Watching one loader: its iterator wrapped so that every `next()` is timed, the phases (warm-up, measure,
headspace, in-loop A/B rounds, done) and what happens when the loader's diagnosis is ready.

Most batches take the fast path of `WatchedIterator.__next__`: two clock reads and two list appends, nothing else.
The watch does its own work only on the batches it planned for, each known by its count when the phase begins
(`LoaderWatch._until`, the next of them): a phase's last batch (the next phase starts after it), the measured
batches it keeps to replay, the measured batches whose CPU time it reads (a sample: loaderbench.doctor.cpu_sample)
and the one after each of them (its step's CPU time ends there), and the first batch of each iterator; those
planned for the CPU sample alone take a shorter path (`LoaderWatch._next_sampling`). With `--seconds`, the fast
path also compares the batch's arrival with the end of the measuring time."""

from __future__ import annotations

import itertools
import math
import sys
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from loaderbench.doctor.cpu_sample import PERIOD_BATCHES, CpuSampling
from loaderbench.doctor.steps import StepLog, clock, cpu_clock

WARMUP, MEASURE, HEADSPACE, AB, DONE = "warmup", "measure", "headspace", "ab", "done"
#: a batch count never reached
NEVER = sys.maxsize


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
        self.cpu = CpuSampling()
        self.state = WARMUP if plan.warmup > 0 else MEASURE
        self.pinned: bool | None = None
        self._pinned_read = False  # read off the first measured batch (a batch without a tensor leaves None)
        self.iterators = 0
        self._t_measure: float | None = None
        self._cache: deque = deque(maxlen=CACHED_BATCHES)
        self._replay: Iterator | None = None
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
        # --- what the fast path reads (WatchedIterator.__next__) ---
        self._asked, self._arrived = self.log.asked, self.log.arrived
        self._until = 0  # the next batch the watch works on: the batches before it take the fast path
        #: whether that batch is planned for the CPU sample alone (`_next_sampling`): sampled, or the one after a
        #: sampled batch, or both; not a phase's last batch, nor one kept to replay, nor an iterator's first
        self._lean = False
        self._deadline = math.inf  # with --seconds, while measuring: when the measuring time is up
        self._fetch: Callable[[Any], Any] = next  # how a batch is got from the loop's iterator
        # --- the plan of the current phase, in batches of the log ---
        self._phase_end = plan.warmup - 1 if self.state == WARMUP else NEVER  # its last batch
        self._keep_from = NEVER  # the measured batches kept for the replay start here
        self._next_sample = NEVER  # the next batch whose CPU time is read
        self._open_cpu: float | None = None  # the CPU clock where the last sampled batch's step started
        self._round = 0  # of the in-loop A/B
        self._fresh: weakref.WeakSet[WatchedIterator] = weakref.WeakSet()  # iterators not asked for a batch yet
        self._any_fresh = False  # whether there is one (read on the batches the watch works on)
        self.log.begin(0, self.state)

    # --- the phases: each starts after the last batch of the one before (its count `_phase_end`) ---------------

    def _start_measure(self, first: int) -> None:
        self.state = MEASURE
        self.log.begin(first, MEASURE)
        self.sampler.start()  # (before the measuring clock: it may wait for the baseline walk to end)
        self._sampling = True
        t = self._t_measure = clock()
        if self.plan.seconds is not None:
            self._deadline, self._phase_end = t + self.plan.seconds, NEVER
        else:
            self._phase_end = first + max(self.plan.steps, 1) - 1
            if self.plan.headspace > 0:
                self._keep_from = max(first, self._phase_end - CACHED_BATCHES + 1)
        self._next_sample, self.cpu.p = first, 1.0

    def _end_measure(self, last: int) -> None:
        if self._sampling:
            self.sampler.stop()
            self._sampling = False
        self._deadline, self._keep_from, self._next_sample = math.inf, NEVER, NEVER
        if self.plan.headspace > 0 and self._cache:
            self.state = HEADSPACE
            self.log.begin(last + 1, HEADSPACE)
            replay = self._replay = itertools.cycle(list(self._cache))
            self._fetch = lambda _inner: next(replay)
            self._phase_end = last + self.plan.headspace
        else:
            if self.plan.headspace > 0:
                self.note = "no batch was kept to replay"
            self._after_headspace(last)

    def _after_headspace(self, last: int) -> None:
        self._cache.clear()
        self._replay = None
        self._fetch, self._phase_end = next, NEVER
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
                if self.state != DONE:
                    self._finish()
                return
        from loaderbench.doctor.abtest import InLoopAB

        self.ab = InLoopAB(self.loader, changes, self.plan.ab_rounds, self.plan.ab_steps)
        self.ab.start(last + 1)
        self.state = AB
        self._begin_round(last + 1, 0)

    def _begin_round(self, first: int, round_: int) -> None:
        """Round ``round_`` of the in-loop A/B starts at batch ``first``: arm A is the loop's own iterator."""
        ab = self.ab
        arm = ab.arm_of(round_)
        self._round = round_
        self.log.begin(first, f"ab-{arm}")
        self._fetch = next if arm == "A" else (lambda _inner: ab.next_b())
        self._phase_end = first + ab.steps - 1

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
        self._until, self._lean, self._fetch = 0, False, next  # every next() from now on: handed on untimed
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

    # --- the batches the watch works on -------------------------------------------------------------------------

    def _after(self, n: int, batch: Any, arrived: float) -> None:
        """Batch ``n`` arrived: what the phase does with it, and the next phase after its last batch."""
        state = self.state
        if state == MEASURE:
            if not self._pinned_read:
                self.pinned, self._pinned_read = _pinned(batch), True
            if self.plan.headspace > 0:
                self._cache.append(batch)
            if n >= self._phase_end or arrived >= self._deadline:
                self._end_measure(n)
        elif n >= self._phase_end:
            if state == WARMUP:
                self._start_measure(n + 1)
            elif state == HEADSPACE:
                self._after_headspace(n)
            elif state == AB:
                if self._round + 1 >= 2 * self.ab.rounds:
                    self._finish()
                else:
                    self._begin_round(n + 1, self._round + 1)

    def _schedule(self, following: int, sampled: bool) -> None:
        """Set `_until`, the next batch the watch works on, after batch ``following - 1``."""
        if self.state == DONE:
            self._until, self._lean = 0, False
            return
        phase_end, keep_from = self._phase_end, self._keep_from
        until = min(phase_end, self._next_sample)
        if keep_from <= until:
            until = max(keep_from, following)
        if self._any_fresh:  # (one dropped unasked leaves the set)
            self._any_fresh = bool(self._fresh)
        if sampled or self._any_fresh:  # the sampled batch's step ends at the next next(); an iterator not asked yet
            until = following
        self._until = until
        self._lean = until < phase_end and until < keep_from and self._pinned_read and not self._any_fresh

    def _recent_period(self, n: int) -> float | None:
        """The loop's mean batch period over the batches before batch ``n`` (None: none before it)."""
        m = min(n, PERIOD_BATCHES)
        return (self._asked[n] - self._asked[n - m]) / m if m else None

    def next_planned(self, it: WatchedIterator) -> Any:
        """`next()` of a batch the watch works on (and of every batch once the watch is done). Its own work is in
        neither the wait nor a step: the step before ends when this call begins, the wait is timed around the
        batch alone, and the batch's step starts when this call returns."""
        if self._lean:
            return self._next_sampling(it)
        log, n = self.log, len(self._asked)
        if self.state == DONE:
            if n and n - 1 not in log.step_to:  # the last watched step ends here
                log.end_step(n - 1, None if it._first else clock())
                if self._open_cpu is not None:
                    log.close_cpu(cpu_clock() - self._open_cpu)
                    self._open_cpu = None
            return next(it._inner)
        t_in = clock()
        first = it._first
        if first:  # an iterator's first batch: the step before it (if any) was another iterator's
            it._first = False
            self._fresh.discard(it)
            log.end_step(n - 1, None)
            self._open_cpu = None
        elif self._open_cpu is not None:  # the sampled batch n - 1's step ends here
            self._close_sampled_step(n - 1, self._open_cpu)
        log.end_step(n - 1, t_in)
        sample = n >= self._next_sample
        c0 = cpu_clock() if sample else 0.0  # (before the wait's clock: the read is in neither the step nor the wait)
        t0 = clock()
        try:
            batch = self._fetch(it._inner)
        except StopIteration:
            self.ended(n, t0)
            raise
        t1 = clock()
        c1 = cpu_clock() if sample else 0.0
        self._asked.append(t0)
        self._arrived.append(t1)
        if first:
            log.mark_epoch(n)
            if self.state == WARMUP:  # the workers' memory baseline, walked while the warm-up goes on
                self.sampler.prepare()
        if sample:
            self._sampled(n, c1 - c0)
        self._after(n, batch, t1)
        self._schedule(n + 1, sample)
        if sample:  # (before the step's clock: the read is in neither the wait nor the step)
            self._open_cpu = cpu_clock()
        log.start_step(n, clock())
        return batch

    def _close_sampled_step(self, n: int, opened: float) -> None:
        """The step after sampled batch ``n``, which started at CPU clock ``opened``, ends here."""
        c_in = cpu_clock()
        if n not in self.log.step_to:
            self.log.close_cpu(c_in - opened)
        self._open_cpu = None

    def _sampled(self, n: int, wait_cpu: float) -> None:
        """Batch ``n`` was sampled: its wait's CPU time, and the next sampled batch."""
        self.log.add_cpu(n, 1.0 / self.cpu.p, wait_cpu)
        gap = self.cpu.gap(self._recent_period(n))
        self._next_sample = NEVER if gap is None else n + gap

    def _next_sampling(self, it: WatchedIterator) -> Any:
        """`next()` of a batch planned for the CPU sample alone (`_lean`): the same readings and log entries as
        `next_planned`, without its checks for the phases, the replay and an iterator's first batch. The next batch
        the watch works on is known before this one is fetched (only the end of the measuring time, with
        `--seconds`, changes it), so a batch that is not sampled has nothing done after it: its step starts at its
        arrival, as on the fast path."""
        t_in = clock()
        log, n = self.log, len(self._asked)
        if self._open_cpu is not None:  # the sampled batch n - 1's step ends here
            self._close_sampled_step(n - 1, self._open_cpu)
        log.end_step(n - 1, t_in)
        sample = n >= self._next_sample
        self._schedule(n + 1, sample)
        c0 = cpu_clock() if sample else 0.0
        t0 = clock()
        try:
            batch = self._fetch(it._inner)
        except StopIteration:
            self.ended(n, t0)
            raise
        t1 = clock()
        c1 = cpu_clock() if sample else 0.0
        self._asked.append(t0)
        self._arrived.append(t1)
        past = t1 >= self._deadline  # (with --seconds: the measuring time is up, the phase ends after this batch)
        if not past and self.state == MEASURE and self.plan.headspace > 0:
            self._cache.append(batch)  # as `_after` keeps the measured batches the watch works on
        if not sample:
            return self.out_of_time(batch) if past else batch
        self._sampled(n, c1 - c0)
        if past:
            self._after(n, batch, t1)
            self._schedule(n + 1, True)
        self._open_cpu = cpu_clock()
        log.start_step(n, clock())
        return batch

    def out_of_time(self, batch: Any) -> Any:
        """With `--seconds`: the batch that arrived once the measuring time was up ends the measurement."""
        n = len(self._asked) - 1
        self._after(n, batch, self._arrived[n])
        self._schedule(n + 1, False)
        self.log.start_step(n, clock())
        return batch

    def ended(self, n: int, at: float) -> None:
        """The loop's iterator ended at ``at``, asked for batch ``n``."""
        self.log.end_step(n - 1, at)
        if self._sampling and self.state == MEASURE:
            self.sampler._sample()

    def wrap(self, iterator: Any) -> WatchedIterator:
        self.iterators += 1
        self._current = iterator
        if self.state == MEASURE and not self._sampling:
            self._start_measure(len(self._asked))
        it = WatchedIterator(iterator, self)
        self._fresh.add(it)
        self._any_fresh = True
        self._until, self._lean = 0, False  # its first batch is an epoch's start
        return it


class WatchedIterator:
    """A loader's iterator, timed: two clock reads per batch, the batch handed on unchanged."""

    def __init__(self, inner: Any, watch: LoaderWatch):
        self._inner = inner
        self._watch = watch
        self._first = True
        #: both, for the fast path: one attribute read (on a class with `__getattr__`, none is specialized)
        self._fast = (watch, inner)

    def __iter__(self) -> WatchedIterator:
        return self

    def __len__(self) -> int:
        return len(self._inner)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __next__(self) -> Any:
        w, inner = self._fast
        asked = w._asked
        if len(asked) < w._until:  # the fast path: a batch the watch has no work on
            t0 = clock()
            try:
                batch = w._fetch(inner)
            except StopIteration:
                w.ended(len(asked), t0)
                raise
            t1 = clock()
            asked.append(t0)
            w._arrived.append(t1)
            if t1 < w._deadline:
                return batch
            return w.out_of_time(batch)
        return w.next_planned(self)

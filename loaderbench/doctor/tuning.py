"""`--tune`: a search for a better setting of the watched loader, on the script's own dataset object, inside the
script's process, with the search `loaderbench tune` runs over a study (loaderbench.tune.search).

The settings that apply to this loader become a one-scenario search space (a study matrix of the `sleep`
workload that is never run: its cells only name the candidates); each trial builds a loader over the same
dataset, sampler, batching and collate function with the candidate's settings
(loaderbench.doctor.abtest.variant_loader) and runs a replica of the script's loop on it while the loop waits:
after each batch, a step as long as the loop's median step, on a CPU for the share of it the loop's thread was
(`LoopShape`). A loop whose step frees the cores (an accelerator's, a sleep) lets workers use them; one that
keeps a core busy takes it from them. Where the epoch's length is known, a trial also times one epoch boundary
(the old iterator dropped, the next one's first batch: workers started anew, or persistent ones reset) and rates
the candidate by a whole epoch. The budget is a number of trials and a number of seconds, both checked before
each trial starts. The winner is only a candidate: the watch then validates it in the script's own loop (A B
rounds) before anything is recommended.
"""

from __future__ import annotations

import gc
import inspect
import math
import statistics
import time
import warnings
from dataclasses import dataclass
from typing import Any

from loaderbench.doctor.abtest import variant_loader
from loaderbench.doctor.hooks import unwatched_iter
from loaderbench.doctor.steps import clock
from loaderbench.errors import LoaderbenchError

#: num_workers values the search may list: these, up to twice the cores the process may use (at least 4), or
#: further where the loop's loading waits more than it computes (`workers_to_hide`)
WORKER_LADDER = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)
#: workers to list: twice those that would just keep a data-bound loop fed (their batches come unevenly)
HIDE_MARGIN = 2.0
#: and at most this many per core the process may use
MAX_WORKERS_PER_CORE = 16
#: batches timed per trial at least (more with many workers: three times what they keep prefetched)
MIN_TRIAL_BATCHES = 8
#: a trial stops timing after this share of the budget's seconds per trial, once it timed 3 batches
TRIAL_SHARE = 1.0
#: DataLoader's own defaults, for a setting the loader does not hold (prefetch_factor without workers)
TORCH_DEFAULTS = {"prefetch_factor": 2, "persistent_workers": False, "pin_memory": False}
#: the axes the search varies, in the order the search tries them after num_workers
TUNED_AXES = ("num_workers", "worker_method", "prefetch_factor", "persistent_workers", "pin_memory", "start_method")


@dataclass(frozen=True)
class TuneBudget:
    """At most ``trials`` trials and ``seconds`` seconds; a trial that started within both finishes."""

    seconds: float = 60.0
    trials: int = 24

    def __post_init__(self) -> None:
        if not (isinstance(self.seconds, int | float) and math.isfinite(self.seconds) and self.seconds > 0):
            raise LoaderbenchError(f"--budget-s (budget_s) {self.seconds!r}: allowed: a number of seconds above 0")
        if not isinstance(self.trials, int) or self.trials < 1:
            raise LoaderbenchError(
                f"--budget-trials (budget_trials) {self.trials!r}: allowed: a whole number of trials, 1 or more"
            )


@dataclass(frozen=True)
class LoopShape:
    """What the watch measured of the script's loop: its median step (`step_s`) and the share of it the loop's
    thread spent on a CPU; one batch's loading time in one process (`load_s`: the wait in next() without workers,
    workers times the step period with them) and the share of it on a CPU (None: not read)."""

    step_s: float = 0.0
    step_cpu_share: float = 0.0
    load_s: float | None = None
    load_cpu_share: float | None = None

    @classmethod
    def of_report(cls, report: dict) -> LoopShape:
        """From a loader report (loaderbench.doctor.report.loader_report) of a loop that waits for data."""
        st, n = report["steps"], int(report["settings"].get("num_workers") or 0)
        step, wait = st.get("step_p50_s"), st.get("wait_p50_s")
        if step is None or wait is None:
            return cls()
        if n == 0:
            load, share = wait, st.get("wait_cpu_share")
        else:
            busy = report["workers"].get("workers_cpu_cores")
            load = n * (wait + step)
            share = min(1.0, busy / n) if busy else None
        return cls(step, st.get("step_cpu_share") or 0.0, load, share)

    def step(self) -> None:
        """One replica step: this thread's CPU time for its share of the median step (a thread preempted meanwhile
        takes longer, as the loop's own would), then asleep for the rest of the step."""
        if self.step_s <= 0:
            return
        t0 = clock()
        busy_until = time.thread_time() + self.step_cpu_share * self.step_s
        while time.thread_time() < busy_until:
            pass
        rest = t0 + self.step_s - clock()
        if rest > 0:
            time.sleep(rest)


def workers_to_hide(loop: LoopShape | None, cores: float) -> tuple[int | None, str]:
    """How many workers the search should reach to feed the loop: HIDE_MARGIN times one batch's loading over the
    step, at most as many as would keep every core busy with the loading's CPU share (more would queue for the
    cores), and at most MAX_WORKERS_PER_CORE per core; with why. None: not known."""
    if loop is None or loop.load_s is None or loop.step_s <= 0:
        return None, "the loop's loading time per batch is not known"
    need = math.ceil(HIDE_MARGIN * loop.load_s / loop.step_s)
    why = (
        f"one batch loads in {1e3 * loop.load_s:.3g} ms and a step takes {1e3 * loop.step_s:.3g} ms: "
        f"{HIDE_MARGIN:g} times the workers that would just keep up is {need}"
    )
    c = max(1, int(cores))
    if loop.load_cpu_share:
        busy = math.ceil(c / loop.load_cpu_share)
        if busy < need:
            need = busy
            why += f"; loading is {100 * loop.load_cpu_share:.0f}% on a CPU, so {busy} keep {c} cores busy"
    if need > MAX_WORKERS_PER_CORE * c:
        need = MAX_WORKERS_PER_CORE * c
        why += f"; at most {MAX_WORKERS_PER_CORE} per core"
    return need, why


class BudgetSpent(Exception):
    """Raised by a trial that would start past the budget: the search ends with what it measured."""


def thread_workers_offered() -> bool:
    """Whether the installed torch's DataLoader takes `worker_method` (thread workers: one interpreter, for work
    that releases the GIL), from its signature."""
    from torch.utils.data import DataLoader

    from loaderbench.study.loader_rules import THREAD_ARGUMENT

    return THREAD_ARGUMENT in inspect.signature(DataLoader).parameters


def search_space(
    settings: dict, cores: float, accelerator: bool, threads: bool = False, hide: int | None = None
) -> tuple[dict[str, list], dict[str, str]]:
    """The values each setting may take here, and why the others are held at the loader's own value. `threads`:
    whether the DataLoader offers thread workers (`thread_workers_offered`); `hide`: the workers the loop would
    need (`workers_to_hide`), listed up to the ladder's next value where that is above twice the cores."""
    n = int(settings.get("num_workers") or 0)
    values: dict[str, list] = {}
    fixed: dict[str, str] = {}
    iterable = bool(settings.get("iterable_dataset"))
    if iterable and settings.get("splits_among_workers") is not True:
        fixed["num_workers"] = (
            "the IterableDataset does not split its stream among workers (its __iter__ never calls "
            "torch.utils.data.get_worker_info()), so more workers would repeat samples"
            if settings.get("splits_among_workers") is False
            else "the IterableDataset's source cannot be read, so whether it splits among workers is not known"
        )
        workers = [n]
    else:
        top = max(4, 2 * max(1, int(cores)))
        if hide is not None and hide > top:
            top = min((w for w in WORKER_LADDER if w >= hide), default=WORKER_LADDER[-1])
        workers = sorted({w for w in WORKER_LADDER if w <= top} | {n})
    values["num_workers"] = workers
    if any(workers) and threads:
        values["worker_method"] = [settings.get("worker_method") or "process", "thread"]
        values["worker_method"] = sorted(set(values["worker_method"]), key=values["worker_method"].index)
    elif any(workers):
        from loaderbench.study.loader_rules import torch_version

        fixed["worker_method"] = f"process workers: torch {torch_version()}'s DataLoader has no thread workers"
    if any(workers):
        values["prefetch_factor"] = sorted({2, 4, int(settings.get("prefetch_factor") or 2)})
        if iterable:
            fixed["persistent_workers"] = "an IterableDataset: kept as it is"
        else:
            values["persistent_workers"] = [False, True]
        method = settings.get("start_method")
        if method in ("spawn", "forkserver"):
            values["start_method"] = [method, "fork"]
        else:
            fixed["start_method"] = (
                "kept: spawn and forkserver import the script again in every worker, which a script without an "
                "`if __name__ == '__main__':` guard would run again"
            )
    if accelerator:
        values["pin_memory"] = [False, True]
    else:
        fixed["pin_memory"] = "no accelerator: pinned memory only speeds up copies to one"
    return values, fixed


def scenario_of(values: dict[str, list], cores: float, step_ms: float) -> Any:
    """The search space as the one scenario of a study matrix (its cells name the candidates; none is run). The
    loop's step time is part of it: with a step in the loop, one worker overlaps loading with it, so the screen
    measures one worker too."""
    from loaderbench.study.study_file import parse_study
    from loaderbench.tune.space import scenarios

    c = max(1, round(cores))
    matrix = {"workload": ["sleep"], "cores": [c], "step_ms": [round(max(step_ms, 0.0), 3)]}
    for axis, vals in values.items():
        matrix[axis] = list(vals)
    study = parse_study({"study": {"name": "doctor-tune"}, "matrix": matrix}, where="doctor --tune", max_cores=c)
    (scenario,) = scenarios(study.cells)
    return scenario


def changes_of(candidate: Any, varied: list[str]) -> dict:
    """The candidate's values of the varied axes (those that apply to it)."""
    return {a: candidate[a] for a in varied if candidate[a] is not None}


class LoaderTrials:
    """measure(candidate, repetition) for the search: the candidate's loader in a replica of the script's loop
    (`loop`: one replica step after each batch), in steps per second over an epoch of `epoch_batches` (None: not
    known, the steady rate alone)."""

    def __init__(
        self,
        loader: Any,
        varied: list[str],
        budget: TuneBudget,
        loop: LoopShape | None = None,
        epoch_batches: int | None = None,
    ):
        self.loader, self.varied, self.budget = loader, varied, budget
        self.loop = loop or LoopShape()
        self.epoch_batches = epoch_batches
        self.t0 = clock()
        self.trials = 0
        self.durations: list[float] = []
        self.spent: str | None = None

    def __call__(self, candidate: Any, repetition: int) -> Any:
        """One trial, if the budget can pay for it: trials left, and seconds left for as long as the trials so far
        took (their median)."""
        if self.trials >= self.budget.trials:
            self.spent = f"{self.budget.trials} trials"
            raise BudgetSpent(self.spent)
        about = statistics.median(self.durations) if self.durations else 0.0
        if clock() - self.t0 + about >= self.budget.seconds:
            self.spent = f"{self.budget.seconds:g} s"
            raise BudgetSpent(self.spent)
        self.trials += 1
        start = clock()
        try:
            return self.trial(changes_of(candidate, self.varied))
        finally:
            self.durations.append(clock() - start)

    def trial(self, changes: dict) -> Any:
        from loaderbench.tune.evidence import Observation

        start = clock()
        it = variant = None
        try:
            with warnings.catch_warnings():  # torch's warning of more workers than cores: the search weighs that
                warnings.simplefilter("ignore", UserWarning)
                variant = variant_loader(self.loader, changes)
                it = unwatched_iter(variant)
            n = variant.num_workers
            depth = n * (variant.prefetch_factor or 2)
            for _ in range(max(1, depth)):  # the workers' start and the batches they queue first: not timed
                it = self._next(variant, it)[0]
            want = max(MIN_TRIAL_BATCHES, 3 * depth)
            limit = TRIAL_SHARE * self.budget.seconds / self.budget.trials
            t0 = clock()
            got = 0
            while got < want and (got < 3 or clock() - t0 < limit):
                it = self._next(variant, it)[0]
                self.loop.step()
                got += 1
            per_step = (clock() - t0) / got
            rate = 1.0 / per_step
            if self.epoch_batches is not None and self.epoch_batches > 1:
                # one epoch boundary, as the loop meets it: its iterator dropped, the next one's first batch
                t1 = clock()
                it = None
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    it = unwatched_iter(variant)
                it = self._next(variant, it)[0]
                self.loop.step()
                boundary = clock() - t1
                rate = self.epoch_batches / (boundary + (self.epoch_batches - 1) * per_step)
        except Exception as exc:  # noqa: BLE001 - a setting that fails here is no answer, and the script goes on
            error = f"{type(exc).__name__}: {exc}"[:300]
            del exc, it, variant
            # the error's traceback holds the iterator in a reference cycle: collect it now, so that its workers
            # end here and not in a process the next trial forks
            gc.collect()
            return Observation("failed", cell_s=clock() - start, error=error)
        del it, variant  # the trial's workers end with its iterator and loader
        return Observation("ok", rate, None, clock() - start)

    @staticmethod
    def _next(loader: Any, it: Any) -> tuple[Any, Any]:
        try:
            return it, next(it)
        except StopIteration:  # a short epoch: the next one, as the script's loop would
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                it = unwatched_iter(loader)
            try:
                return it, next(it)
            except StopIteration:
                raise LoaderbenchError("the loader yields no batch") from None


def epoch_length(loader: Any) -> int | None:
    """Batches per epoch, where the loader knows (None: an IterableDataset without a length)."""
    try:
        return len(loader)
    except TypeError:
        return None


def tune_loader(loader: Any, settings: dict, cores: float, loop: LoopShape | None, budget: TuneBudget) -> dict:
    """Search the settings of ``loader`` that apply (see `search_space`) within ``budget``, each trial a replica of
    ``loop``; the result, with ``changes``: the winner's settings that differ from the loader's own ({}: keep
    them)."""
    import torch

    from loaderbench.tune.confirm import highest
    from loaderbench.tune.options import TuneOptions
    from loaderbench.tune.search import ScenarioSearch

    loop = loop or LoopShape()
    hide, why = workers_to_hide(loop, cores)
    values, fixed = search_space(settings, cores, torch.cuda.is_available(), thread_workers_offered(), hide)
    epoch = epoch_length(loader)
    out: dict = {
        "budget": {"seconds": budget.seconds, "trials": budget.trials},
        "space": values,
        "fixed": fixed,
        "workers_needed": {"workers": hide, "why": why},
        "replica": {
            "step_s": loop.step_s,
            "step_cpu_share": loop.step_cpu_share,
            "epoch_batches": epoch,
        },
        "trials": [],
        "changes": {},
    }
    varied = [a for a in TUNED_AXES if len(values.get(a, ())) > 1]
    if not varied:
        out["stop"] = "nothing to search"
        out["note"] = "no setting of this loader can be varied safely here"
        return out
    varied = ["num_workers", *(a for a in varied if a != "num_workers")]  # num_workers is always set, if fixed
    scenario = scenario_of({a: values[a] for a in varied}, cores, 1e3 * loop.step_s)
    trials = LoaderTrials(loader, varied, budget, loop, epoch)
    options = TuneOptions()
    steps: list[dict] = out["trials"]

    def on_step(_scenario: Any, step: Any) -> None:
        if step.repetition is not None:
            steps.append({"phase": step.phase, "setting": step.candidate, "steps_per_s": step.value})

    search = ScenarioSearch(scenario, trials, options, options.rungs(3), on_step)
    try:
        outcome = search.run()
        out["stop"] = f"search finished: {outcome.stop}"
    except BudgetSpent as spent:
        outcome = search.out
        out["stop"] = f"budget spent ({spent})"
    out["spent_s"] = clock() - trials.t0
    usable = [e for e in outcome.evidence.values() if e.usable(None)]
    answer = outcome.answer if outcome.answer is not None else (highest(usable) if usable else None)
    if answer is None:
        out["note"] = "no trial gave a usable measurement"
        return out
    best = changes_of(answer.candidate, varied)
    out["best"] = {"settings": best, "steps_per_s": answer.median, "repetitions": answer.n}
    current = {**TORCH_DEFAULTS, **{a: v for a, v in settings.items() if v is not None}}
    changes = {a: v for a, v in best.items() if current.get(a) != v}
    if changes.get("num_workers") == 0 and settings.get("num_workers"):
        # DataLoader refuses these without workers: the line to paste drops them too
        changes["prefetch_factor"] = None
        if settings.get("persistent_workers"):
            changes["persistent_workers"] = False
    out["changes"] = changes
    return out

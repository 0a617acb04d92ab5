"""`loaderbench.watch(loader)`: the doctor in a notebook or a custom loop, without a child process.

for batch in loaderbench.watch(loader):
    step(batch)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loaderbench.doctor.session import Session
from loaderbench.doctor.watch import WatchedIterator, WatchPlan
from loaderbench.errors import LoaderbenchError


class Watched:
    """A loader, watched: iterate it as the loader itself (every epoch); ``report()`` and ``diagnosis()`` say
    what was found so far; with ``out``, doctor.json and doctor.html are written there when it is ready."""

    def __init__(self, loader: Any, plan: WatchPlan, out: str | Path | None = None, echo: bool = True):
        self.loader = loader
        self.out = Path(out) if out is not None else None
        self.session = Session(plan, echo=echo, after_done=self._done)

    def __iter__(self):
        it = iter(self.loader)
        if isinstance(it, WatchedIterator):  # the doctor's hooks watch it already
            return it
        w = self.session.watch_for(self.loader, "watch()")
        return it if w is None else w.wrap(it)

    def __len__(self) -> int:
        return len(self.loader)

    def _done(self, session: Session) -> None:
        if self.out is not None:
            self.save(self.out)

    def report(self) -> dict:
        """The doctor.json document of what was measured so far."""
        from loaderbench.doctor.doctor_json import build
        from loaderbench.measure.fingerprint import host_fingerprint, package_versions

        return build(
            [self.session.to_json()],
            command=["loaderbench.watch"],
            plan=self.session.plan.to_json(),
            exit_code=None,
            stderr_tail="",
            fingerprint={**host_fingerprint(versions=False), **package_versions(import_missing=False)},
        )

    def diagnosis(self) -> str:
        """The diagnosis of the watched loader in words (what is known so far)."""
        reports = self.session.reports()
        return reports[0]["diagnosis"] if reports else "the loader was never iterated"

    def save(self, out: str | Path) -> Path:
        from loaderbench.doctor.doctor_json import write
        from loaderbench.doctor.page import write_page

        doc = self.report()
        path = write(doc, Path(out))
        write_page(doc, Path(out))
        return path


def watch(
    loader: Any,
    *,
    steps: int = 200,
    warmup: int = 5,
    seconds: float | None = None,
    headspace: int = 20,
    out: str | Path | None = None,
    echo: bool = True,
    validate: dict | None = None,
    rounds: int = 4,
    round_steps: int = 10,
    tune: bool = False,
    budget_s: float = 60.0,
    budget_trials: int = 24,
) -> Watched:
    """Watch ``loader`` in this loop: ``warmup`` steps, then ``steps`` measured (or ``seconds``), then
    ``headspace`` steps replayed from memory (0: none; the loop sees those batches again); then, with
    ``validate`` (DataLoader changes such as ``{"num_workers": 4}``, or ``{"auto": True}``), ``rounds`` pairs of
    A B rounds of ``round_steps`` steps, the loop fed by the loader and by one with the changes in turn. With
    ``tune``, the changes are those a search of the loader's settings finds (at most ``budget_trials`` trials and
    ``budget_s`` seconds), validated the same way."""
    if tune:
        from loaderbench.doctor.tuning import TuneBudget

        if validate is not None:
            raise LoaderbenchError("watch: give either tune=True or validate=..., not both")
        TuneBudget(budget_s, budget_trials)
    plan = WatchPlan(
        warmup=warmup,
        steps=steps,
        seconds=seconds,
        headspace=headspace,
        try_changes=validate,
        ab_rounds=rounds,
        ab_steps=round_steps,
        tune=tune,
        tune_budget_s=budget_s,
        tune_trials=budget_trials,
    )
    return Watched(loader, plan, out, echo)

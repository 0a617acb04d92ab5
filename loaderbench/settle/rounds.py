"""The settling loop: decide, measure one more repetition of the cells the open claims read, decide again; until
nothing settleable is open, the budget cannot pay for another round, or the rules' own estimates are reached.
Then the report: per claim, its verdict before and after and the repetitions it was decided on."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from loaderbench.analysis.findings.verdict_history import verdicts
from loaderbench.analysis.table.records import load_records
from loaderbench.errors import LoaderbenchError
from loaderbench.settle.needs import Open, open_claims
from loaderbench.study.study_file import Study


@dataclass
class Settled:
    """What a settle run did: per claim (by name) the verdict it started and ended at, the repetitions per cell of
    the cells it reads at the end, the rounds measured and why it stopped."""

    study: str
    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)
    repetitions: dict[str, int] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)  # still open: why
    rounds: int = 0
    seconds: float = 0.0
    stopped: str = ""

    def as_dict(self) -> dict:
        return self.__dict__ | {}


def study_rows(results: Path, study: str) -> pd.DataFrame:
    df, _ = load_records(results)
    if df.empty or "study" not in df:
        return df
    return df[df["study"] == study]


def _reps(rows: pd.DataFrame, cells: list[str]) -> int:
    """The fewest repetitions measured of any of `cells` (ok or failed: a failure is a result some rules read)."""
    counts = rows[rows["cell_id"].isin(cells)].groupby("cell_id")["repetition"].nunique()
    return int(counts.reindex(cells, fill_value=0).min()) if len(cells) else 0


def _seconds_per_repetition(rows: pd.DataFrame) -> float:
    start = pd.to_datetime(rows.get("started_at"), errors="coerce", utc=True)
    end = pd.to_datetime(rows.get("finished_at"), errors="coerce", utc=True)
    spent = (end - start).dt.total_seconds().dropna() if start is not None and end is not None else pd.Series()
    return float(spent.median()) + 2.0 if len(spent) else 30.0  # + a fresh process's start-up per repetition


#: repetitions per cell after which a claim whose estimate the budget cannot pay is left for another run
FUTILE_AFTER = 6


def _beyond(item: Open, rows: pd.DataFrame, per_rep: float, deadline: float) -> str | None:
    """Why `item` is left unmeasured: measured at least FUTILE_AFTER times, its estimate asks for more repetitions than
    the budget left could pay were its cells measured alone (None: it may be reached). Below FUTILE_AFTER the
    estimate is too rough to give a claim up on."""
    if item.estimate is None or not item.cells:
        return None
    have = _reps(rows, item.cells)
    if have < FUTILE_AFTER:
        return None
    affordable = int(max(0.0, deadline - time.monotonic()) // (per_rep * len(item.cells)))
    if item.estimate <= have + affordable:
        return None
    return (
        f"open at {have} repetitions per cell: its rule asks for about {item.estimate}, more than the budget left "
        f"pays for (about {affordable} more)"
    )


def _measure(study: Study, results: Path, repetitions: int, cells: list[str]) -> int:
    """One round: `loaderbench run` in a fresh process, for `cells` up to `repetitions` each."""
    cmd = [sys.executable, "-m", "loaderbench", "run", str(study.path), "--results", str(results)]
    cmd += ["--repetitions", str(repetitions), "--cells", ",".join(cells), "--no-retry-failed"]
    return subprocess.run(cmd, check=False).returncode


def settle(study: Study, results: str | Path, budget_min: float, say=print) -> Settled:
    """Settle what `study`'s records under `results` leave open, within `budget_min` minutes of measuring."""
    results = Path(results)
    rows = study_rows(results, study.name)
    if rows.empty:
        raise LoaderbenchError(
            f"{results / study.name}: no records of study {study.name!r}; run it first (loaderbench run "
            f"{study.path} --results {results})"
        )
    out = Settled(study.name)
    t0 = time.monotonic()
    deadline = t0 + budget_min * 60
    cells_of: dict[str, list[str]] = {}
    while True:
        items = open_claims(rows)
        if not out.rounds:
            out.before = {i.name: i.outcome.verdict for i in items}
        cells_of |= {i.name: i.cells for i in items if i.cells}
        per_rep = _seconds_per_repetition(rows)
        beyond = {i.name: why for i in items if not i.why_not and (why := _beyond(i, rows, per_rep, deadline))}
        todo: list[Open] = [
            i
            for i in items
            if not i.why_not and i.name not in beyond and (i.estimate is None or i.estimate > _reps(rows, i.cells))
        ]
        out.left = {i.name: beyond.get(i.name) or i.why_not or "" for i in items if i not in todo}
        if not todo:
            reached = [i for i in items if not i.why_not and i.name not in beyond]
            out.left |= {i.name: f"open at the {i.estimate} repetitions per cell its rule asked for" for i in reached}
            out.stopped = (
                "nothing open that more repetitions can settle within the budget" if items else "every claim is decided"
            )
            break
        cells = sorted({c for i in todo for c in i.cells})
        target = _reps(rows, cells) + 1
        cost = per_rep * len(cells)
        if time.monotonic() + cost > deadline:
            out.stopped = f"the budget ({budget_min:g} min) cannot pay for another round (about {cost:.0f} s)"
            out.left |= {i.name: f"open at {_reps(rows, i.cells)} repetitions per cell" for i in todo}
            break
        say(f"round {out.rounds + 1}: {len(todo)} open claims read {len(cells)} cells: measuring repetition {target}")
        code = _measure(study, results, target, cells)
        if code == 130:
            out.stopped = "interrupted"
            break
        out.rounds += 1
        before, rows = len(rows), study_rows(results, study.name)
        if len(rows) <= before:
            out.stopped = f"a round measured nothing (loaderbench run exited {code})"
            break
    now = verdicts(rows)
    out.after = {name: now.get(name, "not carried") for name in out.before}
    out.repetitions = {name: _reps(rows, cells) for name, cells in cells_of.items()}
    out.seconds = time.monotonic() - t0
    return out


def write(settled: Settled, results: str | Path) -> Path:
    path = Path(results) / f"settle-{settled.study}.json"
    path.write_text(json.dumps(settled.as_dict(), indent=1) + "\n")
    return path

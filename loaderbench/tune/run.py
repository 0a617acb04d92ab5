"""A whole tune run: every scenario of a study searched (loaderbench.tune.search) with measurements through the
ordinary runner (loaderbench.tune.trials), tune.json written (loaderbench.tune.tune_json), the answer rendered
(loaderbench.tune.answer_text). The CLI and the Slurm tune job both call `run_tune`.

Exit status (`TuneRun.exit_code`): 0 when every scenario has an answer; 1 when some scenario has none
(every setting it measured failed, or none stayed under --max-memory-mb). Bad input raises a
LoaderbenchError (the CLI's exit status 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loaderbench.launch.base import TaskRunner
from loaderbench.schema.record import now
from loaderbench.schema.store import Store, atomic_write_json
from loaderbench.study.study_file import Study
from loaderbench.tune.answer_text import number, render
from loaderbench.tune.options import TuneError, TuneOptions
from loaderbench.tune.outcome import Step
from loaderbench.tune.search import search
from loaderbench.tune.space import Scenario, scenarios
from loaderbench.tune.trials import CellMeasurer, tune_study_name
from loaderbench.tune.tune_json import build_result

EXIT_ANSWERED = 0
EXIT_NO_ANSWER = 1


def result_path(results: str | Path, study: str) -> Path:
    """Where tune.json goes: RESULTS/<study>-tune.json, beside the folder of its records (a file directly
    under RESULTS is not read as a record by the analysis)."""
    return Path(results) / f"{tune_study_name(study)}.json"


@dataclass(frozen=True)
class TuneRun:
    result: dict[str, Any]
    path: Path
    text: str

    @property
    def exit_code(self) -> int:
        return EXIT_ANSWERED if self.result["answered"] == self.result["scenarios_total"] else EXIT_NO_ANSWER


def print_step(console) -> Callable[[Scenario, Step], None]:
    """A live line per measurement and decision, on `console` (rich)."""
    from rich.markup import escape

    def show(scenario: Scenario, step: Step) -> None:
        head = escape(f"[tune {scenario.label}]")
        if step.repetition is None:
            console.print(f"[dim]{head} {step.phase}: {escape(step.candidate)}: {escape(step.note)}[/dim]")
            return
        value = f"{number(step.value)}/s" if step.value is not None else "[red]no value[/red]"
        console.print(
            f"{head} {step.phase} {escape(step.candidate)} rep {step.repetition}: {value}  "
            f"[dim]{escape(step.note)}[/dim]"
        )

    return show


def run_tune(
    study: Study,
    results: str | Path,
    options: TuneOptions,
    *,
    launcher: dict | None = None,
    retry_failed: bool = True,
    runner_factory: Callable[[dict | None], Any] = TaskRunner,
    out_path: str | Path | None = None,
    on_step: Callable[[Scenario, Step], None] | None = None,
) -> TuneRun:
    """Search every scenario of `study`, write tune.json (default: `result_path`), return it and its text."""
    spaces = scenarios(study.cells)
    if not spaces:
        raise TuneError(f"{study.path}: no cells to tune")
    started = now()
    store = Store(results)
    measurer = CellMeasurer(
        study, store, options.metric, launcher=launcher, retry_failed=retry_failed, runner_factory=runner_factory
    )
    rungs = options.rungs(study.settings.repetitions)
    outcomes = [search(sc, measurer, options, rungs, on_step) for sc in spaces]
    result = build_result(
        study,
        options,
        outcomes,
        results=results,
        rungs=rungs,
        gpus=measurer.gpus,
        started_at=started,
        measured=measurer.measured,
        reused=measurer.reused,
    )
    path = Path(out_path) if out_path else result_path(results, study.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, result)
    return TuneRun(result, path, render(result, str(path)))

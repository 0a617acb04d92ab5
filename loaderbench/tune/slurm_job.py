"""tune on a Slurm node: ONE job with the node's cores (the profile's node_cores) that runs `run_tune` there,
submitted through submitit (`executor.submit` of a callable, the executor of loaderbench.launch.slurm).

Tune measures one cell repetition after another, each pinned to its `cores` inside the job's allocation, and
decides what to measure next from what it has seen: that needs one process holding the whole search, not
an array. Its records and tune.json land in the profile's results folder like any other run's.

Preempted or out of time, the job is requeued unchanged (submitit's Checkpointable, up to the profile's
max_requeues) and the new run resumes from the records written so far: a cell repetition is measured whole
or not at all, so at most the one in progress is lost.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import submitit

from loaderbench.errors import StudyError
from loaderbench.launch.base import dataset_spec, prepare_dataset
from loaderbench.launch.preflight import check_submission
from loaderbench.launch.slurm import can_submit, logs_folder, make_executor
from loaderbench.schema.cell import Task
from loaderbench.schema.store import Store
from loaderbench.study.cluster_profile import LoadedProfile
from loaderbench.study.estimate import Estimator, estimate_study
from loaderbench.study.study_file import Study
from loaderbench.tune.options import TuneOptions
from loaderbench.tune.run import result_path
from loaderbench.tune.trials import tune_study_name

#: the tune job's default time limit: the grid's estimated time times this (tune spends less than the grid;
#: a job that runs out is requeued and resumes)
GRID_SLACK = 1.25


class TuneJob(submitit.helpers.Checkpointable):
    """`run_tune` on the node; returns what tune.json says in short. Requeued unchanged (checkpoint())."""

    def __init__(self, study: Study, results: str, options: TuneOptions):
        self.study, self.results, self.options = study, results, options

    def __call__(self) -> dict:
        from rich.console import Console

        from loaderbench.tune.run import print_step, run_tune

        env = submitit.JobEnvironment()
        launcher = {
            "kind": "slurm",
            "job_id": env.job_id,
            "node": env.hostname,
            "tune": True,
            "job_cpus": len(os.sched_getaffinity(0)),  # the allocation the cells are pinned inside
            "restarts": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
        }
        console = Console(stderr=True, highlight=False, soft_wrap=True)
        run = run_tune(self.study, self.results, self.options, launcher=launcher, on_step=print_step(console))
        print(run.text, flush=True)
        return {
            "exit_code": run.exit_code,
            "tune_json": str(run.path),
            "answered": run.result["answered"],
            "scenarios": run.result["scenarios_total"],
        }


@dataclass(frozen=True)
class TuneSubmission:
    job_id: str
    cores: int
    gpus: int
    time_limit_min: int
    grid_estimate_s: float
    out_path: Path
    records: Path
    logs: Path


def grid_estimate(study: Study, store: Store):
    """The full grid's estimate (loaderbench.study.estimate: every cell x the study's repetitions, one after another),
    calibrated on the study's and the tune's records where there are any."""
    records = [r for name in (study.name, tune_study_name(study.name)) for _, r in store.records(name)]
    tasks = [Task(study.name, cell, rep) for cell in study.cells for rep in range(study.settings.repetitions)]
    return estimate_study(study, tasks, Estimator.from_records(records))


def submit_tune(
    study: Study,
    profile: LoadedProfile,
    results: str | Path,
    options: TuneOptions,
    dry_run: bool = False,
    time_limit_min: int | None = None,
) -> TuneSubmission:
    """Submit the tune job (nothing when `dry_run`); every check runs before the sbatch."""
    s = profile.settings.slurm
    root = Path(results).resolve()
    store = Store(root)
    grid = grid_estimate(study, store)
    limit = time_limit_min or max(s.time_limit_min, math.ceil(GRID_SLACK * grid.pending_s / 60))
    if study.settings.timeout_s + 60 > limit * 60:
        raise StudyError(
            f"{study.path}: [study] timeout_s = {study.settings.timeout_s:g} does not fit the tune "
            f"job's time limit of {limit} min (allow at least 60 s more than timeout_s)"
        )
    logs = logs_folder(profile, root)
    check_submission(profile, root, logs, grid)
    gpus = s.gpus_per_cell
    job_id = "(dry run)"
    if not dry_run or can_submit():  # a dry run builds the executor where Slurm is at hand: submitit checks it
        executor = make_executor(profile, logs, s.node_cores, gpus, tune_study_name(study.name), limit)
    if not dry_run:
        prepare_dataset(dataset_spec(study))  # generate once here (shared cache), not on the node
        job = executor.submit(TuneJob(study, str(root), options))
        job_id = job.job_id
    return TuneSubmission(
        job_id,
        s.node_cores,
        gpus,
        limit,
        grid.pending_s,
        result_path(root, study.name),
        root / tune_study_name(study.name),
        logs,
    )

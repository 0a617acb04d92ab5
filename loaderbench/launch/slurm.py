"""Run a study's pending cell repetitions as Slurm job arrays through submitit.

One array per allocation shape (cores, GPUs, nodes, tasks per node), one array task per cell repetition; each
task runs the same `run_task` as the local launcher, so records are identical but for their `launcher` block.
A DDP cell (rank_mode = "ddp") under a profile with `ddp_ranks_per_node` gets one Slurm task per rank, on as many
nodes as that takes: submitit's distributed environment brings them together, rank 0 writes the record.
A ledger (<results>/<study>/.slurm-ledger.jsonl) remembers what was submitted, so a second submit
skips cells that are pending or running and nothing is measured twice.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import submitit
from submitit.core.utils import UncompletedJobError

from loaderbench.errors import StudyError, ToolMissing
from loaderbench.launch.base import Launcher, TaskRunner, dataset_spec, prepare_dataset
from loaderbench.launch.preflight import check_submission
from loaderbench.launch.slurm_end import job_end
from loaderbench.measure.warm import study_imports
from loaderbench.schema.cell import Task
from loaderbench.schema.record import FAILED, TIMEOUT, ErrorInfo, Record
from loaderbench.schema.store import Store
from loaderbench.study.cluster_profile import LoadedProfile
from loaderbench.study.estimate import Estimator, StudyEstimate, estimate_study
from loaderbench.study.study_file import Study

LEDGER = ".slurm-ledger.jsonl"
ACTIVE_STATES = {
    "PENDING",
    "RUNNING",
    "CONFIGURING",
    "COMPLETING",
    "REQUEUED",
    "RESIZING",
    "SUSPENDED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
}


class CellJob(submitit.helpers.Checkpointable):
    """One cell repetition as a Slurm array task. Preempted or timed out, it is requeued (checkpoint()
    resubmits it unchanged: a cell is measured whole or not at all); out of requeues, it records a timeout."""

    def __init__(self, task: Task, results: str, dataset: dict | None, settings, imports: list[str] | None = None):
        self.task, self.results, self.dataset, self.settings = task, results, dataset, settings
        self.imports = imports  # loaderbench.measure.warm.study_imports of its study

    def __call__(self) -> str:
        store = Store(self.results)
        t = self.task
        if store.is_done(t.study, t.cell.cell_id, t.repetition):
            return "ok (already measured)"
        launcher = _launcher_info()
        runner = TaskRunner(self.dataset, self.imports)
        env = submitit.JobEnvironment()
        if env.num_tasks > 1:  # one task per DDP rank (loaderbench.measure.ddp)
            from loaderbench.measure.ddp import LAUNCHED

            submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
            os.environ[LAUNCHED] = "env://"
            if env.global_rank != 0:  # rank 0 writes the record; the others are measured and probed, not kept
                return runner.run(t, _Discard(), self.settings, launcher).status
        try:
            record = runner.run(t, store, self.settings, launcher)
        except UncompletedJobError as exc:  # Slurm's time limit, out of requeues: record it, never lose it
            error: ErrorInfo = {"kind": "timeout", "message": f"Slurm time limit reached: {exc}"}
            store.write(Record.for_task(t, "timeout", launcher, error=error, env=runner.host_env))
            raise
        return record.status


class _Discard:
    """Where a DDP peer rank's own record goes: nowhere (its rank 0 writes the cell's one record)."""

    def write(self, record: Record) -> None:
        pass


def _launcher_info() -> dict:
    """Where this array task ran, for the record's `launcher` block."""
    env = submitit.JobEnvironment()
    return {
        "kind": "slurm",
        "job_id": env.job_id,
        "array_job_id": os.environ.get("SLURM_ARRAY_JOB_ID"),
        "array_task_id": os.environ.get("SLURM_ARRAY_TASK_ID"),
        "node": env.hostname,
        "restarts": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
    }


@dataclass
class SubmitResult:
    submitted: list  # (job_id, n_tasks, cores, gpus)
    skipped_active: int
    skipped_done: int
    estimate: StudyEstimate | None = None


def logs_folder(profile: LoadedProfile, results: Path) -> Path:
    """submitit's folder: the profile's `logs`, relative to the results folder unless absolute."""
    logs = Path(profile.settings.slurm.logs)
    return logs if logs.is_absolute() else Path(results) / logs


def python_command(profile: LoadedProfile) -> str | None:
    """The interpreter submitit starts on the node: one inside the container, or None for submitit's default,
    the interpreter that submits (`sys.executable`). Either finds loaderbench through its own import system
    (installed in that environment or the image), never through a checkout: the cells travel pickled."""
    c = profile.settings.container
    if c.kind == "apptainer":
        binds = [f"--bind={shlex.quote(b)}" for b in c.binds]
        return " ".join(["apptainer", "exec", "--nv", *binds, shlex.quote(c.image), shlex.quote(c.python)])
    if c.kind == "pyxis":
        return shlex.quote(c.python)
    return None


def can_submit() -> bool:
    """Whether Slurm's client is here: submitit builds its executor only where `srun` is on PATH."""
    return shutil.which("srun") is not None


def make_executor(
    profile: LoadedProfile,
    folder: Path,
    cores: int,
    gpus: int,
    study: str,
    time_limit_min: int,
    nodes: int = 1,
    tasks_per_node: int = 1,
) -> submitit.AutoExecutor:
    """An executor for tasks of `cores` cores and `gpus` GPUs each; a DDP cell's ranks: `nodes` x
    `tasks_per_node` tasks sharing the cell's cores."""
    if not can_submit():
        raise ToolMissing(
            f"{profile.path}: no srun on PATH: submit from a node of the Slurm cluster (or "
            "`make submit CLUSTER=test` for the one-node test cluster); --dry-run shows the plan "
            "anywhere"
        )
    s = profile.settings.slurm
    kwargs = {}
    py = python_command(profile)
    if py:
        kwargs["slurm_python"] = py
    executor = submitit.AutoExecutor(
        folder=str(folder), cluster="slurm", slurm_max_num_timeout=s.max_requeues, **kwargs
    )
    tasks = nodes * tasks_per_node
    cpus = max(1, cores // tasks)
    srun_args = [f"--cpus-per-task={cpus}"]  # Slurm 22.05-23.11: srun does not inherit it from sbatch
    c = profile.settings.container
    if c.kind == "pyxis":
        srun_args += [f"--container-image={c.image}"] + (
            [f"--container-mounts={','.join(f'{b}:{b}' for b in c.binds)}"] if c.binds else []
        )
    additional = {}
    for line in s.extra_sbatch:
        key, _, value = line[2:].partition("=")
        additional[key.replace("-", "_")] = value or True
    if s.account:
        additional["account"] = s.account
    if s.qos:
        additional["qos"] = s.qos
    params = dict(
        slurm_partition=s.partition,
        cpus_per_task=cpus,
        tasks_per_node=tasks_per_node,
        nodes=nodes,
        timeout_min=time_limit_min,
        slurm_array_parallelism=s.array_parallelism,
        slurm_srun_args=srun_args,
        slurm_setup=list(s.setup),
        name=f"lb-{study}-c{cores}g{gpus}" + (f"n{nodes}t{tasks_per_node}" if tasks > 1 else ""),
        slurm_additional_parameters=additional,
    )
    if s.gres:
        params["slurm_gres"] = s.gres
    elif gpus:
        params["gpus_per_node"] = gpus * tasks_per_node  # a DDP cell's ranks: gpus each
    if s.mem_per_cpu_mb:
        params["slurm_mem_per_cpu"] = f"{s.mem_per_cpu_mb}M"
    params = {k: v for k, v in params.items() if v is not None}
    executor.update_parameters(**params)
    return executor


class Ledger:
    """Append-only list of submitted cell repetitions and their Slurm job ids."""

    def __init__(self, results: Path, study: str):
        self.path = Path(results) / study / LEDGER

    def entries(self) -> list[dict]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a torn last line from an interrupted submit
        return out

    def latest(self) -> dict[tuple[str, int], dict]:
        last = {}
        for e in self.entries():
            last[(e["cell_id"], e["repetition"])] = e
        return last

    def append(self, entries: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            for e in entries:
                fh.write(json.dumps(e) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def squeue_states(job_ids: list[str]) -> dict[str, str] | None:
    """State of each job (array tasks as 123_4); None when squeue cannot be asked."""
    jobs = squeue_jobs(job_ids)
    return None if jobs is None else {j: state for j, (state, _, _) in jobs.items()}


def squeue_jobs(job_ids: list[str]) -> dict[str, tuple[str, str, str]] | None:
    """(state, nodes, reason) of each job (array tasks as 123_4; nodes in Slurm's compressed form, empty while
    pending), finished ones too while Slurm still lists them (MinJobAge); None when squeue cannot be asked."""
    if not job_ids:
        return {}
    if not shutil.which("squeue"):
        return None
    arrays = sorted({j.split("_")[0] for j in job_ids})
    out = subprocess.run(
        ["squeue", "-h", "-r", "-t", "all", "-j", ",".join(arrays), "-o", "%i|%T|%N|%r"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0 and "Invalid job id" not in out.stderr:
        return None
    jobs = {}
    for line in out.stdout.splitlines():
        parts = line.strip().split("|") + ["", ""]
        if parts[1]:
            jobs[parts[0]] = (parts[1], parts[2], parts[3])
    return jobs


def sacct_states(job_ids: list[str]) -> dict[str, str]:
    """Final states from accounting where the cluster keeps it (empty when it does not)."""
    if not job_ids or not shutil.which("sacct"):
        return {}
    arrays = sorted({j.split("_")[0] for j in job_ids})
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-j", ",".join(arrays), "-o", "JobID,State"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode != 0:
        return {}
    states = {}
    for jid, state in (ln.split("|", 1) for ln in out.stdout.splitlines() if "|" in ln):
        state = state.split()[0] if state.split() else state
        states[jid] = state
        if "_[" in jid:  # array tasks that never started are one line, e.g. 3_[0-1%2] CANCELLED
            states[jid.split("_")[0] + "_*"] = state
    return states


class SlurmLauncher(Launcher):
    """Submits tasks as Slurm job arrays, one array per allocation shape (cores, GPUs), through submitit."""

    def __init__(
        self,
        study: Study,
        store: Store,
        profile: LoadedProfile,
        retry_failed: bool = True,
        dry_run: bool = False,
        pattern: str | None = None,
    ):
        super().__init__(study, store, retry_failed, pattern)
        self.profile, self.dry_run = profile, dry_run
        self.ledger = Ledger(store.root, study.name)

    def active(self) -> set[tuple[str, str, int]]:
        """Task keys submitted earlier whose jobs are still pending or running."""
        latest = self.ledger.latest()
        states = squeue_states([e["job_id"] for e in latest.values()])
        if states is None and latest:
            raise StudyError(
                "squeue is not available: cannot tell which submitted cells are still pending or "
                "running; run `make submit` where Slurm's client commands work"
            )
        return {
            (self.study.name, cid, rep)
            for (cid, rep), e in latest.items()
            if (states or {}).get(e["job_id"]) in ACTIVE_STATES
        }

    def launch(self, tasks: list[Task]) -> list[tuple[str, int, int, int]]:
        """Submit `tasks`; returns (array job id, tasks, cores, GPUs) per array. Every executor is set up
        before the first sbatch, so bad input submits nothing."""
        s = self.profile.settings.slurm
        groups: dict[tuple[int, int, int, int], list[Task]] = defaultdict(list)
        for task in tasks:
            groups[(task.cell["cores"], s.gpus_per_cell, *rank_tasks(task, s.ddp_ranks_per_node))].append(task)
        root = Path(self.store.root)
        folder = logs_folder(self.profile, root)
        if self.dry_run:  # where Slurm is at hand, the executors are built too: submitit checks their parameters
            if can_submit():
                for c, g, n, t in groups:
                    make_executor(self.profile, folder, c, g, self.study.name, s.time_limit_min, n, t)
            return [("(dry run)", len(ts), c, g) for (c, g, _, _), ts in groups.items()]
        executors = {
            key: make_executor(self.profile, folder, key[0], key[1], self.study.name, s.time_limit_min, *key[2:])
            for key in groups
        }
        dataset = dataset_spec(self.study)
        prepare_dataset(dataset)  # generate once here (shared cache), not in every array task
        imports = study_imports(c.typed for c in self.study.cells)
        submitted = []
        for key, group in sorted(groups.items()):
            jobs_tasks = []
            with executors[key].batch():
                for task in group:
                    job = executors[key].submit(CellJob(task, str(root), dataset, self.settings, imports))
                    jobs_tasks.append((job, task))
            now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            self.ledger.append(
                [
                    {
                        "cell_id": t.cell.cell_id,
                        "repetition": t.repetition,
                        "job_id": j.job_id,
                        "submitted_at": now,
                        "cores": key[0],
                        "gpus": key[1],
                        "nodes": key[2],
                        "logs": str(folder),
                    }
                    for j, t in jobs_tasks
                ]
            )
            submitted.append((jobs_tasks[0][0].job_id.split("_")[0], len(group), key[0], key[1]))
        return submitted


def rank_tasks(task: Task, ranks_per_node: int) -> tuple[int, int]:
    """(nodes, tasks per node) of a cell repetition's job: a DDP cell's ranks, `ranks_per_node` per node, one
    task each, where the profile asks for it; else one task that starts whatever the cell starts."""
    ranks = int(task.cell["ranks"] or 1)
    if task.cell["rank_mode"] != "ddp" or not ranks_per_node or ranks == 1:
        return 1, 1
    per_node = min(ranks, ranks_per_node)
    if ranks % per_node:
        raise StudyError(
            f"ranks = {ranks} does not split into nodes of ddp_ranks_per_node = {ranks_per_node} ranks each: "
            f"use a multiple of it, or ddp_ranks_per_node = 0 (all ranks on one node)"
        )
    return ranks // per_node, per_node


def submit(
    study: Study,
    profile: LoadedProfile,
    results: str | Path,
    dry_run: bool = False,
    retry_failed: bool = True,
    pattern: str | None = None,
) -> SubmitResult:
    """Submit every cell repetition with no ok record and none pending or running."""
    s = profile.settings.slurm
    if study.settings.timeout_s + 60 > s.time_limit_min * 60:
        raise StudyError(
            f"{study.path}: [study] timeout_s = {study.settings.timeout_s:g} does not fit the profile "
            f"{profile.path}: slurm.time_limit_min = {s.time_limit_min} (allow at least 60 s more than "
            f"timeout_s, so the suite records the timeout before Slurm kills the job)"
        )
    root = Path(results).resolve()
    store = Store(root)
    launcher = SlurmLauncher(study, store, profile, retry_failed, dry_run, pattern)
    active = launcher.active()
    pending = launcher.pending()
    tasks = [t for t in pending if t.key not in active]
    estimator = Estimator.from_records(r for _, r in store.records(study.name))
    result = SubmitResult(
        [],
        skipped_active=len(pending) - len(tasks),
        skipped_done=launcher.total - len(pending),
        estimate=estimate_study(study, tasks, estimator),
    )
    if tasks:
        check_submission(profile, root, logs_folder(profile, root), result.estimate)
        result.submitted = launcher.launch(tasks)
    return result


def status(results: str | Path) -> list[dict]:
    """Per study with a ledger: ok / failed / timeout records, running / pending jobs, and cells whose job
    ended without a record: failed when Slurm ended it (a launch failure, a lost node), with Slurm's state, reason
    and the error its log ends with; lost when it was cancelled or Slurm no longer knows it. Per node, the records
    it wrote (by their `launcher.node`), the jobs running on it and those that failed there."""
    results = Path(results)
    report = []
    for ledger_path in sorted(results.glob(f"*/{LEDGER}")):
        study = ledger_path.parent.name
        ledger = Ledger(results, study)
        latest = ledger.latest()
        store = Store(results)
        jobs = squeue_jobs([e["job_id"] for e in latest.values()]) or {}
        states = {j: state for j, (state, _, _) in jobs.items()}
        final = sacct_states([e["job_id"] for e in latest.values()])
        row = {
            "study": study,
            "ok": 0,
            "failed": 0,
            "timeout": 0,
            "running": 0,
            "pending": 0,
            "lost": 0,
            "jobs": sorted({e["job_id"].split("_")[0] for e in latest.values()}),
            "problems": [],
            "nodes": {},
        }

        def on(node: str | None, key: str, per_node: dict = row["nodes"]) -> None:
            counts = per_node.setdefault(node or "?", {"ok": 0, "failed": 0, "running": 0})
            counts[key] += 1

        for (cid, rep), e in sorted(latest.items()):
            rec = store.read(study, cid, rep)
            state = states.get(e["job_id"])
            if rec is not None and rec.ok:
                row["ok"] += 1
                on(rec.launcher.get("node"), "ok")
            elif state in ("RUNNING", "COMPLETING", "CONFIGURING"):
                row["running"] += 1
                on(jobs[e["job_id"]][1], "running")
            elif state in ACTIVE_STATES:
                row["pending"] += 1
            elif rec is not None:
                row[rec.status if rec.status in (FAILED, TIMEOUT) else FAILED] += 1
                on(rec.launcher.get("node"), "failed")
                row["problems"].append(f"{cid} rep {rep} (job {e['job_id']}): {rec.status}: {rec.error_line(160)}")
            else:
                job = jobs.get(e["job_id"])
                sacct = final.get(e["job_id"]) or final.get(e["job_id"].split("_")[0] + "_*")
                end = job_end(e["job_id"], (job[0], job[2]) if job else None, sacct, e.get("logs"))
                if end.failed:
                    row["failed"] += 1
                    if job and job[1]:  # where it failed, when Slurm had placed it
                        on(job[1], "failed")
                    what = f"failed before its cell recorded anything: {end.describe()}"
                else:
                    row["lost"] += 1
                    what = end.describe()
                row["problems"].append(
                    f"{cid} rep {rep} (job {e['job_id']}): {what}; logs in {e.get('logs')}; `make submit` runs it again"
                )
        report.append(row)
    return report

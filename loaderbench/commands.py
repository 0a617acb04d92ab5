"""The commands of the loaderbench CLI (loaderbench.cli parses the arguments): each `cmd_*` takes the parsed
arguments and returns the exit status. Heavy imports happen inside each command, so `--help` stays fast."""

from __future__ import annotations

import json
import math
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rich.console import Console

err = Console(stderr=True, highlight=False, soft_wrap=True)


def package_version() -> str:
    try:
        return version("loaderbench")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, default=str))


def _profile(path: str | None):
    if not path:
        return None
    from loaderbench.study.cluster_profile import load_profile

    return load_profile(path)


def _load(path: str, profile=None):
    """A study validated against this machine, or against the profile's node when one is given."""
    from loaderbench.study.study_file import load_study

    return load_study(path, max_cores=profile.settings.slurm.node_cores if profile else None)


# --- commands -------------------------------------------------------------------------------------------------


def cmd_run(args) -> int:
    from loaderbench.launch.local import run_local
    from loaderbench.schema.store import Store

    wait = getattr(args, "wait_quiet", 0.0)
    if not math.isfinite(wait) or wait < 0:
        from loaderbench.errors import LoaderbenchError

        raise LoaderbenchError(f"--wait-quiet {wait:g}: allowed: a number of seconds, 0 or more")
    study = _load(args.study)
    if getattr(args, "repetitions", None) is not None or getattr(args, "cells", None):
        from loaderbench.study.subset import only_cells, with_repetitions

        if args.repetitions is not None:
            study = with_repetitions(study, args.repetitions)
        if args.cells:
            study = only_cells(study, [c.strip() for c in args.cells.split(",") if c.strip()])
    err.print(
        f"study {study.name!r}: {len(study.cells)} cells x {study.settings.repetitions} repetitions -> "
        f"{Path(args.results) / study.name}"
    )
    if wait > 0:
        from loaderbench.launch.quiet import wait_for_quiet

        wait_for_quiet(args.wait_quiet, err.print)
    try:
        summary = run_local(study, Store(args.results), retry_failed=not args.no_retry_failed, pattern=args.k)
    except KeyboardInterrupt:
        err.print(
            "[yellow]interrupted[/yellow]: the cell in progress left no record; run the same command again "
            "to resume where it stopped"
        )
        return 130
    if summary.measured == 0:
        err.print(f"nothing to do: {summary.skipped_done} cell repetitions already have an ok record")
        return 0
    err.print(
        f"measured {summary.measured} cell repetitions ({summary.skipped_done} were already done), "
        f"{len(summary.failed)} failed, {summary.disturbed} disturbed by the machine (measured again within the "
        f"study's remeasure_budget)"
    )
    for rec in summary.failed:
        err.print(f"  [red]{rec.status}[/red] {rec.cell_id} rep {rec.repetition}: {rec.error_line(200)}")
    return 1 if summary.failed else 0


def cmd_settle(args) -> int:
    from loaderbench.settle.rounds import settle, write

    study = _load(args.study)
    try:
        done = settle(study, args.results, args.budget_min, say=err.print)
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: the records measured so far are kept; run it again to go on")
        return 130
    for name, before in done.before.items():
        reps = done.repetitions.get(name)
        shown = f" ({reps} repetitions per cell)" if reps else ""
        why = f": {done.left[name]}" if done.left.get(name) else ""
        print(f"{name}: {before} -> {done.after.get(name, '?')}{shown}{why}")
    err.print(
        f"{done.rounds} rounds in {done.seconds / 60:.1f} min; stopped: {done.stopped}; {write(done, args.results)}"
    )
    return 0


def cmd_cell(args) -> int:
    from loaderbench.launch.local import run_local
    from loaderbench.launch.progress import describe
    from loaderbench.schema.store import Store
    from loaderbench.study.one_cell import one_cell_study

    study = one_cell_study(args.set)
    (cell,) = study.cells
    store = Store(args.results)
    err.print(f"cell {cell.cell_id}: {describe(cell.config)} -> {Path(args.results) / study.name}")
    summary = run_local(study, store, retry_failed=True)
    recs = [r for rep in range(study.settings.repetitions) if (r := store.read(study.name, cell.cell_id, rep))]
    if args.json:
        _print_json([_cell_json(r) for r in recs])
    for r in recs:
        if r.ok:
            uss = r.uss_peak_bytes
            print(
                f"rep {r.repetition}: {_fmt(r.samples_per_s, '.1f')} samples/s steady, "
                f"{_fmt(r.end_to_end_samples_per_s, '.1f')} end to end, "
                f"first batch {_fmt(r.time_to_first_batch_s, '.2f')} s, "
                f"USS {_fmt(uss / 2**20 if uss is not None else None, '.0f')} MiB"
            )
        else:
            print(f"rep {r.repetition}: {r.status}: {r.error_line()}")
    missing = study.settings.repetitions - len(recs)
    return 1 if summary.failed or missing or any(not r.ok for r in recs) else 0


def _cell_json(r) -> dict:
    return {
        "cell_id": r.cell_id,
        "repetition": r.repetition,
        "status": r.status,
        "error": r.error,
        "metrics": r.metrics,
    }


def _fmt(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None else "n/a"


def cmd_validate(args) -> int:
    from loaderbench.errors import StudyError

    profile = _profile(args.cluster)
    out = []
    for path in args.studies:
        try:
            study = _load(path, profile)
        except StudyError as exc:
            out.append({"study_file": path, "ok": False, "error": str(exc)})
            continue
        out.append(
            {
                "study_file": path,
                "ok": True,
                "name": study.name,
                "cells": len(study.cells),
                "repetitions": study.settings.repetitions,
            }
        )
    if args.json:
        _print_json(out)
    else:
        for o in out:
            if o["ok"]:
                print(
                    f"{o['study_file']}: ok, study {o['name']!r}: {o['cells']} cells x {o['repetitions']} repetitions"
                )
            else:
                print(f"error: {o['error']}", file=sys.stderr)
    return 0 if all(o["ok"] for o in out) else 2


def cmd_plan(args) -> int:
    from loaderbench.study.plan import plan_report

    profile = _profile(args.cluster)
    study = _load(args.study, profile)
    report = plan_report(study, args.results, profile, pattern=args.k)
    if args.json:
        _print_json(report)
        return 0
    e = report["estimate"]
    print(
        f"study {study.name!r} ({args.study}): {report['cells']} cells x {report['repetitions']} repetitions"
        + (f" (matching {args.k!r}: {report['selected']} cells)" if args.k else "")
    )
    print("  " + ", ".join(f"{k}: {v}" for k, v in report["counts"].items()))
    print(
        f"  estimate for the {e['pending']} pending repetitions: {e['pending_text']} here, one after another; "
        f"longest repetition {e['longest_text']} ({e['calibrated']} of {e['pending']} calibrated on records)"
    )
    if profile is not None:
        s = report["slurm"]
        print(
            f"  on {profile.name} ({s['node_cores']} cores per node, {s['array_parallelism']} array tasks at once): "
            f"{s['node_hours']:.2f} node-hours, about {s['wall_text']} of wall time if the queue runs them "
            "at once"
        )
    if args.verbose:
        for c in report["cell_list"]:
            print(f"  {c['cell_id']}  {c['label']}  ~{c['seconds']:.0f} s/rep")
    return 0


def cmd_submit(args) -> int:
    from loaderbench.launch.slurm import submit
    from loaderbench.study.estimate import duration

    if args.tune:
        return cmd_submit_tune(args)
    profile = _profile(args.cluster)
    study = _load(args.study, profile)
    results = args.results or profile.settings.slurm.results or "results"
    result = submit(
        study, profile, results, dry_run=args.dry_run, retry_failed=not args.no_retry_failed, pattern=args.k
    )
    e = result.estimate
    if e is not None and e.pending:
        s = e.slurm(profile.settings.slurm.node_cores, profile.settings.slurm.array_parallelism)
        err.print(
            f"estimate: {e.pending} repetitions, {s['node_hours']:.2f} node-hours, longest repetition "
            f"{duration(e.longest_s)}"
        )
    for job_id, n, cores, gpus in result.submitted:
        verb = "would submit an array" if args.dry_run else f"submitted array {job_id}"
        err.print(f"{verb}: {n} cell repetitions, {cores} cores, {gpus} GPUs each")
    if not result.submitted:
        err.print("nothing to submit")
    err.print(
        f"{result.skipped_done} already done, {result.skipped_active} pending or running; "
        f"follow with: make status CLUSTER={profile.name}"
    )
    return 0


def cmd_tune(args) -> int:
    from loaderbench.tune.options import options_from_args
    from loaderbench.tune.run import print_step, run_tune

    options = options_from_args(args)
    study = _load(args.study)
    records = Path(args.results) / f"{study.name}-tune"
    err.print(f"tune {study.name!r}: {len(study.cells)} cells in its matrix; records -> {records}")
    try:
        run = run_tune(
            study,
            args.results,
            options,
            retry_failed=not args.no_retry_failed,
            out_path=args.out,
            on_step=None if args.quiet else print_step(err),
        )
    except KeyboardInterrupt:
        err.print(
            "[yellow]interrupted[/yellow]: the cell in progress left no record; run the same command again "
            "to resume from the records written so far"
        )
        return 130
    if args.json:
        _print_json(run.result)
    else:
        print(run.text)
    return run.exit_code


def cmd_submit_tune(args) -> int:
    from loaderbench.study.estimate import duration
    from loaderbench.tune.options import options_from_args
    from loaderbench.tune.slurm_job import submit_tune

    options = options_from_args(args)
    if args.k:
        from loaderbench.tune.options import TuneError

        raise TuneError(
            "submit --tune searches the whole matrix: -k cannot be used with it (write the cells to "
            "consider into the study's [matrix] instead)"
        )
    profile = _profile(args.cluster)
    study = _load(args.study, profile)
    results = args.results or profile.settings.slurm.results or "results"
    sub = submit_tune(study, profile, results, options, dry_run=args.dry_run, time_limit_min=args.time_limit_min)
    verb = "would submit" if args.dry_run else f"submitted job {sub.job_id}"
    err.print(
        f"{verb}: tune {study.name!r} on one node, {sub.cores} cores, {sub.gpus} GPUs, time limit "
        f"{sub.time_limit_min} min (the grid's estimate: {duration(sub.grid_estimate_s)}); requeued on "
        f"timeout, it resumes from its records"
    )
    err.print(f"the answer will be in {sub.out_path}; records under {sub.records}; logs in {sub.logs}")
    return 0


def cmd_status(args) -> int:
    from loaderbench.launch.slurm import status

    profile = _profile(args.cluster)
    results = args.results or (profile.settings.slurm.results if profile else None) or "results"
    rows = status(results)
    if args.json:
        _print_json(rows)
        return 0
    if not rows:
        print(f"no Slurm submissions under {results}")
        return 0
    for row in rows:
        print(
            f"{row['study']}: done {row['ok']}, running {row['running']}, pending {row['pending']}, "
            f"failed {row['failed']}, timeout {row['timeout']}, lost {row['lost']}  (jobs: {', '.join(row['jobs'])})"
        )
        if len(row["nodes"]) > 1:
            for node, n in sorted(row["nodes"].items()):
                print(f"  node {node}: done {n['ok']}, running {n['running']}, failed {n['failed']}")
        for line in row["problems"]:
            print(f"  - {line}")
    return 1 if any(r["failed"] or r["timeout"] or r["lost"] for r in rows) else 0


def cmd_compare(args) -> int:
    from loaderbench.analysis.report.compare_runs import compare_results, render

    report = compare_results(args.a, args.b, metric=args.metric, study=args.study, min_effect=args.min_effect)
    for side, path in (("only_in_a", args.a), ("only_in_b", args.b)):
        if not report["cells"] and not report[side]:
            from loaderbench.errors import LoaderbenchError

            what = f"study {args.study!r} with {args.metric}" if args.study else f"{args.metric}"
            raise LoaderbenchError(
                f"{path}: no records of {what}; give a results folder (one subfolder per study, "
                f"as `loaderbench run --results` writes it), e.g. results, not results/quick"
            )
    if args.json:
        _print_json(report)
    else:
        print(render(report))
    return 0


def cmd_axes(args) -> int:
    """The study vocabulary as a Markdown table."""
    from loaderbench.schema.axes import AXES

    print("| axis | default | allowed | what it varies |")
    print("|---|---|---|---|")
    for a in AXES.values():
        default = str(a.default).lower() if isinstance(a.default, bool) else a.default
        scope = f" ({', '.join(a.applies_to)} only)" if a.applies_to else ""
        print(f"| `{a.name}` | `{default}` | {a.allowed} | {a.help}{scope} |")
    return 0


def cmd_studies(args) -> int:
    """The shipped studies: name, what each answers, and where its file is."""
    from loaderbench.study.study_names import shipped_study_list

    studies = shipped_study_list()
    if args.json:
        _print_json([{"name": s.name, "description": s.description, "path": str(s.path)} for s in studies])
        return 0
    width = max((len(s.name) for s in studies), default=0)
    for s in studies:
        print(f"{s.name:<{width}}  {s.description}")
    if studies:
        print(f"\nrun one by its name (loaderbench run NAME); their files are in {studies[0].path.parent}")
    return 0


def cmd_dataset(args) -> int:
    from loaderbench.datasets import DatasetSpec, ensure_dataset

    prepared = ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=args.images))
    print(f"{prepared.root}: {prepared.summary}")
    return 0


def cmd_figures(args) -> int:
    from loaderbench.analysis.figures.draw_all import main as analysis_main

    profile = _profile(args.cluster)
    results = args.results or (profile.settings.slurm.results if profile else None) or "results"
    return analysis_main([results, "--figures", args.figures, "--formats", args.formats])


def cmd_findings(args) -> int:
    from loaderbench.analysis.findings.page import main as findings_main

    return findings_main(args.reference, args.doc, write=args.write)


def cmd_reference(args) -> int:
    from loaderbench.analysis.findings.reference_records import copy_reference

    done = copy_reference(args.results, args.to, args.machine, args.study or None, args.note)
    for study, n in done.records.items():
        err.print(f"{study}: {n} records -> {done.folder / study}")
    for path, why in done.left_out:
        err.print(f"left out {path}: {why}")
    err.print(f"{done.bytes_before / 2**20:.1f} MiB -> {done.bytes_after / 2**20:.1f} MiB; {done.folder / 'README.md'}")
    return 0


def cmd_doctor(args) -> int:
    import sys as _sys

    from loaderbench.doctor.launch import doctor
    from loaderbench.doctor.watch import WatchPlan
    from loaderbench.errors import LoaderbenchError

    command = list(args.script_command or [])
    if command and command[0] == "--":
        command = command[1:]
    if args.module:
        if command:
            raise LoaderbenchError("give either -m MODULE [ARGS] or -- COMMAND, not both")
        command = [_sys.executable, "-m", *args.module]
    for name in ("steps", "warmup", "headspace_steps"):
        if getattr(args, name) < (1 if name == "steps" else 0):
            raise LoaderbenchError(f"--{name.replace('_', '-')} must be {'>= 1' if name == 'steps' else '>= 0'}")
    if args.seconds is not None and args.seconds <= 0:
        raise LoaderbenchError("--seconds must be > 0")
    try_changes = None
    if args.try_:
        from loaderbench.doctor.abtest import parse_changes

        try_changes = {"auto": True} if args.try_ == ["auto"] else parse_changes(args.try_)
    if args.rounds < 1 or args.round_steps < 2:
        raise LoaderbenchError("--rounds must be >= 1 and --round-steps >= 2")
    if args.tune:
        from loaderbench.doctor.tuning import TuneBudget

        if try_changes is not None:
            raise LoaderbenchError("give either --tune (search, then validate) or --try (validate one setting)")
        TuneBudget(args.budget_s, args.budget_trials)  # one clear error for a bad budget
    plan = WatchPlan(
        tune=args.tune,
        tune_budget_s=args.budget_s,
        tune_trials=args.budget_trials,
        try_changes=try_changes,
        ab_rounds=args.rounds,
        ab_steps=args.round_steps,
        warmup=args.warmup,
        steps=args.steps,
        seconds=args.seconds,
        headspace=0 if args.no_headspace else args.headspace_steps,
        stop=args.stop,
    )
    code, doc = doctor(command, plan, Path(args.out))
    if args.json:
        _print_json(doc)
    return code

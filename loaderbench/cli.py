"""loaderbench: measure how PyTorch's DataLoader parallelism behaves on this machine or a Slurm cluster.

Write a study (a TOML matrix of DataLoader settings), run it here or submit it to Slurm, then draw the
figures and the report. Every command is also a make target (see the README).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rich.console import Console

err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT = """exit status:
  0    every cell of the run is ok (or there was nothing to do)
  1    the run went through, but some cells failed or timed out (their records say why)
  2    bad input: a study, profile or argument that cannot be used (nothing ran)
  130  interrupted (the cell in progress left no record; run again to resume)"""

EXAMPLES = """examples:
  loaderbench studies                              # the shipped studies, each runnable by its name
  loaderbench run quick                            # the default study, here
  loaderbench run my-study.toml -k "workload=cpu cores=2"
  loaderbench cell --set workload=jpeg --set num_workers=4 --set cores=2
  loaderbench plan scaling --cluster slurm/slurm.toml
  loaderbench submit scaling --cluster slurm/slurm.toml --dry-run
  loaderbench tune quick                           # the best settings without the full grid
  loaderbench compare results-before results-after
  loaderbench figures results --figures figures"""


def _version() -> str:
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

    study = _load(args.study)
    err.print(
        f"study {study.name!r}: {len(study.cells)} cells x {study.settings.repetitions} repetitions -> "
        f"{Path(args.results) / study.name}"
    )
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
        f"{len(summary.failed)} failed"
    )
    for rec in summary.failed:
        err.print(f"  [red]{rec.status}[/red] {rec.cell_id} rep {rec.repetition}: {rec.error_line(200)}")
    return 1 if summary.failed else 0


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
        for line in row["problems"]:
            print(f"  - {line}")
    return 1 if any(r["failed"] or r["timeout"] or r["lost"] for r in rows) else 0


def cmd_compare(args) -> int:
    from loaderbench.analysis.compare_runs import compare_results, render

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
    from loaderbench.analysis.draw_all import main as analysis_main

    profile = _profile(args.cluster)
    results = args.results or (profile.settings.slurm.results if profile else None) or "results"
    return analysis_main([results, "--figures", args.figures])


def cmd_findings(args) -> int:
    from loaderbench.analysis.findings import main as findings_main

    return findings_main(args.reference, args.doc, write=args.write)


def cmd_reference(args) -> int:
    from loaderbench.analysis.reference_records import copy_reference

    done = copy_reference(args.results, args.to, args.machine, args.study or None, args.note)
    for study, n in done.records.items():
        err.print(f"{study}: {n} records -> {done.folder / study}")
    for path, why in done.left_out:
        err.print(f"left out {path}: {why}")
    err.print(f"{done.bytes_before / 2**20:.1f} MiB -> {done.bytes_after / 2**20:.1f} MiB; {done.folder / 'README.md'}")
    return 0


# --- the parser -----------------------------------------------------------------------------------------------


def _run_args(s) -> None:
    s.add_argument(
        "--results", default="results", help="folder of records, one subfolder per study (default: %(default)s)"
    )
    s.add_argument(
        "-k",
        metavar="PATTERN",
        default=None,
        help="only the cells matching PATTERN: space-separated terms, each `axis=value` or a piece of "
        'the cell\'s id or label, e.g. "workload=cpu num_workers=4"',
    )


STUDY_HELP = "a study file (TOML), or the name of a shipped study (e.g. quick; see `loaderbench studies`)"

TUNE_EPILOG = """examples:
  loaderbench tune quick
  loaderbench tune quick --max-memory-mb 4096 --objective end_to_end
  loaderbench submit scaling --cluster slurm/slurm.toml --tune

exit status:
  0    every scenario of the study has an answer
  1    some scenario has none: every setting it measured failed, or none stayed under --max-memory-mb
  2    bad input: a study or an option that cannot be used (nothing ran)
  130  interrupted (the cell in progress left no record; run again to resume)"""


def _tune_args(s) -> None:
    from loaderbench.tune.options import add_arguments

    add_arguments(s)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loaderbench",
        description=__doc__,
        epilog=f"{EXAMPLES}\n\n{EXIT}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, func, help_, epilog=EXIT):
        s = sub.add_parser(
            name, help=help_, description=help_, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        s.set_defaults(func=func)
        return s

    s = command("run", cmd_run, "run a study's missing or failed cell repetitions here")
    s.add_argument("study", help=STUDY_HELP)
    _run_args(s)
    s.add_argument(
        "--no-retry-failed",
        action="store_true",
        help="leave cells whose last attempt failed or timed out alone (default: measure them again)",
    )

    s = command("cell", cmd_cell, "measure one cell here, in seconds, and write its record")
    s.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an axis (workload=jpeg, num_workers=4), a [study] setting (repetitions=3) or a dotted "
        "table key (dataset.images=256); values as in a study file; unset axes take their defaults",
    )
    s.add_argument("--results", default="results", help="records go to RESULTS/cell/ (default: %(default)s)")
    s.add_argument("--json", action="store_true", help="print the records' status and metrics as JSON")

    s = command("validate", cmd_validate, "check study files without running anything", epilog="")
    s.add_argument("studies", nargs="+", metavar="STUDY", help="study files (or shipped studies' names) to check")
    s.add_argument(
        "--cluster",
        metavar="PROFILE",
        default=None,
        help="check cores against this cluster profile's node (e.g. slurm/slurm.toml) instead of here",
    )
    s.add_argument("--json", action="store_true", help="one JSON object per study file")

    s = command("plan", cmd_plan, "list a study's cells, what is done, and how long the rest will take", epilog="")
    s.add_argument("study", help=STUDY_HELP)
    _run_args(s)
    s.add_argument(
        "--cluster",
        metavar="PROFILE",
        default=None,
        help="plan for this cluster profile's node (cores, node-hours) instead of this machine",
    )
    s.add_argument("-v", "--verbose", action="store_true", help="list every cell with its estimate")
    s.add_argument("--json", action="store_true", help="the plan as JSON")

    s = command(
        "submit", cmd_submit, "submit a study's missing cells as Slurm job arrays (through submitit)", epilog=""
    )
    s.add_argument("study", help=STUDY_HELP)
    s.add_argument("--cluster", metavar="PROFILE", required=True, help="cluster profile, e.g. slurm/slurm.toml")
    s.add_argument("--results", default=None, help="records folder (default: the profile's `results`, else results)")
    s.add_argument("-k", metavar="PATTERN", default=None, help="only the cells matching PATTERN (see `run --help`)")
    s.add_argument(
        "--dry-run", action="store_true", help="validate, check the profile and group the arrays, submit nothing"
    )
    s.add_argument(
        "--no-retry-failed", action="store_true", help="leave cells whose last attempt failed or timed out alone"
    )
    s.add_argument(
        "--tune",
        action="store_true",
        help="instead of the arrays, submit ONE job with the node's cores (the profile's node_cores) that "
        "runs `loaderbench tune` there (the tune options below apply)",
    )
    g = s.add_argument_group("with --tune")
    g.add_argument(
        "--time-limit-min",
        type=int,
        default=None,
        help="the tune job's time limit (default: the grid's estimate + 25%%, at least the profile's time_limit_min)",
    )
    _tune_args(g)

    s = command(
        "tune", cmd_tune, "the best DataLoader settings of a study's matrix, without the full grid", epilog=TUNE_EPILOG
    )
    s.add_argument("study", help=STUDY_HELP + "; its [matrix] lists the values to consider")
    s.add_argument(
        "--results",
        default="results",
        help="records go to RESULTS/<study>-tune/, the answer to RESULTS/<study>-tune.json (default: %(default)s)",
    )
    s.add_argument("--out", default=None, help="write tune.json here instead (default: RESULTS/<study>-tune.json)")
    s.add_argument(
        "--no-retry-failed",
        action="store_true",
        help="read failed records back as failures instead of measuring them again",
    )
    s.add_argument("--json", action="store_true", help="print tune.json instead of the answer")
    s.add_argument("-q", "--quiet", action="store_true", help="no line per measurement")
    _tune_args(s)

    s = command(
        "status",
        cmd_status,
        "per study on Slurm: done / running / pending / failed / lost cells",
        epilog="exit status: 0 when no cell failed, timed out or was lost; 1 otherwise",
    )
    s.add_argument("--results", default=None, help="records folder (default: the profile's, else results)")
    s.add_argument("--cluster", metavar="PROFILE", default=None, help="cluster profile whose results to read")
    s.add_argument("--json", action="store_true", help="the status as JSON")

    s = command(
        "compare", cmd_compare, "what changed between two result folders, cell by cell (B relative to A)", epilog=""
    )
    s.add_argument("a", metavar="RESULTS_A", help="the baseline results folder")
    s.add_argument("b", metavar="RESULTS_B", help="the results folder to compare with it")
    s.add_argument(
        "--metric",
        default="samples_per_s",
        help="the metric compared (default: %(default)s; e.g. end_to_end_samples_per_s)",
    )
    s.add_argument("--study", default=None, help="only this study (default: every study in both)")
    s.add_argument(
        "--min-effect", type=float, default=0.05, help="smallest relative change that counts (default: %(default)s)"
    )
    s.add_argument("--json", action="store_true", help="the comparison as JSON")

    s = command("axes", cmd_axes, "print every axis a study may vary, as a Markdown table", epilog="")

    s = command("studies", cmd_studies, "list the shipped studies and what each answers", epilog="")
    s.add_argument("--json", action="store_true", help="name, description and file of each, as JSON")

    s = command("dataset", cmd_dataset, "generate (once) and verify the synthetic JPEG dataset", epilog="")
    s.add_argument("--images", type=int, default=1024, help="number of images (default: %(default)s)")

    s = command("figures", cmd_figures, "figures, tables and the report from every record under RESULTS", epilog="")
    s.add_argument("results", nargs="?", default=None, help="records folder (default: the profile's, else results)")
    s.add_argument("--figures", default="figures", help="output folder (default: %(default)s)")
    s.add_argument("--cluster", metavar="PROFILE", default=None, help="read the results folder of this profile")

    s = command(
        "reference",
        cmd_reference,
        "copy a results folder's records into results/reference/MACHINE/ as small JSON (per-batch arrays left out)",
        epilog="",
    )
    s.add_argument("results", help="records folder, one subfolder per study")
    s.add_argument("--machine", required=True, help="the folder's name under --to, e.g. epyc-2vcpu")
    s.add_argument("--study", action="append", help="only this study (repeat for more; default: every study)")
    s.add_argument("--note", default=None, help="how the studies were measured (alone? the load average?)")
    s.add_argument("--to", default="results/reference", help="the reference root (default: %(default)s)")

    s = command(
        "findings",
        cmd_findings,
        "check docs/findings.md's generated tables and verdicts against shipped records (or write them)",
        epilog="exit status: 0 when every block matches the records (or --write wrote them); 1 when one differs",
    )
    s.add_argument(
        "reference", nargs="?", default="results/reference", help="the reference root (default: %(default)s)"
    )
    s.add_argument("--doc", default="docs/findings.md", help="the page (default: %(default)s)")
    s.add_argument("--write", action="store_true", help="rewrite the page's generated blocks from the records")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from loaderbench.errors import LoaderbenchError

    try:
        return args.func(args)
    except LoaderbenchError as exc:  # bad input: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2

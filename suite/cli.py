"""The `loaderbench` command (also `python -m suite`): thin; the work is in the modules it calls."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

err = Console(stderr=True, highlight=False)


def _load(path: str, max_cores: int | None = None):
    from suite.study import load_study

    return load_study(path, max_cores=max_cores)


def cmd_validate(args) -> int:
    from suite.exceptions import StudyError

    bad = 0
    for path in args.studies:
        try:
            study = _load(path)
        except StudyError as exc:
            print(f"error: {exc}", file=sys.stderr)
            bad += 1
            continue
        err.print(f"{path}: ok, study {study.name!r}: {len(study.cells)} cells x {study.settings.repetitions} "
                  "repetitions")
    return 2 if bad else 0


def cmd_plan(args) -> int:
    from suite.plan import counts
    from suite.progress import describe
    from suite.store import Store

    study = _load(args.study)
    store = Store(args.results)
    c = counts(study, store)
    print(f"study {study.name!r} ({args.study}): {len(study.cells)} cells x {study.settings.repetitions} repetitions")
    print("  " + ", ".join(f"{k}: {v}" for k, v in c.items()))
    if args.verbose:
        for cell in study.cells:
            print(f"  {cell.cell_id}  {describe(cell.config)}")
    return 0


def cmd_run(args) -> int:
    from suite.launch.local import run_local
    from suite.store import Store

    study = _load(args.study)
    store = Store(args.results)
    err.print(f"study {study.name!r}: {len(study.cells)} cells x {study.settings.repetitions} repetitions -> "
              f"{Path(args.results) / study.name}")
    try:
        summary = run_local(study, store, retry_failed=not args.no_retry_failed)
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: the cell in progress left no record; run the same command again "
                  "to resume where it stopped")
        return 130
    if summary.measured == 0:
        err.print(f"nothing to do: all {summary.skipped_done} cell repetitions already have an ok record")
    else:
        err.print(f"measured {summary.measured} cell repetitions ({summary.skipped_done} were already done), "
                  f"{len(summary.failed)} failed")
        for rec in summary.failed:
            err.print(f"  [red]{rec['status']}[/red] {rec['cell_id']} rep {rec['repetition']}: "
                      f"{rec['error']['kind']}: {rec['error']['message'][:200]}")
    return 0


def cmd_submit(args) -> int:
    from suite.launch.slurm import submit
    from suite.profile import load_profile

    profile = load_profile(args.cluster)
    study = _load(args.study, max_cores=profile.settings.slurm.node_cores)
    results = args.results or profile.settings.slurm.results or "results"
    result = submit(study, profile, results, dry_run=args.dry_run, retry_failed=not args.no_retry_failed)
    for job_id, n, cores, gpus in result.submitted:
        verb = "would submit an array" if args.dry_run else f"submitted array {job_id}"
        err.print(f"{verb}: {n} cell repetitions, {cores} cores, {gpus} GPUs each")
    if not result.submitted:
        err.print("nothing to submit")
    err.print(f"{result.skipped_done} already done, {result.skipped_active} pending or running; "
              f"follow with: make status CLUSTER={profile.name}")
    return 0


def cmd_status(args) -> int:
    from suite.launch.slurm import status

    results = args.results
    if args.cluster and not results:
        from suite.profile import load_profile

        results = load_profile(args.cluster).settings.slurm.results
    rows = status(results or "results")
    if not rows:
        print(f"no Slurm submissions under {results or 'results'}")
        return 0
    for row in rows:
        print(f"{row['study']}: done {row['ok']}, running {row['running']}, pending {row['pending']}, "
              f"failed {row['failed']}, timeout {row['timeout']}, lost {row['lost']}  (jobs: {', '.join(row['jobs'])})")
        for line in row["problems"]:
            print(f"  - {line}")
    return 0


def cmd_axes(args) -> int:
    """The study vocabulary as a Markdown table (the README's table is this output)."""
    from suite.axes import AXES

    print("| axis | default | allowed | what it varies |")
    print("|---|---|---|---|")
    for a in AXES.values():
        default = str(a.default).lower() if isinstance(a.default, bool) else a.default
        scope = f" ({', '.join(a.applies_to)} only)" if a.applies_to else ""
        print(f"| `{a.name}` | `{default}` | {a.allowed} | {a.help}{scope} |")
    return 0


def cmd_dataset(args) -> int:
    from suite.datasets import DatasetSpec, ensure_dataset

    prepared = ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=args.images))
    print(f"{prepared.root}: {prepared.summary}")
    return 0


def cmd_figures(args) -> int:
    from analysis.cli import main as analysis_main

    return analysis_main([args.results, "--figures", args.figures])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="loaderbench", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("run", help="run a study's missing or failed cells here")
    s.add_argument("study")
    s.add_argument("--results", default="results")
    s.add_argument("--no-retry-failed", action="store_true", help="leave cells with a failed/timeout record alone")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("validate", help="check study files without running anything")
    s.add_argument("studies", nargs="+")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("plan", help="show a study's cells and how many are done")
    s.add_argument("study")
    s.add_argument("--results", default="results")
    s.add_argument("-v", "--verbose", action="store_true")
    s.set_defaults(func=cmd_plan)

    s = sub.add_parser("submit", help="submit a study's missing cells as Slurm job arrays")
    s.add_argument("study")
    s.add_argument("--cluster", required=True, help="cluster profile, e.g. slurm/slurm.toml")
    s.add_argument("--results", default=None, help="records folder (default: the profile's, else results)")
    s.add_argument("--dry-run", action="store_true", help="validate and group, submit nothing")
    s.add_argument("--no-retry-failed", action="store_true", help="leave cells with a failed/timeout record alone")
    s.set_defaults(func=cmd_submit)

    s = sub.add_parser("status", help="per study: done / running / pending / failed Slurm cells, with job ids")
    s.add_argument("--results", default=None)
    s.add_argument("--cluster", default=None)
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("axes", help="print every axis a study may vary (Markdown)")
    s.set_defaults(func=cmd_axes)

    s = sub.add_parser("dataset", help="generate (once) and verify the default synthetic JPEG dataset")
    s.add_argument("--images", type=int, default=1024)
    s.set_defaults(func=cmd_dataset)

    s = sub.add_parser("figures", help="figures, tables and report from every record under RESULTS")
    s.add_argument("results", nargs="?", default="results")
    s.add_argument("--figures", default="figures")
    s.set_defaults(func=cmd_figures)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from suite.datasets import DatasetError
    from suite.exceptions import LoaderbenchError

    try:
        return args.func(args)
    except (LoaderbenchError, DatasetError) as exc:  # bad input: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2

"""loaderbench: measure how PyTorch's DataLoader parallelism behaves on this machine or a Slurm cluster.

Write a study (a TOML matrix of DataLoader settings), run it here or submit it to Slurm, then draw the
figures and the report. Every command is also a make target (see the README).
"""

from __future__ import annotations

import argparse
import sys

from loaderbench.commands import (
    cmd_axes,
    cmd_cell,
    cmd_compare,
    cmd_dataset,
    cmd_doctor,
    cmd_figures,
    cmd_findings,
    cmd_plan,
    cmd_reference,
    cmd_run,
    cmd_settle,
    cmd_status,
    cmd_studies,
    cmd_submit,
    cmd_tune,
    cmd_validate,
    package_version,
)

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
  loaderbench doctor -- python train.py --epochs 1   # is this training loop waiting for data?
  loaderbench compare results-before results-after
  loaderbench figures results --figures figures"""


# --- the parser -----------------------------------------------------------------------------------------------


def _run_args(s) -> None:
    s.add_argument(
        "--results", default="results", help="folder of records, one subfolder per study (default: %(default)s)"
    )
    s.add_argument(
        "-k",
        metavar="PATTERN",
        default=None,
        help="only the cells matching PATTERN: space-separated terms, each `axis=value` (`axis=a|b`: any "
        'of them) or a piece of the cell\'s id or label, e.g. "workload=cpu num_workers=4|8"',
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


DOCTOR_EPILOG = """examples:
  loaderbench doctor -- python train.py --epochs 1
  loaderbench doctor --steps 100 --stop -m mypackage.train
  loaderbench doctor --tune --budget-s 60 -- python train.py
  loaderbench doctor --out doctor-run -- torchrun --nproc-per-node 2 train.py

exit status: the script's own, or
  1    the script never iterated a DataLoader (nothing to diagnose)
  2    bad input: an option that cannot be used, or a command that cannot be started"""


def _doctor_args(s) -> None:
    s.add_argument("--steps", type=int, default=200, help="steps measured per loader (default: %(default)s)")
    s.add_argument("--warmup", type=int, default=5, help="steps first, not counted (default: %(default)s)")
    s.add_argument("--seconds", type=float, default=None, help="measure for this long instead of --steps")
    s.add_argument(
        "--headspace-steps",
        type=int,
        default=20,
        help="steps replayed from batches already loaded, to time the loop with loading free (default: %(default)s)",
    )
    s.add_argument("--no-headspace", action="store_true", help="replay nothing: the loop sees every batch exactly once")
    s.add_argument("--stop", action="store_true", help="end the script once the first loader is diagnosed")
    s.add_argument(
        "--try",
        dest="try_",
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="validate this loader setting in the script's own loop, in alternating rounds against the current one "
        "(num_workers, prefetch_factor, persistent_workers, pin_memory, start_method; repeat or comma-separate), "
        "or `auto`: the change the diagnosis suggests",
    )
    s.add_argument(
        "--tune",
        action="store_true",
        help="search the loader's settings on its own dataset (num_workers, prefetch_factor, persistent_workers, "
        "pin_memory, start method: those that apply), then validate the winner in the script's own loop",
    )
    s.add_argument(
        "--budget-s",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds the --tune search may take (default: %(default)s)",
    )
    s.add_argument(
        "--budget-trials",
        type=int,
        default=24,
        metavar="N",
        help="trials the --tune search may run (default: %(default)s)",
    )
    s.add_argument("--rounds", type=int, default=4, help="A B round pairs of --try or --tune (default: %(default)s)")
    s.add_argument(
        "--round-steps", type=int, default=10, help="steps per round of --try or --tune (default: %(default)s)"
    )
    s.add_argument("--out", default=".", help="doctor.json and doctor.html go here (default: the current folder)")
    s.add_argument("--json", action="store_true", help="print doctor.json at the end")
    s.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        default=None,
        metavar="MODULE",
        help="run a module as `python -m MODULE [ARGS]` (this Python)",
    )
    s.add_argument(
        "script_command",
        nargs=argparse.REMAINDER,
        metavar="COMMAND",
        help="-- then the command, e.g. -- python train.py",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="loaderbench",
        description=__doc__,
        epilog=f"{EXAMPLES}\n\n{EXIT}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
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
        "--repetitions",
        type=int,
        metavar="N",
        default=None,
        help="measure N repetitions per cell instead of the study file's (more of them join those measured)",
    )
    s.add_argument(
        "--cells",
        metavar="ID,ID",
        default=None,
        help="only these cells, by id (comma-separated; `loaderbench plan` lists them)",
    )
    s.add_argument(
        "--no-retry-failed",
        action="store_true",
        help="leave cells whose last attempt failed or timed out alone (default: measure them again)",
    )
    s.add_argument(
        "--wait-quiet",
        type=float,
        metavar="S",
        default=0.0,
        help="first wait up to S seconds for the 1-minute load average to fall below half the logical CPUs, "
        "the load a published study must begin at to count as measured alone (default: start at once)",
    )

    s = command(
        "settle",
        cmd_settle,
        "measure more repetitions of only the cells the study's undecided claims read, until they are decided",
    )
    s.add_argument("study", help=STUDY_HELP)
    s.add_argument(
        "--results", default="results", help="folder of records, one subfolder per study (default: %(default)s)"
    )
    s.add_argument(
        "--budget-min",
        type=float,
        default=30.0,
        metavar="MIN",
        help="minutes of measuring at most (default: %(default)s); a round that would not fit is not started",
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
        "doctor",
        cmd_doctor,
        "watch a training script's DataLoaders, unchanged: how much of each step waits for data, and why",
        epilog=DOCTOR_EPILOG,
    )
    _doctor_args(s)

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
    s.add_argument(  # the analysis' own --formats (loaderbench.analysis.figures.formats), not imported here
        "--formats",
        default="png",
        help="file formats of every figure, comma-separated, of png, pdf, svg (default: png). PNG is always drawn "
        "too, since the report shows it; each other format costs another rendering of every figure",
    )

    s = command(
        "reference",
        cmd_reference,
        "copy a results folder's records into results/reference/MACHINE/ as small JSON (per-batch arrays left out)",
        epilog="",
    )
    s.add_argument("results", help="records folder, one subfolder per study")
    s.add_argument("--machine", required=True, help="the folder's name under --to, e.g. epyc-2vcpu")
    s.add_argument("--study", action="append", help="only this study (repeat for more; default: every study)")
    s.add_argument(
        "--note",
        default=None,
        help="a note kept beside the study: what the records cannot say, e.g. what its cells are (how quiet the "
        "machine was is computed from the records; a note that says it is refused)",
    )
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
    s.add_argument(
        "--write",
        action="store_true",
        help="rewrite the page's generated blocks, and the README.md of each machine folder they read that "
        "`loaderbench reference` wrote, from the records",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from loaderbench.errors import LoaderbenchError

    try:
        return args.func(args)
    except LoaderbenchError as exc:  # bad input: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2

"""Draw everything from whatever records exist: per study its figures and tables, then one report.

    python -m analysis RESULTS --figures DIR

writes DIR/<study>/{throughput_vs_workers,usl_fit,rules_of_thumb,oversubscription}.{png,pdf},
DIR/<study>/{summary,curves,rules,problems}.csv (+ summary.md), and DIR/report.html (self-contained)
with DIR/report.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from analysis.records import load_records


def draw_figures(a, folder: Path) -> list[Path]:
    """Every figure of one analysed study; a figure that fails is reported, not fatal."""
    from analysis.figures.model import usl_fit
    from analysis.figures.recommend import rules_of_thumb
    from analysis.figures.scaling import oversubscription, throughput_vs_workers

    paths: list[Path] = []
    if a.ok.empty:
        return paths
    for fn in (throughput_vs_workers, usl_fit, rules_of_thumb, oversubscription):
        try:
            paths += fn(a, folder)
        except Exception as exc:  # noqa: BLE001 - one broken figure must not hide the others or the report
            print(f"{a.study}: figure {fn.__name__} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            traceback.print_exc()
            a.notes.append(f"figure {fn.__name__} could not be drawn ({type(exc).__name__}: {exc})")
    return paths


def process_study(df: pd.DataFrame, study: str, out: Path):
    """Analyse one study, draw its figures, write its tables. Returns (StudyAnalysis, paths)."""
    from analysis.aggregate import analyze_study
    from analysis.figures.style import apply_theme
    from analysis.report import write_tables
    from analysis.tables import cell_summary, write_summary

    apply_theme()
    a = analyze_study(df, study)
    folder = out / study
    paths = write_summary(cell_summary(df[df["study"] == study]), folder, study)
    paths += write_tables(a, folder)
    paths += draw_figures(a, folder)
    return a, paths


def _process_star(args):
    return process_study(*args)


def run(results: Path, out: Path, use_cache: bool = True, jobs: int | None = None, quiet: bool = False):
    """Load, analyse, draw and report. Returns (exit code, analyses, report paths)."""
    from analysis.report import build_report, write_report

    df, load = load_records(results, use_cache=use_cache)
    for path, why in load.skipped:
        print(f"skipped {path}: {why}", file=sys.stderr)
    if df.empty:
        print(f"no usable records under {results}", file=sys.stderr)
        return 1, [], []
    studies = sorted(df["study"].unique())
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    jobs = max(1, min(jobs, len(studies)))
    tasks = [(df[df["study"] == s], s, out) for s in studies]
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(_process_star, tasks))
    else:
        done = [process_study(*t) for t in tasks]
    analyses = [a for a, _ in done]
    figures = {a.study: paths for a, paths in done}
    for a, paths in done:
        if not quiet:
            shown = [str(p) for p in paths if p.suffix == ".png"]
            print(f"{a.study}: {a.n_records} records -> {len(shown)} figures in {out / a.study}")
    sections = build_report(analyses, figures, df, load, results, out)
    report = write_report(sections, out)
    if not quiet:
        print(f"report: {report[0]} (self-contained) and {report[1]}")
    return 0, analyses, report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="?", default="results")
    p.add_argument("--figures", default="figures")
    p.add_argument("--no-cache", action="store_true", help="re-read every record instead of the Parquet cache")
    p.add_argument("--jobs", type=int, default=None, help="studies processed in parallel (default: CPUs allowed)")
    args = p.parse_args(argv)
    results = Path(args.results)
    if not results.is_dir():
        print(f"error: {results}: no such results folder (run a study first: make local)", file=sys.stderr)
        return 2
    code, _, _ = run(results, Path(args.figures), use_cache=not args.no_cache, jobs=args.jobs)
    return code

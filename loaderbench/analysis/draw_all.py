"""Draw everything from whatever records exist: per study its figures and tables, then one report.

    python -m loaderbench.analysis RESULTS --figures DIR

writes DIR/<study>/{throughput_vs_workers,usl_fit,rules_of_thumb,oversubscription}.{png,pdf},
DIR/<study>/{summary,curves,rules,problems}.csv (+ summary.md), and DIR/report.html (self-contained)
with DIR/report.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path

import pandas as pd

from loaderbench.analysis.table import col, load_records


def _drawn(a, what: str, draw: Callable[[], list[Path]]) -> list[Path]:
    """The files `draw()` wrote. A figure that fails is reported (stderr, and a note in the study's section of
    the report) and draws nothing: one broken figure must not hide the others or the report."""
    try:
        return draw()
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the other figures and the report go on
        print(f"{a.study}: {what} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc()
        a.notes.append(f"{what} could not be drawn ({type(exc).__name__}: {exc})")
        return []


def draw_figures(a, folder: Path) -> list[Path]:
    """Every figure of one analysed study (none when no repetition is ok)."""
    from loaderbench.analysis.figures.rule_cost import rules_of_thumb
    from loaderbench.analysis.figures.scaling import oversubscription, throughput_vs_workers
    from loaderbench.analysis.figures.usl_fit import usl_fit

    paths: list[Path] = []
    if a.ok.empty:
        return paths
    for fn in (throughput_vs_workers, usl_fit, rules_of_thumb, oversubscription):
        paths += _drawn(a, f"figure {fn.__name__}", lambda fn=fn: fn(a, folder))
    return paths


def _analyze(args):
    from loaderbench.analysis.aggregate import analyze_study

    df, study = args
    return analyze_study(df, study)


def _draw(args):
    """Tables and figures of one analysed study (run in a worker process when there are several)."""
    from loaderbench.analysis.cell_summary import cell_summary, write_summary
    from loaderbench.analysis.figures.style import apply_theme
    from loaderbench.analysis.report import write_tables

    a, df, out = args
    apply_theme()
    folder = out / a.study
    paths = write_summary(cell_summary(df), folder, a.study)
    paths += write_tables(a, folder)
    paths += draw_figures(a, folder)
    paths += _other_figures(a, df, folder)
    return a, paths


def _other_figures(a, df: pd.DataFrame, folder: Path) -> list[Path]:
    """The figures that read the tidy rows themselves: the question a study answers, and accelerator feeding where
    a consumer was busy."""
    from loaderbench.analysis.figures.accelerator_busy import accelerator_utilization_vs_workers
    from loaderbench.analysis.figures.questions import draw_question_figures

    paths = _drawn(a, "question figures", lambda: draw_question_figures(df, a.study, folder))
    # only where a consumer was busy (a model step or a simulated one): an idle consumer reads 0 everywhere
    busy = pd.to_numeric(col(df, "accelerator_busy_fraction"), errors="coerce")
    if (busy > 0).any():
        paths += _drawn(a, "accelerator figure", lambda: accelerator_utilization_vs_workers(df, a.study, folder))
    return paths


def _map(fn, tasks: list, jobs: int) -> list:
    if jobs > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
            return list(pool.map(fn, tasks))
    return [fn(t) for t in tasks]


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def analyze_all(df: pd.DataFrame, jobs: int = 1) -> list:
    """One StudyAnalysis per study, studies in parallel processes when `jobs` > 1."""
    studies = sorted(df["study"].unique())
    return _map(_analyze, [(df[df["study"] == s], s) for s in studies], jobs)


def draw_all(analyses: list, df: pd.DataFrame, out: Path, jobs: int = 1) -> tuple[list, dict[str, list[Path]]]:
    """Tables and figures of every study; returns the analyses (with any drawing notes) and paths per study."""
    done = _map(_draw, [(a, df[df["study"] == a.study], out) for a in analyses], jobs)
    return [a for a, _ in done], {a.study: paths for a, paths in done}


# ---- per-study cache: a study whose records (and this code) did not change is not analysed or drawn again

STUDY_CACHE = ".analysis-cache.pkl"


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of the analysis package's source: any change to it redraws everything."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def study_key(rows: pd.DataFrame) -> str | None:
    """Fingerprint of one study's records and of the analysis code: each record file's path, size and mtime
    (as the Parquet cache keys them) when the table has them, else every value of every column."""
    try:
        rows = rows.sort_values("path", kind="stable").reset_index(drop=True)
        h = hashlib.sha256(code_version().encode())
        h.update("\x1f".join(map(str, rows.columns)).encode())
        if {"record_bytes", "record_mtime_ns"} <= set(rows.columns):
            rows = rows[["path", "record_bytes", "record_mtime_ns"]]
        try:
            hashed = pd.util.hash_pandas_object(rows, index=False)
        except TypeError:  # a column of mixed types: hash its text
            hashed = pd.util.hash_pandas_object(rows.astype(str), index=False)
        h.update(hashed.to_numpy().tobytes())
        return h.hexdigest()
    except Exception:  # noqa: BLE001 - an unhashable table is simply not cached
        return None


def _cached(folder: Path, key: str | None):
    if key is None:
        return None
    try:
        with open(folder / STUDY_CACHE, "rb") as fh:
            saved = pickle.load(fh)
    except Exception:  # noqa: BLE001 - missing, torn or from another version: recompute
        return None
    if saved.get("key") != key or not all(Path(p).exists() for p in saved["paths"]):
        return None
    return saved["analysis"], [Path(p) for p in saved["paths"]]


def save_study_cache(folder: Path, key: str | None, a, paths: list[Path]) -> None:
    if key is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{STUDY_CACHE}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            pickle.dump({"key": key, "analysis": a, "paths": [str(p) for p in paths]}, fh)
        os.replace(tmp, folder / STUDY_CACHE)
    except Exception:  # noqa: BLE001 - the cache is an optimisation
        tmp.unlink(missing_ok=True)


def _process(args):
    df, study, out, key = args
    a = _analyze((df, study))
    a, paths = _draw((a, df, out))
    save_study_cache(out / study, key, a, paths)
    return a, paths


def process_all(df: pd.DataFrame, out: Path, jobs: int = 1, use_cache: bool = True):
    """Analyse and draw every study, reusing the results of studies that did not change.

    Returns (analyses, figure paths per study, names of the studies reused from the cache)."""
    studies = sorted(df["study"].unique())
    done: dict[str, tuple] = {}
    todo = []
    for s in studies:
        rows = df[df["study"] == s]
        key = study_key(rows) if use_cache else None
        hit = _cached(out / s, key) if use_cache else None
        if hit is not None:
            done[s] = hit
        else:
            todo.append((rows, s, out, key))
    reused = sorted(done)
    for a, paths in _map(_process, todo, jobs):
        done[a.study] = (a, paths)
    analyses = [done[s][0] for s in studies]
    return analyses, {s: done[s][1] for s in studies}, reused


def run(results: Path, out: Path, use_cache: bool = True, jobs: int | None = None, quiet: bool = False):
    """Load, analyse, draw and report. Returns (exit code, analyses, report paths)."""
    from loaderbench.analysis.report import build_report, write_report

    df, load = load_records(results, use_cache=use_cache)
    for path, why in load.skipped:
        print(f"skipped {path}: {why}", file=sys.stderr)
    if df.empty:
        print(f"no usable records under {results}", file=sys.stderr)
        return 1, [], []
    jobs = default_jobs() if jobs is None else max(1, jobs)
    analyses, figures, reused = process_all(df, out, jobs, use_cache)
    for a in analyses:
        if not quiet:
            shown = [p for p in figures[a.study] if p.suffix == ".png"]
            again = " (unchanged: figures kept)" if a.study in reused else ""
            print(f"{a.study}: {a.n_records} records -> {len(shown)} figures in {out / a.study}{again}")
    from loaderbench.analysis.claims import claims_table, write_claims

    table = claims_table(df)  # once, for the report and for claims.csv / claims.md
    sections = build_report(analyses, figures, df, load, results, out, claims_table=table)
    report = write_report(sections, out)
    claims = write_claims(df, out, table=table)
    if not quiet:
        print(f"report: {report[0]} (self-contained) and {report[1]}; claims: {claims[0]}")
    return 0, analyses, report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m loaderbench.analysis", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("results", nargs="?", default="results")
    p.add_argument("--figures", default="figures")
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="re-read every record instead of the Parquet cache, and redraw studies whose records did not change",
    )
    p.add_argument("--jobs", type=int, default=None, help="studies processed in parallel (default: CPUs allowed)")
    args = p.parse_args(argv)
    results = Path(args.results)
    if not results.is_dir():
        print(f"error: {results}: no such results folder (run a study first: make local)", file=sys.stderr)
        return 2
    code, _, _ = run(results, Path(args.figures), use_cache=not args.no_cache, jobs=args.jobs)
    return code


if __name__ == "__main__":
    raise SystemExit(main())

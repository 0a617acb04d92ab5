"""Draw everything from whatever records exist: per study, its figures and summary table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.records import load_records, ok_rows


def draw_study(df, study: str, out: Path) -> list[Path]:
    from analysis.figures.scaling import oversubscription, throughput_vs_workers
    from analysis.tables import cell_summary, write_summary

    sub = df[df["study"] == study]
    summary = cell_summary(sub)
    paths = write_summary(summary, out, study)
    ok = ok_rows(sub)
    if ok.empty:
        return paths
    paths += throughput_vs_workers(summary[summary["n"] > 0], sub, study, out)
    if (ok["num_workers"] == 0).any() and (ok["num_workers"] >= 1).any():
        paths += oversubscription(summary[summary["n"] > 0], sub, study, out)
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    p.add_argument("results", nargs="?", default="results")
    p.add_argument("--figures", default="figures")
    p.add_argument("--no-cache", action="store_true", help="re-read every record instead of the Parquet cache")
    args = p.parse_args(argv)
    results = Path(args.results)
    if not results.is_dir():
        print(f"error: {results}: no such results folder (run a study first: make local)", file=sys.stderr)
        return 2
    from analysis.figures.style import apply_theme

    apply_theme()
    df, report = load_records(results, use_cache=not args.no_cache)
    for path, why in report.skipped:
        print(f"skipped {path}: {why}", file=sys.stderr)
    if df.empty:
        print(f"no usable records under {results}", file=sys.stderr)
        return 1
    out = Path(args.figures)
    for study in sorted(df["study"].unique()):
        paths = draw_study(df, study, out / study)
        n = (df["study"] == study).sum()
        print(f"{study}: {n} records -> {', '.join(str(p) for p in paths if p.suffix in ('.png', '.md'))}")
    return 0

"""The summary table: median and its interval (with the interval's real coverage and n) per cell, as CSV and
Markdown."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from loaderbench.analysis.table.records import AXIS_COLUMNS, ok_rows
from loaderbench.analysis.table.summary import summarize
from loaderbench.stats.intervals import coverage_text, pct


def varying_axes(df: pd.DataFrame) -> list[str]:
    """Axis columns that take more than one value in this table (the others are constants of the study)."""
    return [c for c in AXIS_COLUMNS if c in df and df[c].astype(str).nunique() > 1]


def cell_summary(df: pd.DataFrame, value: str = "samples_per_s") -> pd.DataFrame:
    """One row per (study, cell): axis values, n, median and its interval with `ci_coverage`, spread flag."""
    axes = [c for c in AXIS_COLUMNS if c in df]
    keys = ["study", "cell_id"]
    s = summarize(df, by=keys, value=value)
    first = df.drop_duplicates(keys).set_index(keys)[axes]
    s = s.join(first, on=keys)
    for extra in ("time_to_first_batch_s", "uss_peak_bytes", "pss_peak_bytes"):
        if extra in df:
            med = ok_rows(df).groupby(keys)[extra].median().rename(f"{extra}_median")
            s = s.join(med, on=keys)
    return s.join(machine_summary(df), on=keys)


def machine_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per (study, cell): the throughput at the machine's own speed beside the raw one (`samples_per_ref`:
    median and IQR/median), how many of its kept repetitions were still disturbed, and how many disturbed
    attempts were measured again."""
    keys = ["study", "cell_id"]
    ok = ok_rows(df)
    out = pd.DataFrame(index=ok.groupby(keys).size().index)
    if "samples_per_ref" in ok:
        norm = summarize(ok, by=keys, value="samples_per_ref").set_index(keys)
        out["samples_per_ref_median"] = norm["median"]
        out["samples_per_ref_iqr_rel"] = norm["iqr_rel"]
    for col in ("disturbed", "remeasured"):
        if col in ok:
            counted = ok[col].map(lambda v: int(v) if isinstance(v, bool | int | float) and v == v else 0)
            out[col] = counted.groupby([ok[k] for k in keys]).sum()
    return out


def write_summary(summary: pd.DataFrame, folder: Path, study: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    axes = varying_axes(summary) or ["workload", "num_workers", "cores"]
    cols = axes + [
        "n",
        "n_not_ok",
        "median",
        "ci_low",
        "ci_high",
        "ci_coverage",
        "iqr_rel",
        "unstable",
        "samples_per_ref_median",
        "samples_per_ref_iqr_rel",
        "disturbed",
        "remeasured",
        "time_to_first_batch_s_median",
        "uss_peak_bytes_median",
    ]
    cols = [c for c in cols if c in summary]
    table = summary.sort_values(axes)[["cell_id"] + cols]
    csv = folder / "summary.csv"
    table.to_csv(csv, index=False)
    md = folder / "summary.md"
    pretty = table.drop(columns=["cell_id"]).rename(
        columns={
            "median": "samples/s (median)",
            "ci_low": "interval low",
            "ci_high": "interval high",
            "ci_coverage": "interval coverage",
            "iqr_rel": "IQR/median",
            "n_not_ok": "failed",
            "time_to_first_batch_s_median": "first batch (s)",
            "uss_peak_bytes_median": "USS peak (MiB)",
            "samples_per_ref_median": "samples/ref (median)",
            "samples_per_ref_iqr_rel": "IQR/median (samples/ref)",
        }
    )
    if "USS peak (MiB)" in pretty:
        pretty["USS peak (MiB)"] = pretty["USS peak (MiB)"] / 2**20
    if "interval coverage" in pretty:
        pretty["interval coverage"] = pretty["interval coverage"].map(lambda c: pct(c) if c == c else "–")
    md.write_text(
        f"# {study}: throughput per cell\n\nMedian over repetitions with its order-statistic interval "
        f"({coverage_text(summary['n'])}; the coverage of each row is in its own column); "
        f"'unstable' marks cells whose IQR exceeds 10% of the median. 'samples/ref' is the throughput at the "
        f"machine's own speed: samples per unit of the reference workload timed beside each repetition "
        f"(docs/statistics.md says when it is sound); 'disturbed' counts the kept repetitions the machine still "
        f"disturbed, 'remeasured' the disturbed ones measured again.\n\n"
        + pretty.to_markdown(index=False, floatfmt=".3g")
        + "\n"
    )
    return [csv, md]

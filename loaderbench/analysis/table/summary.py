"""Robust summary statistics per cell: the median of the repetitions, its interval and spread.

Pure functions on tidy tables (one row per measured cell repetition); no I/O, no figures, no torch.

Conventions
-----------
* Only rows whose ``status`` column equals ``"ok"`` carry metrics. Rows with any other status
  (``"failed"``, ``"timeout"``) and NaN/inf metric values are ignored for the statistics but counted in
  ``n_not_ok`` / ``n_missing`` so a report can show them. If the table has no status column, every row
  counts as ok.
* The location estimate is the **median** of the repetitions (benchmark timings are skewed by outliers;
  the median is what pyperf/asv report).
* The interval of the median is the distribution-free order-statistic interval
  (:func:`loaderbench.stats.intervals.median_ci`): the narrowest ``[x_(k), x_(n-k+1)]`` whose coverage reaches the
  nominal ``confidence`` where ``n`` allows it, else ``[min, max]`` with the coverage it really has (75% at
  n = 3, 87.5% at 4, 93.75% at 5, 96.9% at 6). Every interval carries that coverage (``ci_coverage``) and
  its ``n``: nothing here calls an interval 95% unless it is. With fewer than 3 values no interval is
  computed (NaN, ``ci_method`` "n<3"); when all values are identical the interval is the point itself
  (``ci_method`` "degenerate").
* Spread is the interquartile range (pandas/numpy linear interpolation of the quartiles);
  ``iqr_rel = iqr / |median|``; a group is ``unstable`` when ``iqr_rel > unstable_iqr`` (default 10 %,
  the threshold pyperf and asv use to warn about unstable benchmarks).
* Comparisons of two cells and paired bootstraps live in loaderbench.stats (``comparison``, ``bootstrap``),
  which hold no tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from loaderbench.analysis.table.records import AXIS_COLUMNS, keep_dtypes, ok_mask, ok_rows
from loaderbench.stats.intervals import MIN_N, coverage_text, order_coverage, order_k, pct

UNSTABLE_IQR = 0.10  # a cell is unstable when its IQR is over this share of its median (as pyperf and asv)

__all__ = ["UNSTABLE_IQR", "summarize"]


def summarize(
    df: pd.DataFrame,
    by: Sequence[str],
    value: str,
    confidence: float = 0.95,
    unstable_iqr: float = UNSTABLE_IQR,
) -> pd.DataFrame:
    """Per-group robust summary of the metric column ``value``.

    ``by`` names the grouping columns (usually ``["cell_id"]`` plus the config columns to carry along,
    which are constant within a cell). Groups are formed over *all* rows, NaN keys included, so a cell
    whose repetitions all failed still gets a row (``n == 0``, statistics NaN).

    Returned columns, one row per group, sorted by ``by``:

    ``*by, n, n_not_ok, n_missing, median, ci_low, ci_high, ci_method, ci_coverage, confidence, mean,
    std, min, max, q1, q3, iqr, iqr_rel, unstable``

    * ``n``: ok rows with a finite ``value``; ``n_not_ok``: rows whose status is not ok; ``n_missing``:
      ok rows whose value is NaN/inf.
    * ``ci_low``/``ci_high``: order-statistic interval of the median (see module doc); ``ci_coverage`` its
      real coverage for ``n`` (may be below ``confidence``, the nominal asked for); NaN with
      ``ci_method == "n<3"`` when ``n < 3``.
    * ``std``: sample standard deviation (ddof=1; NaN when ``n < 2``).
    * ``iqr_rel``: ``iqr / |median|`` (NaN when the median is 0 or n == 0).
    * ``unstable``: ``iqr_rel > unstable_iqr`` (False where iqr_rel is NaN).

    Vectorised: groups with the same ``n`` are summarised together as one matrix, so 100,000 rows take
    well under a second.
    """
    by = list(by)
    if not by:
        raise ValueError("summarize: `by` must name at least one column")
    missing = [c for c in [*by, value] if c not in df.columns]
    if missing:
        raise KeyError(f"summarize: columns not in table: {missing}")

    is_ok = ok_mask(df)
    vals = pd.to_numeric(df[value], errors="coerce").to_numpy(dtype=float)

    grouped = df.groupby(by, dropna=False, sort=True, observed=True)
    gid = grouped.ngroup().to_numpy()
    keys = grouped.size().index.to_frame(index=False)
    keys.columns = by
    ng = len(keys)
    fin = is_ok & np.isfinite(vals)
    n = np.bincount(gid[fin], minlength=ng)
    n_ok = np.bincount(gid[is_ok], minlength=ng)
    n_not_ok = np.bincount(gid[~is_ok], minlength=ng)

    out, ci_method = _group_statistics(gid[fin], vals[fin], n, confidence)
    iqr = out["q3"] - out["q1"]
    with np.errstate(divide="ignore", invalid="ignore"):
        iqr_rel = np.where((n > 0) & (out["median"] != 0), iqr / np.abs(out["median"]), np.nan)
    res = keys.assign(
        n=n,
        n_not_ok=n_not_ok,
        n_missing=n_ok - n,
        median=out["median"],
        ci_low=out["ci_low"],
        ci_high=out["ci_high"],
        ci_method=ci_method,
        ci_coverage=out["ci_coverage"],
        confidence=float(confidence),
        mean=out["mean"],
        std=out["std"],
        min=out["min"],
        max=out["max"],
        q1=out["q1"],
        q3=out["q3"],
        iqr=iqr,
        iqr_rel=iqr_rel,
        unstable=np.isfinite(iqr_rel) & (iqr_rel > unstable_iqr),
    )
    res["ci_method"] = res["ci_method"].astype(str)
    return keep_dtypes(res, df, by).reset_index(drop=True)


def _group_statistics(
    g_f: np.ndarray, v_f: np.ndarray, n: np.ndarray, confidence: float
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per group (group ids `g_f` of the finite values `v_f`; `n[i]` values in group i): median, quartiles, mean,
    std, min, max and the order-statistic interval of the median with its coverage, and each group's
    `ci_method`. Groups of the same size are computed together, as one sorted matrix."""
    ng = len(n)
    nan = np.full(ng, np.nan)
    out = {
        name: nan.copy()
        for name in ("median", "ci_low", "ci_high", "ci_coverage", "mean", "std", "min", "max", "q1", "q3")
    }
    ci_method = np.where(n < MIN_N, "n<3", "order statistic").astype(object)
    order = np.lexsort((v_f, g_f))
    v_s = v_f[order]
    starts = np.zeros(ng, dtype=np.int64)
    starts[1:] = np.cumsum(n)[:-1]
    for size in np.unique(n[n > 0]):
        size = int(size)
        groups = np.flatnonzero(n == size)
        m = v_s[starts[groups][:, None] + np.arange(size)[None, :]]  # rows sorted ascending
        out["median"][groups] = np.median(m, axis=1)
        out["q1"][groups], out["q3"][groups] = np.quantile(m, [0.25, 0.75], axis=1)
        out["mean"][groups] = m.mean(axis=1)
        out["min"][groups], out["max"][groups] = m[:, 0], m[:, -1]
        if size > 1:
            out["std"][groups] = m.std(axis=1, ddof=1)
        if size < MIN_N:
            continue
        k = order_k(size, confidence)
        out["ci_low"][groups], out["ci_high"][groups] = m[:, k - 1], m[:, size - k]
        out["ci_coverage"][groups] = order_coverage(size, k)
        ci_method[groups[m[:, 0] == m[:, -1]]] = "degenerate"
    return out, ci_method


# --------------------------------------------------------------------------------------------------------
# the summary table: one row per cell, as CSV and Markdown


def _varying(df: pd.DataFrame) -> list[str]:
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
    axes = _varying(summary) or ["workload", "num_workers", "cores"]
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
    # an axis a cell does not have reads blank, whether the records came from JSON (None) or the cache (NaN)
    table = table.assign(**{a: table[a].astype(object).where(table[a].notna(), None) for a in axes if a in table})
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

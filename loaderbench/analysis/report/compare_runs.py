"""`loaderbench compare A B`: what changed between two result folders (two commits, nodes, images), cell by cell.

Cells are matched by study and cell id (the same configuration measured twice). For each, B relative to A:
the ratio of medians with its distribution-free interval and its real coverage, and the verdict of the rule
the report uses (loaderbench.stats.comparison.compare): faster / slower / equivalent / inconclusive / not measured yet.
A summary counts the verdicts and gives the geometric mean of the ratios. Throughput is also compared at the
machine's own speed (samples per reference unit, loaderbench.schema.disturbance.normalized), beside the raw verdict,
which stays the headline.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from loaderbench.analysis.table.records import load_records, ok_rows
from loaderbench.stats.comparison import compare
from loaderbench.stats.intervals import pct

NORMALIZED = {"samples_per_s": "samples_per_ref"}  # a metric and the same at the machine's own speed
LOWER_IS_BETTER = (
    "time_to_first_batch_s",
    "epoch_gap_s",
    "total_s",
    "batch_wait_p50_s",
    "batch_wait_p95_s",
    "batch_wait_p99_s",
    "data_stall_fraction",
)


def _values(df, metric: str) -> dict[tuple[str, str], list[float]]:
    if df.empty or metric not in df.columns:
        return {}
    ok = ok_rows(df)
    out: dict[tuple[str, str], list[float]] = {}
    for (study, cell), g in ok.groupby(["study", "cell_id"]):
        vals = [float(v) for v in g[metric] if v is not None and np.isfinite(v)]
        if vals:
            out[(study, cell)] = vals
    return out


def _shown(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _labels(df) -> dict[tuple[str, str], str]:
    """Each cell named as the progress line names it (workload, w=workers, c=cores), plus every other axis that
    varies within its study, so two cells of a study never share a label."""
    from loaderbench.schema.axes import AXES

    short = {"num_workers": "w", "cores": "c"}
    out = {}
    for study, g in df.drop_duplicates(["study", "cell_id"]).groupby("study"):
        varying = [
            a
            for a in AXES
            if a not in ("workload", *short) and a in g.columns and len({repr(v) for v in g[a] if _shown(v)}) > 1
        ]
        for _, r in g.iterrows():
            parts = [str(r["workload"])] if _shown(r.get("workload")) else []
            parts += [f"{short[a]}={int(r[a])}" for a in short if a in g.columns and _shown(r[a])]
            parts += [f"{a}={r[a]}" for a in varying if _shown(r[a])]
            out[(study, r["cell_id"])] = " ".join(parts) or r["cell_id"]
    return out


def compare_results(
    a: str | Path, b: str | Path, metric: str = "samples_per_s", study: str | None = None, min_effect: float = 0.05
) -> dict:
    """Per matched cell, B relative to A; plus the cells found on one side only and a summary."""
    da, _ = load_records(a)
    db, _ = load_records(b)
    if study is not None:
        da = da[da["study"] == study] if not da.empty else da
        db = db[db["study"] == study] if not db.empty else db
    va, vb = _values(da, metric), _values(db, metric)
    norm = NORMALIZED.get(metric)
    na, nb = (_values(da, norm), _values(db, norm)) if norm else ({}, {})
    labels = {**_labels(da), **_labels(db)} if not (da.empty and db.empty) else {}
    higher = metric not in LOWER_IS_BETTER
    cells = []
    for key in sorted(set(va) & set(vb), key=lambda k: (k[0], labels.get(k, k[1]))):
        c = compare(va[key], vb[key], min_effect=min_effect, higher_is_better=higher)
        cells.append(
            {
                "study": key[0],
                "cell_id": key[1],
                "label": labels.get(key, key[1]),
                "n_a": c.n_a,
                "n_b": c.n_b,
                "median_a": c.median_a,
                "median_b": c.median_b,
                "ratio": c.ratio,
                "ci_low": c.ci_low,
                "ci_high": c.ci_high,
                "ci_coverage": c.ci_coverage,
                "verdict": c.verdict,
                "reason": c.reason,
                **_normalized(na.get(key), nb.get(key), min_effect, higher),
            }
        )
    counts: dict[str, int] = {}
    counts_norm: dict[str, int] = {}
    for c in cells:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
        if c["verdict_norm"] is not None:
            counts_norm[c["verdict_norm"]] = counts_norm.get(c["verdict_norm"], 0) + 1
    ratios = [c["ratio"] for c in cells if c["ratio"] and np.isfinite(c["ratio"]) and c["ratio"] > 0]
    return {
        "a": str(a),
        "b": str(b),
        "metric": metric,
        "higher_is_better": higher,
        "min_effect": min_effect,
        "cells": cells,
        "only_in_a": [f"{s}/{c}" for s, c in sorted(set(va) - set(vb))],
        "only_in_b": [f"{s}/{c}" for s, c in sorted(set(vb) - set(va))],
        "summary": {
            "matched": len(cells),
            "verdicts": counts,
            "verdicts_normalized": counts_norm,
            "geometric_mean_ratio": math.exp(np.mean(np.log(ratios))) if ratios else None,
        },
    }


def _normalized(a: list[float] | None, b: list[float] | None, min_effect: float, higher: bool) -> dict:
    """The same comparison at the machine's own speed (samples per reference unit), None where a side lacks it."""
    if not a or not b:
        return {"ratio_norm": None, "verdict_norm": None}
    c = compare(a, b, min_effect=min_effect, higher_is_better=higher)
    return {"ratio_norm": c.ratio, "verdict_norm": c.verdict}


def _g(x, digits: int = 4) -> str:
    return f"{x:.{digits}g}" if x is not None and np.isfinite(x) else "-"


def render(report: dict) -> str:
    """A plain-text table (pyperf compare_to style), then the summary."""
    lines = [
        f"{report['metric']}: {report['b']} relative to {report['a']} "
        f"({'higher' if report['higher_is_better'] else 'lower'} is better; changes under "
        f"{report['min_effect']:.0%} count as none)",
        "",
    ]
    width = max([len(c["label"]) for c in report["cells"]] + [4])
    for c in report["cells"]:
        interval = (
            f"[{_g(c['ci_low'], 3)}-{_g(c['ci_high'], 3)}] {pct(c['ci_coverage'])}" if np.isfinite(c["ci_low"]) else "-"
        )
        why = f" ({c['reason']})" if c["reason"] else ""
        norm = f"  [normalized {_g(c['ratio_norm'], 3)}x {c['verdict_norm']}]" if c.get("verdict_norm") else ""
        lines.append(
            f"{c['study']}/{c['label']:<{width}}  {_g(c['median_a'])} -> {_g(c['median_b'])}  "
            f"{_g(c['ratio'], 3)}x {interval}  {c['verdict']}{why}{norm}"
        )
    s = report["summary"]
    lines += [
        "",
        f"{s['matched']} cells in both: "
        + ", ".join(f"{v} {k}" for k, v in sorted(s["verdicts"].items()))
        + (f"; geometric mean ratio {s['geometric_mean_ratio']:.3f}x" if s["geometric_mean_ratio"] else ""),
    ]
    if s.get("verdicts_normalized"):
        lines.append(
            "at the machine's own speed (throughput per unit of the reference timed beside each repetition): "
            + ", ".join(f"{v} {k}" for k, v in sorted(s["verdicts_normalized"].items()))
        )
    for side in ("only_in_a", "only_in_b"):
        if report[side]:
            lines.append(f"{len(report[side])} cells {side.replace('_', ' ')} (not compared)")
    return "\n".join(lines)

"""Which ``num_workers`` to use: the measured knee, and how rules of thumb fare.

Pure functions on tidy tables; no I/O, no figures, no torch.

* :func:`knee` - from the per-N median throughput, the smallest N whose median
  is within ``within`` (default 5 %) of the best median. ``num_workers == 0``
  (main-process loading) is a legitimate candidate here.
* :func:`rules_of_thumb` - the worker counts popular advice would pick.
* :func:`evaluate_rules` - per group, what each rule costs against the
  measured best and the knee.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from loaderbench.analysis.table.records import keep_dtypes, ok_mask
from loaderbench.stats.rules_of_thumb import RULE_LABELS, rules_of_thumb
from loaderbench.stats.rules_of_thumb import lookup as lookup_points

__all__ = [
    "RULE_LABELS",
    "Knee",
    "evaluate_rules",
    "knee",
    "knee_of_medians",
    "lookup",
    "medians_by_n",
    "rules_of_thumb",
]


@dataclass(frozen=True)
class Knee:
    """``knee_n``: smallest N with median >= (1 - within) * best median;
    ``best_n``: the N with the best median (smallest such N on ties)."""

    knee_n: int
    knee_x: float
    best_n: int
    best_x: float
    within: float = 0.05


def medians_by_n(
    df: pd.DataFrame,
    n_col: str = "num_workers",
    x_col: str = "samples_per_s",
) -> pd.Series:
    """Median of ``x_col`` per value of ``n_col`` over ok rows with a finite value,
    sorted by N (N values with no such row are absent)."""
    ok = ok_mask(df)
    x = pd.to_numeric(df[x_col], errors="coerce").to_numpy(dtype=float)
    n = df[n_col]
    keep = ok & np.isfinite(x) & n.notna().to_numpy()
    if not keep.any():
        return pd.Series(dtype=float, name=x_col).rename_axis(n_col)
    # numpy, not groupby: this runs once per curve and rule table, thousands of times at scale
    nv = n.to_numpy()[keep]
    xv = x[keep]
    keys, inverse = np.unique(nv, return_inverse=True)
    order = np.lexsort((xv, inverse))
    xs, gs = xv[order], inverse[order]
    starts = np.searchsorted(gs, np.arange(keys.size))
    sizes = np.append(starts[1:], gs.size) - starts
    # each group's values are sorted: its median is its middle value, or the mean of its middle two (as np.median)
    lo, hi = starts + (sizes - 1) // 2, starts + sizes // 2
    med = np.where(lo == hi, xs[lo], (xs[lo] + xs[hi]) / 2)
    return pd.Series(med, index=pd.Index(keys, name=n_col), name=x_col)


def knee(
    df: pd.DataFrame,
    n_col: str = "num_workers",
    x_col: str = "samples_per_s",
    within: float = 0.05,
) -> Knee:
    """Knee of one throughput-vs-N curve (higher is better).

    ``df`` holds one curve (one workload on one core count, say): filter or
    group first. Per-N medians over ok rows; the knee is the smallest N whose
    median is ``>= (1 - within) * best``. Raises ``ValueError`` if no ok row
    carries a finite value.
    """
    med = medians_by_n(df, n_col, x_col)
    if med.empty:
        raise ValueError(f"knee: no ok rows with a finite {x_col!r}")
    return knee_of_medians(med, within)


def knee_of_medians(med: pd.Series, within: float = 0.05) -> Knee:
    """The knee of a curve from its per-N medians (medians_by_n, not empty), for a caller that has them already."""
    if not 0 <= within < 1:
        raise ValueError("knee: `within` must be in [0, 1)")
    best_x = float(med.max())
    best_n = med.index[int(np.argmax(med.to_numpy()))]  # first max = smallest N
    close = med[med >= (1.0 - within) * best_x]
    knee_n = close.index[0]
    return Knee(
        knee_n=int(knee_n),
        knee_x=float(close.iloc[0]),
        best_n=int(best_n),
        best_x=best_x,
        within=float(within),
    )


def lookup(med: pd.Series, n: float, between: str = "interpolate") -> tuple[float, str, float, float]:
    """Value of the per-N series ``med`` (index = measured N) at ``n``: :func:`loaderbench.stats.rules_of_thumb.lookup`
    on the series' points."""
    med = med.dropna()
    return lookup_points(med.index.to_numpy(dtype=float), med.to_numpy(dtype=float), n, between)


def _group_value(g: pd.DataFrame, spec, name: str):
    """``spec`` is a constant, or the name of a column constant within the group."""
    if isinstance(spec, str):
        vals = g[spec].dropna().unique()
        if len(vals) != 1:
            raise ValueError(f"evaluate_rules: {name} column {spec!r} is not constant within a group")
        return vals[0]
    return spec


_OUT_COLS = [
    "rule",
    "rule_label",
    "rule_n",
    "x_at_rule",
    "match",
    "n_lo",
    "n_hi",
    "best_n",
    "best_x",
    "knee_n",
    "knee_x",
    "loss_vs_best",
    "extra_procs_vs_knee",
    "mem_at_rule",
    "mem_at_knee",
    "extra_mem_bytes",
]


def evaluate_rules(
    df: pd.DataFrame,
    by: Sequence[str] = ("workload", "cores"),
    n_col: str = "num_workers",
    x_col: str = "samples_per_s",
    *,
    cores: int | str = "cores",
    gpus: int | str = 1,
    local_world_size: int | str = 1,
    mem_col: str = "uss_peak_bytes",
    within: float = 0.05,
    between: str = "interpolate",
    rules: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Score each rule of thumb against the measured curve of each group.

    ``cores``, ``gpus`` and ``local_world_size`` are either constants or the
    name of a column that is constant within each group (``cores`` defaults to
    the ``cores`` column). Per group: per-N medians of ``x_col`` over ok rows,
    the :func:`knee` and best N, then for each rule (``rules`` restricts/relabels
    the rule ids, default :data:`RULE_LABELS`) one row:

    * ``rule_n``: the N the rule picks;
    * ``x_at_rule``: median throughput at ``rule_n`` via :func:`lookup`
      (``match`` = ``"exact"``/``"interpolated"``/``"nearest"``; ``n_lo`` and
      ``n_hi`` are the measured N the value came from);
    * ``loss_vs_best`` = ``1 - x_at_rule / best_x`` (fraction of the best
      median throughput given up; 0 = as good as the best);
    * ``extra_procs_vs_knee`` = ``rule_n - knee_n`` (negative: fewer
      processes than the knee);
    * ``mem_at_rule``, ``mem_at_knee``, ``extra_mem_bytes`` = median
      ``mem_col`` at ``rule_n`` (same lookup) minus at ``knee_n``; NaN if
      ``mem_col`` is absent or has no value.

    Columns: ``*by`` then ``rule, rule_label, rule_n, x_at_rule, match, n_lo,
    n_hi, best_n, best_x, knee_n, knee_x, loss_vs_best, extra_procs_vs_knee,
    mem_at_rule, mem_at_knee, extra_mem_bytes``. Groups without any ok
    throughput are skipped.
    """
    by = list(by)
    labels = dict(RULE_LABELS if rules is None else rules)
    unknown = set(labels) - set(RULE_LABELS)
    if unknown:
        raise ValueError(f"evaluate_rules: unknown rules {sorted(unknown)}")
    missing = [c for c in [*by, n_col, x_col] if c not in df.columns]
    missing += [s for s in (cores, gpus, local_world_size) if isinstance(s, str) and s not in df.columns]
    if missing:
        raise KeyError(f"evaluate_rules: columns not in table: {missing}")
    mem = mem_col if mem_col in df.columns else None
    rows = []
    groups = df.groupby(by, dropna=False, sort=True, observed=True) if by else [((), df)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        rows += _score_group(
            g,
            dict(zip(by, key)),
            labels,
            n_col,
            x_col,
            mem,
            within,
            between,
            {"cores": cores, "gpus": gpus, "local_world_size": local_world_size},
        )
    return keep_dtypes(pd.DataFrame(rows, columns=[*by, *_OUT_COLS]), df, by)


def _score_group(
    g: pd.DataFrame,
    keys: dict,
    labels: Mapping[str, str],
    n_col: str,
    x_col: str,
    mem_col: str | None,
    within: float,
    between: str,
    specs: dict,
) -> list[dict]:
    """evaluate_rules' rows for one group `g` (`keys`: its values of the group columns; `specs`: the cores, gpus
    and local_world_size arguments); [] when the group has no ok throughput."""
    nan = float("nan")
    med = medians_by_n(g, n_col, x_col)
    if med.empty:
        return []
    k = knee_of_medians(med, within)
    picks = rules_of_thumb(*(_group_value(g, spec, name) for name, spec in specs.items()))
    mem_med = medians_by_n(g, n_col, mem_col) if mem_col else pd.Series(dtype=float)
    mem_knee = lookup(mem_med, k.knee_n, between)[0] if mem_col else nan
    rows = []
    for rule, label in labels.items():
        rn = picks[rule]
        x, match, lo, hi = lookup(med, rn, between)
        mem_rule = lookup(mem_med, rn, between)[0] if mem_col else nan
        rows.append(
            {
                **keys,
                "rule": rule,
                "rule_label": label,
                "rule_n": int(rn),
                "x_at_rule": x,
                "match": match,
                "n_lo": lo,
                "n_hi": hi,
                "best_n": k.best_n,
                "best_x": k.best_x,
                "knee_n": k.knee_n,
                "knee_x": k.knee_x,
                "loss_vs_best": 1.0 - x / k.best_x if k.best_x else nan,
                "extra_procs_vs_knee": int(rn - k.knee_n),
                "mem_at_rule": mem_rule,
                "mem_at_knee": mem_knee,
                "extra_mem_bytes": mem_rule - mem_knee,
            }
        )
    return rows

"""Picking a question's rows and reading their values: what the claims and the rule kinds both use
(loaderbench.analysis.rules.claim, loaderbench.analysis.rules.kinds)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from loaderbench.analysis.table.derive import ranks
from loaderbench.analysis.table.records import col, is_true
from loaderbench.stats.verdicts import NOT_MEASURED, Outcome


def finite(values) -> np.ndarray:
    """The finite numbers among `values` (anything not a number dropped)."""
    try:
        x = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        x = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=float)
    return x[np.isfinite(x)]


def missing(what: str) -> Outcome:
    return Outcome(NOT_MEASURED, what)


def pick(rows: pd.DataFrame, **eq) -> pd.DataFrame:
    """Rows whose columns equal the given values (None matches a missing value; a missing column matches
    only None). The rows come with every column of `rows`: narrow a wide table to what is read first."""
    mask = np.ones(len(rows), dtype=bool)
    for name, want in eq.items():
        if name not in rows:
            if want is not None:
                return rows.iloc[0:0]
            continue
        c = rows[name]
        if want is None:
            mask &= c.isna().to_numpy()
        else:
            mask &= np.fromiter((_same(v, want) for v in c), dtype=bool, count=len(c))
    return rows[mask]


def _same(v, w) -> bool:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    if isinstance(w, bool) or isinstance(v, (bool, np.bool_)):
        return is_true(v) == bool(w) if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)) else False
    if isinstance(w, (int, float)) and isinstance(v, (int, float, np.integer, np.floating)):
        return float(v) == float(w)
    return v == w


def values_of(rows: pd.DataFrame, name: str) -> list:
    if name not in rows:
        return []
    return sorted(v for v in rows[name].dropna().unique())


def varies(rows: pd.DataFrame, name: str) -> bool:
    """The column takes two or more values (missing values, e.g. worker-only axes at num_workers = 0, aside)."""
    if name not in rows:
        return False
    values = rows[name].dropna()
    try:
        return values.nunique() > 1
    except TypeError:  # unhashable values (lists kept as objects): compare their text
        return values.astype(str).nunique() > 1


def narrow(rows: pd.DataFrame, names) -> pd.DataFrame:
    """Only the named columns that exist: filtering a record table of hundreds of columns costs seconds at scale."""
    return rows[[c for c in dict.fromkeys(names) if c in rows]]


def with_workers(rows: pd.DataFrame) -> pd.DataFrame:
    n = pd.to_numeric(col(rows, "num_workers", 0), errors="coerce").fillna(0)
    return rows[n > 0]


def loading_alone(rows: pd.DataFrame) -> pd.Series:
    """Which rows load alone: one rank, no consumer step (step_ms = 0) and no model."""
    keep = (ranks(rows) == 1) & (pd.to_numeric(col(rows, "step_ms", 0.0), errors="coerce").fillna(0.0) == 0)
    return keep & (col(rows, "model").isna() | col(rows, "model").astype(str).isin(("none", "")))


def listed(rows: pd.DataFrame, name: str) -> str:
    """The column's distinct values, sorted, as words ("?" when it has none): "cpu, gpu"."""
    return ", ".join(sorted(set(col(rows, name).dropna().astype(str)))) or "?"

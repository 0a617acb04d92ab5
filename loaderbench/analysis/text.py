"""Numbers and values as text, one home for every formatter the figures, tables, report and findings share."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from loaderbench.stats.intervals import pct
from loaderbench.stats.verdicts import g


def fmt_num(v, digits: int = 3) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "" if v is None else str(v)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v != 0 and (abs(v) >= 10 ** (digits + 2) or abs(v) < 10 ** -(digits - 1)):
        return f"{v:.{digits}g}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def fmt_int(v) -> str:
    try:
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{int(v)}"
    except (TypeError, ValueError):
        return str(v)


def fmt_pct(v, signed: bool = False) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "–"
    if math.isnan(v):
        return "–"
    return f"{v:+.1%}" if signed else f"{v:.1%}"


def fmt_mib(v) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "–"
    return "–" if math.isnan(v) else f"{v / 2**20:+,.0f}"


def fmt_interval(lo, hi, fmt: Callable = fmt_num) -> str:
    try:
        if math.isnan(float(lo)) or math.isnan(float(hi)):
            return "–"
    except (TypeError, ValueError):
        return "–"
    return f"{fmt(lo)} – {fmt(hi)}"


def fmt_coverage(c) -> str:
    try:
        return pct(float(c)) if np.isfinite(float(c)) else "–"
    except (TypeError, ValueError):
        return "–"


def fmt_test(verdict, reason) -> str:
    """A comparison's verdict, with its reason when it has one."""
    verdict = verdict or "–"
    return f"{verdict}: {reason}" if isinstance(reason, str) and reason else verdict


def plural(n, noun: str) -> str:
    """ "1 worker", "3 workers"."""
    n = int(n)
    return f"{n} {noun}{'' if n == 1 else 's'}"


def fmt_bytes(v) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return str(v)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return str(v)


def value_text(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def n_text(v: float) -> str:
    return "inf" if not np.isfinite(v) else f"{v:.1f}"


def size_text(n: float) -> str:
    """Bytes as B, KiB or MiB."""
    n = float(n)
    for unit, scale in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{g(n / scale)} {unit}"
    return f"{g(n)} B"


def axis_text(v) -> str:
    """An axis value as a study file writes it ("–" for none)."""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v)).lower()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)

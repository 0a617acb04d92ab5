"""What docs/findings.md's generated blocks share: the rows of one study, a metric's values, medians and ratios as
text, and the verdicts of a question's claims, each study's claims decided once per rendering of the page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import pandas as pd

from loaderbench.analysis.claims import StudyClaims, claims_table, study_claims
from loaderbench.analysis.report.layout import md_table
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.analysis.table.summary import UNSTABLE_IQR
from loaderbench.analysis.text import fmt_num
from loaderbench.stats.comparison import compare
from loaderbench.stats.verdicts import VERDICTS

STAR = "\\* unstable: the repetitions' IQR is over 10% of their median."
#: The claims of each study decided so far in this rendering of the page (`deciding_once`), by study name.
_DECIDED: ContextVar[dict[str, StudyClaims] | None] = ContextVar("decided", default=None)


@contextmanager
def deciding_once() -> Iterator[None]:
    """While the page renders, decide each study's claims once: a dozen blocks show verdicts of the same
    records, and deciding them is most of the page's cost. They are kept by machine and study name."""
    token = _DECIDED.set({})
    try:
        yield
    finally:
        _DECIDED.reset(token)


def decided(df: pd.DataFrame) -> pd.DataFrame:
    """The claims table of `df`, reusing the outcomes decided earlier in this rendering (`deciding_once`)."""
    known = _DECIDED.get()
    if known is None or df.empty or "study" not in df:
        return claims_table(df)
    mine = {}
    for study, rows in df.groupby("study"):
        key = f"{df.attrs.get('machine', '')}/{study}"
        mine[str(study)] = known[key] if key in known else known.setdefault(key, study_claims(rows))
    return claims_table(df, mine)


# --------------------------------------------------------------------------------------------------------
# numbers


def study_rows(df: pd.DataFrame, study: str) -> pd.DataFrame:
    """The rows of one study."""
    return df[df["study"] == study]


def metric_values(rows: pd.DataFrame, metric: str) -> np.ndarray:
    """The finite values of `metric` over the ok rows."""
    x = pd.to_numeric(col(ok_rows(rows), metric), errors="coerce").to_numpy(dtype=float)
    return x[np.isfinite(x)]


def median_text(values: np.ndarray, scale: float = 1.0, star: bool = False) -> str:
    """The median (over `scale`), starred when the spread is over UNSTABLE_IQR; "–" without values."""
    if not len(values):
        return "–"
    med = float(np.median(values))
    q1, q3 = np.quantile(values, [0.25, 0.75])
    unstable = star and med != 0 and (q3 - q1) / abs(med) > UNSTABLE_IQR
    return fmt_num(med / scale) + ("\\*" if unstable else "")


def median_of(rows: pd.DataFrame, metric: str, scale: float = 1.0, star: bool = False) -> str:
    """The median_text of `metric` over the ok rows."""
    return median_text(metric_values(rows, metric), scale, star)


def ratio_text(a: pd.DataFrame, b: pd.DataFrame, metric: str = "samples_per_s") -> str:
    """median(b) / median(a) with its interval, coverage and n (or the bare ratio and n when n is too small)."""
    c = compare(metric_values(a, metric), metric_values(b, metric))
    if not np.isfinite(c.ratio):
        return "–"
    text = c.interval_text()
    return text if text != "–" else f"{c.ratio:.3g}x ({c.n_a} v {c.n_b} repetitions: no interval)"


def cells_where(rows: pd.DataFrame, **axes) -> pd.DataFrame:
    """The rows whose axes have these values."""
    for k, v in axes.items():
        rows = rows[col(rows, k) == v]
    return rows


# --------------------------------------------------------------------------------------------------------
# verdicts


def verdict_table(
    df: pd.DataFrame, questions: tuple[str, ...], carried_only: bool = False, claims: tuple[str, ...] = ()
) -> str:
    """The claims of `questions` as the claims table decides them from every study of `df` (`carried_only`: only
    those some study of `df` carries, for a machine that measured part of a question; `claims`: only these)."""
    t = decided(df)
    t = t[t["question"].isin(questions)]
    if claims:
        t = t[t["claim"].isin(claims)]
    if carried_only:
        t = t[t["study"] != ""]
    shown = pd.DataFrame(
        {
            "#": t["number"],
            "claim": t["claim"],
            "verdict": [f"**{v}**" for v in t["verdict"]],
            "evidence": t["evidence"],
        }
    )
    return md_table(shown)


def counts_text(table: pd.DataFrame) -> str:
    counts = table["verdict"].value_counts()
    return ", ".join(f"{int(counts[v])} {v}" for v in VERDICTS if counts.get(v, 0))

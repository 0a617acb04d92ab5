"""Sharing strategies: file_descriptor against file_system, descriptors held, failures and per-tensor cost."""

from __future__ import annotations

from functools import partial

import pandas as pd

from loaderbench.analysis.rules.claim import Metric, Question, finite, g, missing, pick, values_of, varies
from loaderbench.analysis.rules.kinds import FEWEST, MOST, AllOf, Shift
from loaderbench.analysis.table.derive import fd_exhausted, open_file_limit
from loaderbench.analysis.table.records import ok_mask, ok_rows
from loaderbench.stats.verdicts import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Outcome,
    any_of,
    at_least,
    at_most,
    decide_shift,
    outside,
)

#: "came near the limit": peak open descriptors at least this share of the open-file limit.
FD_NEAR = 0.8
#: file_descriptor's peak open descriptors at the most tensors per sample, at least this times that at the fewest.
FD_TENSOR_RATIO = 2.0
#: file_system's peak open descriptors grow by at most this factor from the fewest to the most tensors.
FS_TENSOR_MAX = 1.5
#: "the per-tensor cost differs": the two strategies' throughputs differ by at least this share, either way.
PER_TENSOR_DIFF = 0.10
_BOTH = "needs ok cells of both strategies at the fewest and most tensors per sample"


def _cfg(r) -> str:
    return f"w={int(r['num_workers'])}, {int(r['tensors_per_sample'])} tensors/sample, ulimit -n {g(r['limit'], 6)}"


def fd_runs_out(rows: pd.DataFrame) -> Outcome:
    """A counted fact, not an estimate: a repetition ran out of descriptors or it did not."""
    if rows.empty or "sharing_strategy" not in rows:
        return missing("no records")
    rows = rows.assign(limit=open_file_limit(rows), exhausted=fd_exhausted(rows))
    fd = rows[rows["sharing_strategy"] == "file_descriptor"]
    fs = rows[rows["sharing_strategy"] == "file_system"]
    keys = ["num_workers", "tensors_per_sample", "limit"]
    fd_bad = fd[fd["exhausted"]]
    fs_bad = fs[fs["exhausted"]]
    text = (
        f"file_descriptor: {len(fd_bad)} of {len(fd)} repetitions ran out of descriptors"
        + (" (" + "; ".join(sorted({_cfg(r) for _, r in fd_bad.iterrows()})) + ")" if len(fd_bad) else "")
        + f"; file_system: {len(fs_bad)} of {len(fs)}"
    )
    if len(fs_bad):
        return Outcome(FAILS, text + " (file_system ran out too)")
    if len(fd_bad):
        twins = fs.merge(fd_bad[keys].drop_duplicates(), on=keys)
        twins_ok = int(ok_mask(twins).sum())
        if twins_ok == 0:
            return missing(text + "; no ok file_system cell at the same workers, tensors and limit to compare")
        return Outcome(HOLDS, text + f"; the same configurations under file_system: {twins_ok} of {len(twins)} ok")
    okfd = ok_rows(fd)
    if okfd.empty:
        return missing(text + "; no ok file_descriptor cell")
    frac = (okfd["open_fds_peak"] / okfd["limit"]).max()
    if frac >= FD_NEAR:
        return Outcome(FAILS, text + f"; file_descriptor used up to {g(100 * frac)}% of the limit without failing")
    return Outcome(
        INCONCLUSIVE,
        text + f"; descriptors in use never came near the limit (at most {g(100 * frac)}% "
        f"of it, {FD_NEAR:.0%} needed): a lower ulimit_nofile or more tensors per "
        "sample would put it to the test",
    )


def _sharing_ok(rows):
    ok = ok_rows(rows)
    ok = ok.assign(limit=open_file_limit(ok))
    return ok[ok["limit"] == ok["limit"].max()] if len(ok) else ok


fd_per_tensor = AllOf(
    tuple(
        Shift(
            "open_fds_peak",
            "peak open descriptors",
            {"tensors_per_sample": FEWEST},
            {"tensors_per_sample": MOST},
            region,
            ("num_workers",),
            where={"sharing_strategy": strategy},
            frame=_sharing_ok,
        )
        for strategy, region in (
            ("file_descriptor", at_least(FD_TENSOR_RATIO)),
            ("file_system", at_most(FS_TENSOR_MAX)),
        )
    ),
    note="at the highest open-file limit",
)


def _cost_check(fd, fs, tn, nw, cost, confidence: float) -> Outcome:
    o = decide_shift(
        fs,
        fd,
        outside(1 / (1 + PER_TENSOR_DIFF), 1 + PER_TENSOR_DIFF),
        confidence=confidence,
        label=f"w={nw}, {tn:g} tensors/sample, samples/s file_descriptor / file_system",
    )
    return Outcome(
        o.verdict,
        f"{o.evidence} (extra cost per tensor: file_descriptor {g(cost['file_descriptor'])} us, "
        f"file_system {g(cost['file_system'])} us)",
    )


def per_tensor_cost_differs(rows: pd.DataFrame) -> Outcome:
    ok = _sharing_ok(rows)
    ts = values_of(ok, "tensors_per_sample")
    if len(ts) < 2:
        return missing("needs ok cells at two or more tensors_per_sample")
    t1, tn = ts[0], ts[-1]
    checks = []
    for nw in values_of(ok, "num_workers"):
        v = {
            (s, t): finite(pick(ok, sharing_strategy=s, num_workers=nw, tensors_per_sample=t)["samples_per_s"])
            for s in ("file_descriptor", "file_system")
            for t in (t1, tn)
        }
        if min(len(x) for x in v.values()) < 3:
            continue
        med = {k: float(pd.Series(x).median()) for k, x in v.items()}
        cost = {s: (1 / med[(s, tn)] - 1 / med[(s, t1)]) / (tn - t1) * 1e6 for s in ("file_descriptor", "file_system")}
        checks.append(partial(_cost_check, v[("file_descriptor", tn)], v[("file_system", tn)], tn, nw, cost))
    # "differs" is shown by one configuration where it clearly does: any one of several, corrected for their number
    return any_of(checks, _BOTH)


QUESTION = Question(
    "sharing",
    ("sharing_strategy", "num_workers", "tensors_per_sample", "ulimit_nofile"),
    lambda rows: varies(rows, "sharing_strategy"),
    figure="loaderbench.analysis.figures.questions.sharing:sharing_strategy_limits",
    tables={"sharing": (Metric("samples_per_s", "samples/s"), Metric("open_fds_peak", "open descriptors (peak)"))},
)
QUESTION.add(
    "file_descriptor runs out of descriptors with many workers or tensors ('Too many open "
    "files'); file_system does not",
    "a counted fact: holds if some file_descriptor repetition failed for lack of descriptors, none under "
    "file_system did, and file_system ran ok at the same workers, tensors and limit; does not hold if "
    f"file_system ran out, or file_descriptor used {FD_NEAR:.0%} of its limit without failing; inconclusive "
    f"if no file_descriptor cell came within {FD_NEAR:.0%} of its open-file limit",
    fd_runs_out,
    number=50,
)
QUESTION.add(
    "file_descriptor holds a descriptor per shared tensor in flight; file_system does not", fd_per_tensor, number=50
)
QUESTION.add(
    "the per-tensor cost differs between the strategies",
    f"at the highest open-file limit and the most tensors per sample: holds if at some num_workers the two "
    f"strategies' throughputs differ by at least {PER_TENSOR_DIFF:.0%} either way (any one of the num_workers, "
    "each comparison at the Bonferroni confidence for their number); does not hold if at every num_workers "
    f"they are shown within {PER_TENSOR_DIFF:.0%}",
    per_tensor_cost_differs,
    number=51,
)

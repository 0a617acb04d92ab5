"""Sharing strategies by tensor size, and the strategy switched after the workers started.

The `sharing-size` study hands one tensor per batch (batch size 1) from 1 KiB to 64 MiB from 2 workers under each
strategy: the time per tensor is the inverse of the throughput. The `sharing-size-switch` study calls
torch.multiprocessing.set_sharing_strategy in the main process after the first epoch (`sharing_switch`) and
observes, at each epoch's first batch, which strategy it arrived by (loaderbench.measure.observers.SharingSeen):
persistent workers started before the call, fresh workers of each epoch (the control) after it.
"""

from __future__ import annotations

import itertools
import json

import pandas as pd

from loaderbench.analysis.rules.claim import Question, finite, g, missing, narrow, pick
from loaderbench.analysis.table.records import col, is_true, ok_rows
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, MIN_EFFECT, Outcome, at_least, both, decide_shift

#: "cheaper": one strategy's tensors per second at least this times the other's
CHEAPER = 1 + MIN_EFFECT
STRATEGIES = ("file_descriptor", "file_system")
_READ = (
    "status cell_id workload num_workers sharing_strategy sharing_switch persistent_workers sample_kb samples_per_s "
    "sharing_seen"
).split()


def size_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Ok sleep cells with workers and no strategy switch."""
    r = ok_rows(narrow(rows, _READ))
    if r.empty:
        return r
    switch = col(r, "sharing_switch").fillna("none")
    return r[(col(r, "workload") == "sleep") & (switch == "none") & (pd.to_numeric(col(r, "num_workers", 0)) > 0)]


def by_size(rows: pd.DataFrame) -> list[tuple[float, object, object]]:
    """(sample_kb, file_descriptor's samples/s, file_system's) per tensor size measured under both."""
    r = size_rows(rows)
    out = []
    for kb in sorted(r["sample_kb"].dropna().unique()) if not r.empty else []:
        fd, fs = (finite(pick(r, sample_kb=kb, sharing_strategy=s)["samples_per_s"]) for s in STRATEGIES)
        if len(fd) >= 3 and len(fs) >= 3:
            out.append((float(kb), fd, fs))
    return out


def kib(x: float) -> str:
    return f"{g(x / 1024)} MiB" if x >= 1024 else f"{g(x)} KiB"


def crossing(found) -> str:
    """Where file_system's median rate first reaches file_descriptor's, in words."""
    ratios = [(kb, float(pd.Series(fs).median()) / float(pd.Series(fd).median())) for kb, fd, fs in found]
    text = ", ".join(f"{kib(kb)} {r:.2f}x" for kb, r in ratios)
    for (a, ra), (b, rb) in itertools.pairwise(ratios):
        if ra < 1 <= rb:
            return f"file_system / file_descriptor per size: {text}; they cross between {kib(a)} and {kib(b)}"
    return f"file_system / file_descriptor per size: {text}; no crossing in this range"


def fd_small_fs_large(rows: pd.DataFrame) -> Outcome:
    """#51: file_descriptor hands over the smallest tensor at least CHEAPER x as fast as file_system, and file_system
    the largest at least CHEAPER x as fast as file_descriptor."""
    found = by_size(rows)
    if len(found) < 2:
        return missing("needs both strategies at two or more tensor sizes (sample_kb), 3 ok repetitions each")
    (lo, fd_lo, fs_lo), (hi, fd_hi, fs_hi) = found[0], found[-1]
    small = decide_shift(fs_lo, fd_lo, at_least(CHEAPER), label=f"{kib(lo)}: file_descriptor / file_system")
    large = decide_shift(fd_hi, fs_hi, at_least(CHEAPER), label=f"{kib(hi)}: file_system / file_descriptor")
    out = both(small, large)
    return Outcome(out.verdict, f"{out.evidence}; {crossing(found)}")


def switch_rows(rows: pd.DataFrame) -> pd.DataFrame:
    r = ok_rows(narrow(rows, _READ))
    if r.empty or "sharing_seen" not in r:
        return r.iloc[0:0]
    switch = col(r, "sharing_switch").fillna("none")
    return r[(switch != "none") & r["sharing_seen"].notna()]


def _after(seen) -> list[str]:
    """The strategies the epochs after the first arrived by."""
    values = json.loads(seen) if isinstance(seen, str) else list(seen)
    return values[1:]


def switch_after_start_ignored(rows: pd.DataFrame) -> Outcome:
    """#52: with persistent workers, every later epoch still arrives by the strategy they started with; with fresh
    workers each epoch (the control), by the one switched to (counted facts)."""
    r = switch_rows(rows)
    if r.empty:
        return missing("needs cells with sharing_switch and two or more epochs")
    parts, kept_all, control_switched, persistent_switched = [], True, True, False
    for persistent in (True, False):
        cells = r[r["persistent_workers"].map(is_true) == persistent]
        if cells.empty:
            return missing(f"needs cells with persistent_workers = {str(persistent).lower()}")
        kept = switched = 0
        for _, c in cells.iterrows():
            later = _after(c["sharing_seen"])
            kept += bool(later) and all(s == c["sharing_strategy"] for s in later)
            switched += bool(later) and all(s == c["sharing_switch"] for s in later)
        who = "persistent workers (started before the call)" if persistent else "fresh workers each epoch"
        parts.append(f"{who}: {kept} of {len(cells)} repetitions kept the first strategy, {switched} switched")
        if persistent:
            kept_all = kept == len(cells)
            persistent_switched = switched > 0
        else:
            control_switched = switched == len(cells)
    text = "; ".join(parts)
    if persistent_switched:
        return Outcome(FAILS, text)
    if kept_all and control_switched:
        return Outcome(HOLDS, text)
    return Outcome(INCONCLUSIVE, text + ("" if control_switched else ": the control did not switch either"))


QUESTION = Question(
    "sharing-size",
    ("sharing_strategy", "sample_kb", "sharing_switch", "persistent_workers", "epochs"),
    lambda rows: len(by_size(rows)) >= 2 or not switch_rows(rows).empty,
    figure="loaderbench.analysis.figures.questions.sharing_size:cost_per_tensor_by_size",
)
QUESTION.add(
    "file_descriptor is cheaper per small tensor; file_system suits few large ones",
    f"one tensor per batch from 2 workers: holds if at the smallest size file_descriptor's tensors per second "
    f"are at least {CHEAPER:g}x file_system's and at the largest file_system's at least {CHEAPER:g}x "
    "file_descriptor's; the evidence names where their rates cross",
    fd_small_fs_large,
    needs=lambda rows: len(by_size(rows)) >= 2,
    number=51,
)
QUESTION.add(
    "set_sharing_strategy after workers start has no effect",
    "the strategy each later epoch's first batch arrived by, observed in the main process's memory map: "
    "holds if with persistent workers every repetition kept the first strategy and with fresh workers each "
    "epoch (the control) every one switched; does not hold if a persistent worker switched",
    switch_after_start_ignored,
    needs=lambda rows: not switch_rows(rows).empty,
    number=52,
    study="sharing-size-switch",
)

"""Persistent workers: the cost paid at every epoch boundary when workers restart."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.claim import EXTENSION, Metric, Question, finite, missing, pick, values_of, varies
from loaderbench.analysis.rules.kinds import MOST, Shift, medians, ok_with_workers
from loaderbench.analysis.table.records import col, is_true, ok_rows
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, Outcome, Region, at_least, decide_shift

#: persistent workers remove the start-up: the restarted gap is at least this many times the persistent one.
PERSIST_GAP_RATIO = 2.0
#: spawn's epoch-boundary gap (workers restarted) is at least this many times fork's.
SPAWN_GAP_RATIO = 2.0
#: persistent workers speed a run of short epochs up by at least this factor (tutorial: 1.13x over 10 epochs).
RUN_SPEEDUP = 1.05
#: a second loader's persistent workers double what the workers hold: with it at least this times without
SECOND_RATIO = 1.6


def _pers(rows):
    ok = ok_with_workers(rows)
    if ok.empty:
        return ok, 0
    top = int(pd.to_numeric(ok["epochs"], errors="coerce").max())
    return ok[ok["epochs"] == top], top


def _epochs(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows with workers of cells with 2 or more epochs."""
    ok = ok_with_workers(rows)
    return ok[pd.to_numeric(col(ok, "epochs"), errors="coerce") > 1]


def _gap(a: dict, b: dict, region: Region, names: tuple[str, str], note: str = "", **where) -> Shift:
    return Shift(
        "epoch_gap_s",
        "epoch-boundary gap",
        a,
        b,
        region,
        where={"epochs": MOST, **where},
        names=names,
        frame=_epochs,
        aside=medians("epoch_gap_s", " s"),
        note=note,
    )


def persistent_removes_gap(start_method: str) -> Shift:
    return _gap(
        {"persistent_workers": True},
        {"persistent_workers": False},
        at_least(PERSIST_GAP_RATIO),
        ("persistent workers", "restarting workers"),
        "what is left is the refill: one batch made after iter()",
        start_method=start_method,
    )


gap_grows_with_spawn = _gap(
    {"start_method": "fork"},
    {"start_method": "spawn"},
    at_least(SPAWN_GAP_RATIO),
    ("fork", "spawn"),
    persistent_workers=False,
)


def persistent_speeds_up_run(rows: pd.DataFrame) -> Outcome:
    ok, epochs = _pers(rows)
    if epochs < 2:
        return missing("needs cells with 2 or more epochs")
    parts, decided = [], None
    for sm in values_of(ok, "start_method"):
        on, off = (finite(pick(ok, start_method=sm, persistent_workers=p)["total_s"]) for p in (True, False))
        o = decide_shift(on, off, at_least(RUN_SPEEDUP), label=f"{sm}: total_s restarted / persistent")
        if sm == "fork":
            decided = o
        elif len(on) and len(off):
            parts.append(o.evidence.split(": ")[0] + f" ({o.verdict} for {sm})")
    if decided is None:
        return missing("needs persistent and non-persistent fork cells")
    return Outcome(
        decided.verdict,
        f"whole-run speed-up over {epochs} epochs: {decided.evidence}"
        + ("; " + "; ".join(parts) if parts else "")
        + "; tutorial: 1.13x over 10 epochs (GPU, its model)",
    )


def _needs(rows: pd.DataFrame) -> bool:
    epochs = pd.to_numeric(rows.get("epochs", pd.Series(dtype=float)), errors="coerce")
    return varies(rows, "persistent_workers") and bool((epochs > 1).any())


def _state_rows(rows: pd.DataFrame, flag: str) -> pd.DataFrame:
    ok = ok_rows(rows)
    if ok.empty or flag not in ok:
        return ok.iloc[0:0]
    return ok[ok[flag].map(is_true) & (ok["num_workers"] > 0)]


def persistent_miss_state(rows: pd.DataFrame) -> Outcome:
    """#29: samples after the first epoch that carried the dataset attribute as it was before the main process
    changed it, with persistent workers and with fresh workers each epoch (the control). Counted facts."""
    r = _state_rows(rows, "epoch_attribute")
    r = r[r["epoch_attr_samples"].notna()] if not r.empty else r
    parts, stale_all, control_clean, any_stale = [], False, False, False
    for persistent in (True, False):
        cells = r[r["persistent_workers"].map(is_true) == persistent] if not r.empty else r
        if len(cells) < 3:
            return missing("needs epoch_attribute cells with and without persistent workers, 2 or more epochs, 3 each")
        stale, total = cells["epoch_attr_stale"].astype(int), cells["epoch_attr_samples"].astype(int)
        who = "persistent workers" if persistent else "fresh workers each epoch"
        parts.append(
            f"{who}: {int(stale.sum())} of {int(total.sum())} samples after the first epoch saw the old value "
            f"({int((stale > 0).sum())} of {len(cells)} repetitions)"
        )
        if persistent:
            stale_all = bool((stale == total).all() and (total > 0).all())
            any_stale = bool((stale > 0).any())
        else:
            control_clean = bool((stale == 0).all())
    text = "; ".join(parts)
    if not any_stale:
        return Outcome(FAILS, text)
    if stale_all and control_clean:
        return Outcome(HOLDS, text)
    return Outcome(INCONCLUSIVE, text)


def workers_held_mib(timeline) -> float | None:
    """Workers' USS over a cell's run: the median over the probe's samples with a worker alive (MiB)."""
    samples = json.loads(timeline) if isinstance(timeline, str) else timeline
    if not isinstance(samples, list):
        return None
    held = [s[5] for s in samples if len(s) > 5 and s[1] > 1]
    return float(np.median(held)) / 2**20 if held else None


def second_loader_doubles(rows: pd.DataFrame) -> Outcome:
    """#28: with persistent workers, the workers' USS held over the run with a second (validation) loader beside
    the training one, over that without, at least SECOND_RATIO; fresh workers each epoch are the control."""
    ok = ok_with_workers(rows)
    if ok.empty or "second_loader" not in ok:
        return missing("needs cells with and without second_loader")
    ok = ok.assign(held=[workers_held_mib(t) for t in col(ok, "memory_timeline")])
    out = None
    parts = []
    for persistent in (True, False):
        cells = ok[ok["persistent_workers"].map(is_true) == persistent]
        without, with_ = (finite(cells[cells["second_loader"].map(is_true) == s]["held"]) for s in (False, True))
        label = (
            f"{'persistent' if persistent else 'fresh workers each epoch'}: workers' USS with / without a second loader"
        )
        o = decide_shift(without, with_, at_least(SECOND_RATIO), label=label)
        parts.append(o.evidence)
        if persistent:
            out = o
    if out is None:
        return missing("needs persistent cells with and without second_loader")
    return Outcome(out.verdict, "; ".join(parts))


_needs_state = lambda rows: not _state_rows(rows, "epoch_attribute").empty
_needs_second = lambda rows: "second_loader" in rows and bool(rows["second_loader"].map(is_true).any())


QUESTION = Question(
    "persistence",
    ("persistent_workers", "epochs", "start_method", "second_loader", "epoch_attribute"),
    _needs,
    figure="loaderbench.analysis.figures.questions.persistence:epoch_gap_by_persistence",
    tables={
        "persistence": (
            Metric("epoch_gap_s", "epoch-boundary gap (s)"),
            Metric("total_s", "whole run (s)"),
            Metric("end_to_end_samples_per_s", "end-to-end samples/s"),
        )
    },
)
for sm in ("fork", "forkserver", "spawn"):
    QUESTION.add(
        f"persistent workers remove the per-epoch start-up cost ({sm})",
        persistent_removes_gap(sm),
        number=26,
        **({} if sm == "spawn" else {"role": EXTENSION, "setting": f"under {sm} on this machine"}),
    )
QUESTION.add("the epoch-boundary gap grows with spawn", gap_grows_with_spawn, number=26)
QUESTION.add(
    "persistent workers speed up a run of short epochs (tutorial: 1.13x over 10 epochs)",
    f"fork, at the most epochs: holds if total_s without / with persistent workers is at least {RUN_SPEEDUP:g}x",
    persistent_speeds_up_run,
    number=27,
    role=EXTENSION,
    setting="with a simulated loop of short epochs, fork, on this machine",
)
QUESTION.add(
    "persistent workers hold their memory between epochs; a second (validation) loader doubles it",
    "a second loader over the same dataset and settings reads 4 batches after every epoch: the workers' "
    "USS held over the run (the median over the probe's samples with a worker alive), with it over "
    f"without, at least {SECOND_RATIO:g}x with persistent workers; fresh workers each epoch are the "
    "control",
    second_loader_doubles,
    needs=_needs_second,
    number=28,
    study="persistence-state",
)
QUESTION.add(
    "persistent workers miss dataset state changed between epochs",
    "the main process counts epochs on an attribute of the dataset; each sample carries the count its "
    "worker saw: holds if with persistent workers every sample after the first epoch saw the old value in "
    "every repetition and with fresh workers each epoch none did; does not hold if no persistent worker "
    "sample did (counted facts)",
    persistent_miss_state,
    needs=_needs_state,
    number=29,
    study="persistence-state",
)

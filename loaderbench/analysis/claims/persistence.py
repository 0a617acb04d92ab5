"""Persistent workers: the cost paid at every epoch boundary when workers restart."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from loaderbench.analysis.claims.claim import Claim, Question, finite, g, missing, pick, values_of, varies
from loaderbench.analysis.table import ok_rows
from loaderbench.stats.verdicts import Outcome, at_least, decide_shift

#: persistent workers remove the start-up: the restarted gap is at least this many times the persistent one.
PERSIST_GAP_RATIO = 2.0
#: spawn's epoch-boundary gap (workers restarted) is at least this many times fork's.
SPAWN_GAP_RATIO = 2.0
#: persistent workers speed a run of short epochs up by at least this factor (tutorial: 1.13x over 10 epochs).
RUN_SPEEDUP = 1.05


def _pers(rows):
    ok = ok_rows(rows)
    ok = ok[ok["num_workers"] > 0]
    if ok.empty:
        return ok, 0
    top = int(pd.to_numeric(ok["epochs"], errors="coerce").max())
    return ok[ok["epochs"] == top], top


def persistent_removes_gap(start_method: str) -> Callable[[pd.DataFrame], Outcome]:
    def rule(rows: pd.DataFrame) -> Outcome:
        ok, epochs = _pers(rows)
        if epochs < 2:
            return missing("needs cells with 2 or more epochs")
        off, on = (
            finite(pick(ok, start_method=start_method, persistent_workers=p)["epoch_gap_s"]) for p in (False, True)
        )
        o = decide_shift(on, off, at_least(PERSIST_GAP_RATIO), label="epoch gap restarted / persistent")
        return Outcome(
            o.verdict,
            f"{start_method}, {epochs} epochs: gap restarting workers "
            f"{g(pd.Series(off).median())} s, persistent {g(pd.Series(on).median())} s: "
            f"{o.evidence}",
        )

    rule.__name__ = f"persistent_removes_gap_{start_method}"
    return rule


def gap_grows_with_spawn(rows: pd.DataFrame) -> Outcome:
    ok, epochs = _pers(rows)
    if epochs < 2:
        return missing("needs cells with 2 or more epochs")
    f, s = (finite(pick(ok, start_method=m, persistent_workers=False)["epoch_gap_s"]) for m in ("fork", "spawn"))
    fs = finite(pick(ok, start_method="forkserver", persistent_workers=False)["epoch_gap_s"])
    extra = f" (forkserver {g(pd.Series(fs).median())} s)" if len(fs) else ""
    o = decide_shift(f, s, at_least(SPAWN_GAP_RATIO), label="epoch gap without persistent workers, spawn / fork")
    return Outcome(o.verdict, o.evidence + extra)


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


QUESTION = Question("persistence", ("persistent_workers", "epochs", "start_method"), _needs)
QUESTION.claims.extend(
    [
        *[
            Claim(
                "persistence",
                f"persistent workers remove the per-epoch start-up cost ({sm})",
                f"at the most epochs: holds if the epoch-boundary gap restarting workers is at least "
                f"{PERSIST_GAP_RATIO:g}x the persistent one (what is left is the refill: one batch made after iter())",
                persistent_removes_gap(sm),
                number=26,
            )
            for sm in ("fork", "forkserver", "spawn")
        ],
        Claim(
            "persistence",
            "the epoch-boundary gap grows with spawn",
            f"non-persistent workers: holds if spawn's epoch gap is at least {SPAWN_GAP_RATIO:g}x fork's",
            gap_grows_with_spawn,
            number=26,
        ),
        Claim(
            "persistence",
            "persistent workers speed up a run of short epochs (tutorial: 1.13x over 10 epochs)",
            f"fork, at the most epochs: holds if total_s without / with persistent workers is at least "
            f"{RUN_SPEEDUP:g}x",
            persistent_speeds_up_run,
            number=27,
        ),
    ]
)

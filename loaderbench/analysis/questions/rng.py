"""Random number generators in workers: which sources repeat their draws across workers and epochs.

A duplicate fraction is a counted fact per repetition (independent float64 draws never collide), so a cell
is decided when all its repetitions fall on the same side of DUP, and left open when they disagree.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.claim import MIN_N, Metric, Question, finite, g, missing, pick
from loaderbench.analysis.table.environment import env_one
from loaderbench.analysis.table.records import is_true, ok_rows
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURED, Outcome, all_of

#: A duplicate fraction above this is a repeat.
DUP = 0.01
SOURCES = ("python", "numpy", "torch")


def _rng_cells(rows, **eq):
    ok = ok_rows(rows)
    ok = ok[ok["num_workers"] >= 2]
    return pick(ok, **eq) if eq else ok


def _side(values, want_dups: bool) -> str:
    """A cell's verdict: every repetition above DUP (or none) as wanted, the other way, or split."""
    x = np.asarray(values, dtype=float)
    if x.size < MIN_N:
        return NOT_MEASURED
    above = x > DUP
    if above.all() or not above.any():
        return HOLDS if bool(above.all()) == want_dups else FAILS
    return INCONCLUSIVE


def _where(r) -> str:
    return (
        f"w={int(r['num_workers'])}, {r.get('start_method')}, worker_init={r.get('worker_init')}, "
        f"{'persistent' if is_true(r.get('persistent_workers')) else 'restarted'}"
    )


def _dup_check(rows, source: str, part: str, want_dups: bool) -> list[tuple[str, str, float]]:
    """Per cell: (verdict, the cell in words, median duplicate fraction) of one source's draws."""
    c = f"rng_dup_{source}_{part}"
    checks = []
    if c not in rows:
        return checks
    for _, grp in rows.groupby("cell_id"):
        x = finite(grp[c])
        if not x.size:
            continue
        checks.append((_side(x, want_dups), _where(grp.iloc[0]), float(np.median(x))))
    return checks


def _dup_outcome(
    checks: list[tuple[str, str, float]], what: str, empty: str, extra: str = "", unit: str = "cells"
) -> Outcome:
    """Every cell as the claim says: holds; one the other way: does not hold; the evidence gives the range over
    cells and names the exceptions."""
    if not checks:
        return missing(empty)
    vals = [v for _, _, v in checks]
    lo, hi = g(100 * min(vals)), g(100 * max(vals))
    text = (
        f"{what}: {lo}% in each of {len(checks)} {unit}"
        if lo == hi
        else f"{what}: {lo}-{hi}% over {len(checks)} {unit}"
    )
    for verdict, say in (
        (FAILS, "not as the claim says"),
        (INCONCLUSIVE, f"repetitions on both sides of {DUP:.0%}"),
        (NOT_MEASURED, f"fewer than {MIN_N} repetitions"),
    ):
        odd = [f"{w}: {g(100 * v)}%" for vv, w, v in checks if vv == verdict]
        if odd:
            text += (
                f"; {say} in {'all ' if len(odd) == len(checks) else ''}{len(odd)}: "
                + "; ".join(odd[:6])
                + (" ..." if len(odd) > 6 else "")
            )
    out = all_of([Outcome(v, "") for v, _, _ in checks], empty)
    return Outcome(out.verdict, text + extra)


def _versions(rows) -> str:
    return f" (torch {env_one(rows, 'torch')}, numpy {env_one(rows, 'numpy')}, python {env_one(rows, 'python')})"


def rng_repeats(source: str) -> Callable[[pd.DataFrame], Outcome]:
    def rule(rows: pd.DataFrame) -> Outcome:
        cells = _rng_cells(rows, worker_init="none", start_method="fork")
        return _dup_outcome(
            _dup_check(cells, source, "within", True),
            f"{source} draws equal to another draw of the same epoch, fork, worker_init = none",
            "needs fork cells with 2+ workers and worker_init = none",
            _versions(rows),
        )

    rule.__name__ = f"rng_repeats_{source}"
    return rule


def torch_never_repeats(rows: pd.DataFrame) -> Outcome:
    cells = _rng_cells(rows)
    checks = _dup_check(cells, "torch", "within", False) + _dup_check(cells, "torch", "across", False)
    n = cells["cell_id"].nunique() if len(cells) else 0
    return _dup_outcome(
        checks,
        "torch draws repeated within an epoch or from the epoch before, every cell with 2+ workers",
        "needs cells with 2+ workers",
        _versions(rows),
        unit=f"checks ({n} cells, within and across epochs)",
    )


def rng_repeats_across_epochs(rows: pd.DataFrame) -> Outcome:
    cells = _rng_cells(rows, worker_init="none", start_method="fork", persistent_workers=False)
    if "rng_dup_numpy_across" not in cells or cells["rng_dup_numpy_across"].dropna().empty:
        return missing("needs non-persistent fork cells with 2+ workers and 2 or more epochs")
    checks = []
    for _, grp in cells.groupby("cell_id"):
        per_source = pd.DataFrame({s: pd.to_numeric(grp[f"rng_dup_{s}_across"], errors="coerce") for s in SOURCES})
        top = finite(per_source.max(axis=1))  # the most repeated source, per repetition
        med = {s: float(per_source[s].median()) for s in SOURCES}
        checks.append(
            (
                _side(top, True),
                f"w={int(grp.iloc[0]['num_workers'])} ("
                + ", ".join(f"{s} {g(100 * v)}%" for s, v in med.items())
                + ")",
                float(np.median(top)) if top.size else float("nan"),
            )
        )
    return _dup_outcome(
        checks,
        "draws already drawn the epoch before (the most of python/numpy/torch), fork, "
        "restarted workers, worker_init = none",
        "needs non-persistent fork cells",
        _versions(rows),
    )


def seed_all_no_duplicates(rows: pd.DataFrame) -> Outcome:
    cells = _rng_cells(rows, worker_init="seed_all")
    checks = []
    for s in SOURCES:
        for part in ("within", "across"):
            checks += [(v, f"{s} {part}, {w}", m) for v, w, m in _dup_check(cells, s, part, False)]
    n = cells["cell_id"].nunique() if len(cells) else 0
    return _dup_outcome(
        checks,
        "duplicates of any source, within or across epochs, worker_init = seed_all",
        "needs cells with 2+ workers and worker_init = seed_all",
        unit=f"checks ({n} cells x python/numpy/torch x within/across epochs)",
    )


_SPLIT = f"inconclusive where a cell's repetitions fall on both sides of {DUP:.0%}"
QUESTION = Question(
    "rng",
    ("num_workers", "worker_init", "persistent_workers", "start_method", "epochs"),
    lambda rows: "workload" in rows and bool((rows["workload"] == "rng").any()),
    figure="loaderbench.analysis.figures.questions.rng:rng_duplicates",
    tables={
        "rng": tuple(
            Metric(f"rng_dup_{src}_{when}", f"{src} {when}", agg="max")
            for src in SOURCES
            for when in ("within", "across")
        )
    },
)
QUESTION.add(
    "NumPy's global generator repeats draws across forked workers without a worker_init_fn",
    f"holds if in every fork cell with 2+ workers and worker_init = none every repetition has more than "
    f"{DUP:.0%} of an epoch's NumPy draws equal to another draw of the same epoch; {_SPLIT}",
    rng_repeats("numpy"),
    number=30,
)
QUESTION.add(
    "Python's random repeats draws across forked workers without a worker_init_fn",
    f"as above for Python's random (more than {DUP:.0%} duplicates in every repetition of every such cell)",
    rng_repeats("python"),
    number=30,
)
QUESTION.add(
    "torch's generator never repeats across workers (PyTorch gives each worker its own seed)",
    f"holds if in every cell with 2+ workers no repetition has more than {DUP:.0%} of torch draws repeated, "
    f"within an epoch or from the previous epoch; {_SPLIT}",
    torch_never_repeats,
    number=31,
)
QUESTION.add(
    "random augmentations repeat every epoch",
    f"non-persistent fork cells with 2+ workers, worker_init = none: holds if in every cell every repetition "
    f"has more than {DUP:.0%} of some source's draws already drawn the epoch before; {_SPLIT}",
    rng_repeats_across_epochs,
    number=32,
)
QUESTION.add(
    "a seeding worker_init_fn (seed_all) leaves no duplicates",
    f"holds if no repetition of a seed_all cell with 2+ workers has more than {DUP:.0%} duplicates in any "
    f"source, within or across epochs; {_SPLIT}",
    seed_all_no_duplicates,
    number=32,
)

"""What a worker process costs, and what a workload's kind hides: the first batch without workers, context
switches past the cores, a sleeping workload's curve against a CPU-bound one, and the I/O-bound rules of thumb
(2 and 4 x the cores).

The curves are read from any study with num_workers curves of plain loading (the quick study carries them all):
no consumer step or model, one rank, local data, not the decode- or read-only reference cells; one curve per
value of every other axis that varies, so no curve mixes cells. A num_workers = 0 cell belongs to every curve
that differs from it only in axes that mean nothing without workers.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import pandas as pd

from loaderbench.analysis.rules.claim import EXTENSION, NOISY, Claim, finite, missing, narrow, quiet
from loaderbench.analysis.rules.kinds import MOST, Of, Shift, medians
from loaderbench.analysis.rules.rows import loading_alone
from loaderbench.analysis.table.records import AXIS_COLUMNS, col, ok_rows
from loaderbench.schema.axes import WORKER_ONLY_AXES
from loaderbench.stats.intervals import MIN_N
from loaderbench.stats.verdicts import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    MIN_EFFECT,
    Outcome,
    all_of,
    at_least,
    at_most,
    both,
    decide_shift,
    g,
)

#: "no start-up cost at num_workers = 0": the first batch with 1 worker takes at least this many times as long.
FIRST_BATCH_MIN = 1 + MIN_EFFECT
#: "switched out more often past the cores": involuntary context switches per sample at the most workers at
#: least this many times those at num_workers = cores.
CTX_RISE = 2.0
#: "a sleep() workload scales past the cores": at the most workers (at least SLEEP_SPAN x cores), at least this
#: many times its throughput at num_workers = cores ...
SLEEP_PAST = 2.0
SLEEP_SPAN = 4
#: ... while CPU-bound loading on the same cores gains at most this factor there. The source's CPU-bound load is
#: real image augmentation ("replace time.sleep with transforms.Resize"): the jpeg workload (decode,
#: RandomResizedCrop, flip) tests it in that setting, and the pure-Python cpu loop is the suite's extension.
CPU_FLAT = 1 + MIN_EFFECT
REAL_LOAD = ("jpeg",)
PYTHON_LOOP = ("cpu",)
#: "2-4 x the cores is enough for I/O-bound loading": the rule's num_workers reaches at least this share of the
#: best throughput measured on the curve.
IO_ENOUGH = 0.9
CPU_BOUND = PYTHON_LOOP + REAL_LOAD
IO_BOUND = ("sleep",)
_NOT_LOADING = ("rng", "fault")
_READ = [
    "status",
    "cell_id",
    *AXIS_COLUMNS,
    *"samples_per_s time_to_first_batch_s ctx_involuntary ctx_voluntary end_to_end_samples_per_s total_s".split(),
]


def plain_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Ok rows of plain loading: one rank, local data, no consumer step or model, no reference-only stage."""
    ok = ok_rows(narrow(rows, _READ))
    if ok.empty:
        return ok
    keep = loading_alone(ok) & ~col(ok, "workload").isin(_NOT_LOADING)
    keep &= ~col(ok, "jpeg_stage").astype(object).isin(("decode", "read"))
    keep &= col(ok, "storage").astype(object).ne("http")
    return ok[keep]


#: The curves of the last rows read, by workloads: every claim of a study reads the same rows, several of them the
#: same curves (a pure function of the rows, which no rule changes).
_CURVES: dict = {"of": lambda: None}


class _Cut:
    """The curves of one call of `_curves`, cut as far as any reader has read them (a check that a curve exists
    reads one) and kept."""

    def __init__(self, curves: Iterator) -> None:
        self.curves = curves
        self.cut: list = []

    def __iter__(self) -> Iterator:
        i = 0
        while True:
            if i == len(self.cut):
                nxt = next(self.curves, None)
                if nxt is None:
                    return
                self.cut.append(nxt)
            yield self.cut[i]
            i += 1


def curves(
    rows: pd.DataFrame, workloads: tuple[str, ...]
) -> Iterator[tuple[str, str, int, Mapping[int, pd.DataFrame]]]:
    """(label, workload, cores, {num_workers: ok rows}) per curve of the given workloads with two or more
    num_workers."""
    if _CURVES["of"]() is not rows:
        _CURVES.clear()
        _CURVES["of"] = weakref.ref(rows)
    key = tuple(workloads)
    if key not in _CURVES:
        _CURVES[key] = _Cut(_curves(rows, key))
    return iter(_CURVES[key])


class ByWorkers(Mapping):
    """One curve's rows by num_workers ({num_workers: rows}), `rows` sorted by num_workers (`workers`): each
    num_workers's rows cut from them when first read (most readers read a few)."""

    def __init__(self, rows: pd.DataFrame, workers: np.ndarray) -> None:
        self.rows = rows
        bounds = np.flatnonzero(np.diff(workers)) + 1
        self._at = {int(workers[i]): (i, j) for i, j in zip(np.r_[0, bounds], np.r_[bounds, len(workers)])}
        self._cut: dict[int, pd.DataFrame] = {}

    def __getitem__(self, n: int) -> pd.DataFrame:
        if n not in self._cut:
            i, j = self._at[n]
            self._cut[n] = self.rows.iloc[i:j]
        return self._cut[n]

    def __iter__(self) -> Iterator[int]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)


def _curves(
    rows: pd.DataFrame, workloads: tuple[str, ...]
) -> Iterator[tuple[str, str, int, Mapping[int, pd.DataFrame]]]:
    plain = plain_rows(rows)
    plain = plain[col(plain, "workload").isin(workloads)] if not plain.empty else plain
    if plain.empty:
        return
    n = pd.to_numeric(plain["num_workers"], errors="coerce").fillna(0).to_numpy()
    zero, rest = plain[n == 0], plain[n > 0]
    at_zero, at_rest = np.flatnonzero(n == 0), np.flatnonzero(n > 0)
    keys = [
        a
        for a in AXIS_COLUMNS
        if a in plain and a not in ("num_workers", "cores") and rest[a].dropna().astype(str).nunique() > 1
    ]
    shared = [a for a in keys if a not in WORKER_ONLY_AXES]
    # each axis of the num_workers = 0 rows as text once, not once per curve; the rows of a curve taken in one go
    zero_text = {a: zero[a].astype(str).to_numpy() for a in shared}
    zero_cores: dict[int, np.ndarray] = {}
    workers = pd.to_numeric(plain["num_workers"], errors="coerce").to_numpy(dtype=float)
    grouped = rest[keys + ["cores"]].assign(_at=np.arange(len(rest)))
    for key, at in grouped.groupby(keys + ["cores"], dropna=False, sort=True)["_at"]:
        key = key if isinstance(key, tuple) else (key,)
        cores = int(key[-1])
        if cores not in zero_cores:
            zero_cores[cores] = np.asarray(zero["cores"] == cores, dtype=bool)
        mine = zero_cores[cores]
        first = int(at.iloc[0])
        for a in shared:
            mine = mine & (zero_text[a] == str(rest[a].iloc[first]))
        taken = np.concatenate([at_zero[mine], at_rest[at.to_numpy()]])
        workload = str(plain["workload"].iloc[taken[0]])
        label = " · ".join([workload] + [f"{a}={v}" for a, v in zip(keys, key[:-1]) if a != "workload"])
        taken = taken[~np.isnan(workers[taken])]  # as a groupby on num_workers drops a missing one
        order = np.argsort(workers[taken], kind="stable")
        w = workers[taken][order]
        by = ByWorkers(plain.take(taken[order]), w)
        if len(by) >= 2:
            yield f"{label}, {cores} core{'s' if cores != 1 else ''}", workload, cores, by


def _med(x) -> float:
    return float(np.median(x)) if len(x) else float("nan")


def curve_rows(workloads: tuple[str, ...] | None = None) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The rows of every curve of `workloads` (default: every workload the rows have), each with its curve's label
    and its involuntary context switches per sample."""

    def frame(rows: pd.DataFrame) -> pd.DataFrame:
        which = workloads or tuple(sorted(set(col(rows, "workload").dropna().astype(str))))
        parts, labels = [], []
        for label, _, _, by in curves(rows, which):
            parts.append(by.rows)
            labels += [label] * len(by.rows)
        if not parts:
            return rows.iloc[0:0]
        out = pd.concat(parts).assign(curve=pd.Series(labels, dtype=str).to_numpy())
        counted = {"ctx_involuntary", "end_to_end_samples_per_s", "total_s"} <= set(out.columns)
        return out.assign(switches_per_sample=_switches_per_sample(out) if counted else np.nan)

    return frame


first_batch_without_workers = Shift(
    "time_to_first_batch_s",
    "time to the first batch",
    {"num_workers": 0},
    {"num_workers": 1},
    at_least(FIRST_BATCH_MIN),
    ("curve",),
    frame=curve_rows(),
    aside=medians("time_to_first_batch_s", " s"),
    note="per curve of plain loading; the claim's readable tracebacks: the rule below",
)


#: the frame of the dataset that raised, as the records name frames (file:line:function)
DATASET_FRAME = re.compile(r"^fault\.py:\d+:__getitem__$")


def _raised(rows: pd.DataFrame) -> pd.DataFrame:
    """Failed records of the fault workload's `raise` that kept their frames."""
    if "error_frames" not in rows or "fault" not in rows:
        return rows.iloc[0:0]
    failed = rows[(col(rows, "status") == "failed") & (col(rows, "fault") == "raise") & rows["error_frames"].notna()]
    return failed


def _frames(text) -> dict[str, list[str]]:
    try:
        found = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def readable_tracebacks(rows: pd.DataFrame) -> Outcome:
    """#57's tracebacks: per num_workers, in how many repetitions the main process's traceback holds the dataset's
    own frame, and in how many its message only quotes it (counted facts)."""
    raised = _raised(rows)
    if raised.empty:
        return missing("needs failed records of the fault workload's raise that keep their frames")
    held, parts = {}, []
    for nw, grp in raised.groupby(pd.to_numeric(raised["num_workers"], errors="coerce").fillna(0).astype(int)):
        frames = [_frames(t) for t in grp["error_frames"]]
        has = [any(DATASET_FRAME.match(f) for f in fr.get("held", [])) for fr in frames]
        quoted = [any(DATASET_FRAME.match(f) for f in fr.get("quoted", [])) for fr in frames]
        held[int(nw)] = has
        parts.append(
            f"w={int(nw)}: the dataset's frame in the traceback in {sum(has)} of {len(has)} repetitions, quoted in "
            f"the message only in {sum(q and not h for q, h in zip(quoted, has))}"
        )
    text = "; ".join(parts)
    zero, workers = held.get(0, []), [h for nw, hs in held.items() if nw > 0 for h in hs]
    if len(zero) < MIN_N or len(workers) < MIN_N:
        return missing(f"needs {MIN_N} failed repetitions at 0 workers and with workers; {text}")
    if all(zero) and not any(workers):
        return Outcome(HOLDS, text)
    if not all(zero) or all(workers):
        return Outcome(FAILS, text)
    return Outcome(INCONCLUSIVE, text)


_has_raised = lambda rows: not _raised(rows).empty


def _switches_per_sample(rows: pd.DataFrame) -> pd.Series:
    """Involuntary context switches of the cell's processes per sample loaded, one added to each count (a count
    of 0 then has a ratio)."""
    samples = pd.to_numeric(rows["end_to_end_samples_per_s"], errors="coerce") * pd.to_numeric(
        rows["total_s"], errors="coerce"
    )
    return (pd.to_numeric(rows["ctx_involuntary"], errors="coerce") + 1) / samples


switches_rise_past_cores = Shift(
    "switches_per_sample",
    "involuntary context switches per sample",
    {"num_workers": Of("cores")},
    {"num_workers": MOST},
    at_least(CTX_RISE),
    ("curve",),
    frame=curve_rows(CPU_BOUND),
    aside=medians("switches_per_sample", " per sample"),
    note="per CPU-bound curve; cache and TLB misses are not measured",
)


def sleep_scales_past_cores(rows: pd.DataFrame, against: tuple[str, ...]) -> Outcome:
    cpu = {}
    for label, _, cores, by in curves(rows, against):
        cpu.setdefault(cores, []).append((label, by))
    checks = []
    for label, _, cores, by in curves(rows, IO_BOUND):
        top = max(by)
        if top < SLEEP_SPAN * cores or cores not in by or cores not in cpu:
            continue
        parts = [
            decide_shift(
                finite(by[cores]["samples_per_s"]),
                finite(by[top]["samples_per_s"]),
                at_least(SLEEP_PAST),
                label=f"{label}: w={top} / w={cores}",
            )
        ]
        for cpu_label, cby in cpu[cores]:
            ctop = max(cby)
            if ctop > cores and cores in cby:
                parts.append(
                    decide_shift(
                        finite(cby[cores]["samples_per_s"]),
                        finite(cby[ctop]["samples_per_s"]),
                        at_most(CPU_FLAT),
                        label=f"{cpu_label}: w={ctop} / w={cores}",
                    )
                )
        if len(parts) > 1:
            checks.append(both(*parts))
    return all_of(
        checks,
        f"needs sleep cells from num_workers = cores to {SLEEP_SPAN} x cores and {'/'.join(against)} cells past the "
        "cores on the same cores",
    )


def io_rule_of_thumb(rows: pd.DataFrame) -> Outcome:
    checks = []
    for label, _, cores, by in curves(rows, IO_BOUND):
        four, two = 4 * cores, 2 * cores
        if four not in by:
            continue
        medians = {n: _med(finite(r["samples_per_s"])) for n, r in by.items()}
        best = max(medians, key=lambda n: medians[n])
        o = decide_shift(
            finite(by[best]["samples_per_s"]),
            finite(by[four]["samples_per_s"]),
            at_least(IO_ENOUGH),
            label=f"4 x cores (w={four}) / the best (w={best})",
        )
        beside = f"; 2 x cores (w={two}) reaches {g(medians[two] / medians[best])} of it" if two in medians else ""
        checks.append(Outcome(o.verdict, f"{label}: {o.evidence}{beside}"))
    return all_of(checks, "needs I/O-bound (sleep) cells at num_workers = 4 x cores and around it")


def _has(workloads: tuple[str, ...], need_zero: bool = False):
    return lambda rows: any(not need_zero or (0 in by and 1 in by) for *_, by in curves(rows, workloads))


_has_first_batch = lambda rows: (
    "time_to_first_batch_s" in rows and _has(tuple(set(col(rows, "workload").dropna().astype(str))), True)(rows)
)
_has_switches = lambda rows: "ctx_involuntary" in rows and _has(CPU_BOUND)(rows)
_has_both = lambda against: lambda rows: _has(IO_BOUND)(rows) and _has(against)(rows)


def _sleep_misleads(against: tuple[str, ...], load: str, **role: str) -> Claim:
    return Claim(
        _Q,
        f"a sleep() workload scales past the cores where {load} does not (a sleep benchmark misleads)",
        f"per core count with both: holds if the sleep curve's throughput at the most workers (at least "
        f"{SLEEP_SPAN} x cores) is at least {SLEEP_PAST:g}x that at num_workers = cores, while every "
        f"{'/'.join(against)} curve's at its most workers is at most {CPU_FLAT:g}x its own at cores; {_NOISE}",
        quiet(lambda rows: sleep_scales_past_cores(rows, against), select=plain_rows),
        needs=_has_both(against),
        number=16,
        study="quick",
        **role,
    )


_Q = "oversubscription"
_NOISE = (
    f"inconclusive when repetitions scatter by more than {NOISY:.0%} of their median: the cores were not the cells' own"
)
CLAIMS = [
    Claim(
        _Q,
        "num_workers = 0 pays no worker start-up: its first batch comes sooner than with 1 worker",
        first_batch_without_workers,
        needs=_has_first_batch,
        number=57,
        study="quick",
    ),
    Claim(
        _Q,
        "num_workers = 0 gives readable tracebacks: an exception in __getitem__ reaches the loop with the dataset's "
        "own frame",
        "the fault workload raises in __getitem__ (the tracebacks study): holds if at num_workers = 0 every "
        "repetition's traceback holds the dataset's frame (file, line, __getitem__) and with workers none does (a "
        "worker's frames are only quoted as text in the message); does not hold if 0 workers lacks it or workers "
        "hold it too (counted facts)",
        readable_tracebacks,
        needs=_has_raised,
        number=57,
        study="tracebacks",
    ),
    Claim(
        _Q,
        "past the cores, CPU-bound loaders are switched out more often per sample (context switches)",
        switches_rise_past_cores,
        needs=_has_switches,
        number=15,
        study="quick",
    ),
    _sleep_misleads(REAL_LOAD, "real image loading (JPEG decode and resize)"),
    _sleep_misleads(
        PYTHON_LOOP, "pure-Python CPU work", role=EXTENSION, setting="against a pure-Python loop, not image loading"
    ),
    Claim(
        _Q,
        "a pure-sleep loader needs no more than 4 x the cores as workers",
        f"per I/O-bound (sleep) curve: holds if throughput at num_workers = 4 x cores is at least {IO_ENOUGH:g}x "
        f"that of the best num_workers measured; what 2 x cores reaches is printed beside it; {_NOISE}",
        quiet(io_rule_of_thumb, select=plain_rows),
        needs=_has(IO_BOUND),
        number=17,
        study="quick",
        role=EXTENSION,
        setting="on a pure sleep, which has no optimum: the best is the largest num_workers tried",
    ),
]

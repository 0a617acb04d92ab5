"""Start methods: what a worker costs to start under fork, spawn and forkserver (with and without preload)."""

from __future__ import annotations

from functools import partial

import pandas as pd

from loaderbench.analysis.rules.claim import EXTENSION, Metric, Question, finite, g, missing, varies, with_workers
from loaderbench.analysis.rules.kinds import FEWEST, MOST, AllOf, Shift, medians
from loaderbench.analysis.table.derive import MIB, payload_mb, start_method_label
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import MIN_EFFECT, Outcome, Region, all_of, at_least, at_most, both, decide_shift, fact

#: spawn's time to first batch is at least this many times fork's.
SPAWN_TTFB_MIN = 2.0
#: spawn's workers' CPU seconds per worker are at least this many times fork's.
SPAWN_CPU_MIN = 5.0
#: a cost paid by every worker: per worker at the most workers, at least this share of that at the fewest.
PER_WORKER_KEEP = 0.75
#: fork's rise in main-process CPU with the payload is at most this share of spawn's rise.
FORK_RISE_SHARE = 0.25
#: spawn's workers' peak USS (private memory) per worker is at least this many times fork's.
SPAWN_USS_MIN = 2.0
#: forkserver+preload's epoch-2 restart is at most this many times fork's ("about as fast": 0.3 s vs 0.25 s).
PRELOAD_WITHIN = 1.5
METHODS = ("fork", "spawn", "forkserver", "forkserver+preload")


def _sm(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows with workers, with their start method's label, payload, workers' CPU seconds and peak USS (MiB)
    per worker."""
    ok = with_workers(ok_rows(rows)).copy()
    ok["method"] = start_method_label(ok)
    ok["payload_mb"] = payload_mb(ok)
    nw = ok["num_workers"]
    ok["cpu_per_worker"] = pd.to_numeric(col(ok, "cpu_workers_s"), errors="coerce") / nw
    ok["uss_mib"] = pd.to_numeric(col(ok, "workers_uss_peak_bytes"), errors="coerce") / 2**20 / nw
    return ok


def _v(ok, method, nw, mb, metric):
    return finite(ok[(ok["method"] == method) & (ok["num_workers"] == nw) & (ok["payload_mb"] == mb)][metric])


_PER = ("num_workers", "payload_mb")
_FASTER = at_least(1 + MIN_EFFECT)


def _first_batch(a: str, b: str, region: Region = _FASTER) -> Shift:
    return Shift("time_to_first_batch_s", "time to first batch", {"method": a}, {"method": b}, region, _PER, frame=_sm)


_cpu = partial(Shift, "cpu_per_worker", "workers' CPU seconds per worker", frame=_sm)
fork_starts_fastest = AllOf(tuple(_first_batch("fork", m) for m in METHODS[1:]))

spawn_pays_startup = AllOf(
    (
        _first_batch("fork", "spawn", at_least(SPAWN_TTFB_MIN)),
        _cpu({"method": "fork"}, {"method": "spawn"}, at_least(SPAWN_CPU_MIN), _PER),
        _cpu(
            {"method": "spawn", "num_workers": FEWEST},
            {"method": "spawn", "num_workers": MOST},
            at_least(PER_WORKER_KEEP),
            ("payload_mb",),
        ),
    ),
    note="a cost paid by every worker, whatever the core count",
)


def spawn_pickles_dataset(rows: pd.DataFrame) -> Outcome:
    """Pickling happens in the main process, once per worker start: its CPU time rises with the payload, by as
    much again for every worker. The workers' USS peaks are reported, not decided on: a spawned worker's exit
    (interpreter teardown) was seen to add a transient as large as the payload."""
    ok = _sm(rows)
    payloads = sorted(set(ok["payload_mb"]))
    if len(payloads) < 2 or payloads[0] != 0:
        return missing("needs cells with parent_payload_mb = 0 and > 0")
    big = payloads[-1]
    per_worker: dict[int, pd.Series] = {}
    checks = []
    for nw in sorted(set(ok["num_workers"])):
        c = {m: [_v(ok, m, nw, p, "cpu_main_s") for p in (0.0, big)] for m in ("spawn", "fork")}
        if min(len(x) for pair in c.values() for x in pair) < 3:
            continue
        s0, s1 = c["spawn"]
        spawn_rise = float(pd.Series(s1).median() - pd.Series(s0).median())
        per_worker[nw] = (pd.Series(s1) - pd.Series(s0).median()) / nw
        u0, u1 = (_v(ok, "spawn", nw, p, "workers_uss_peak_bytes") for p in (0.0, big))
        o = both(
            decide_shift(s0, s1, at_least(1 + MIN_EFFECT), label=f"spawn main CPU {big:g} MiB / none"),
            decide_shift(
                *c["fork"],
                at_most(FORK_RISE_SHARE * max(spawn_rise, 0.0)),
                log=False,
                unit=" s",
                label=f"fork's rise (vs {FORK_RISE_SHARE:g} x spawn's {g(spawn_rise)} s)",
            ),
        )
        uss = (
            f"; spawn workers' USS peak per worker {g(pd.Series(u0).median() / 2**20 / nw)} -> "
            f"{g(pd.Series(u1).median() / 2**20 / nw)} MiB"
            if len(u0) and len(u1)
            else ""
        )
        checks.append(Outcome(o.verdict, f"w={nw}: {o.evidence}{uss}"))
    ns = sorted(per_worker)
    if len(ns) >= 2:
        checks.append(
            decide_shift(
                per_worker[ns[0]],
                per_worker[ns[-1]],
                at_least(PER_WORKER_KEEP),
                label=f"spawn's rise per worker w={ns[-1]} / w={ns[0]}",
            )
        )
    return all_of(checks, "needs spawn and fork cells with and without payload, 3 ok repetitions each")


spawn_uses_more_memory = Shift(
    "uss_mib",
    "workers' peak USS per worker",
    {"method": "fork"},
    {"method": "spawn"},
    at_least(SPAWN_USS_MIN),
    ("num_workers",),
    where={"payload_mb": FEWEST},
    frame=_sm,
    aside=medians("uss_mib", " MiB"),
    note="the larger payloads are not read: a spawned worker's exit adds a transient as large as the payload",
)

forkserver_between = AllOf((_first_batch("fork", "forkserver"), _first_batch("forkserver", "spawn")))

preload_restarts_fast = AllOf(
    tuple(
        Shift(
            "epoch_gap_s",
            "worker start at epoch 2 (epoch_gap_s)",
            {"method": a},
            {"method": b},
            region,
            ("num_workers",),
            where={"payload_mb": FEWEST},
            frame=_sm,
        )
        for a, b, region in (
            ("fork", "forkserver+preload", at_most(PRELOAD_WITHIN)),
            ("forkserver+preload", "forkserver", at_least(1 + MIN_EFFECT)),
        )
    )
)


def fork_is_the_default(rows: pd.DataFrame) -> Outcome:
    """#11: the start method a DataLoader given no context uses, as each record's Python reported it (read in a
    fresh interpreter, loaderbench.measure.fingerprint.default_start_method), per Python version on Linux."""
    seen = rows[col(rows, "env_default_start_method").notna()]
    seen = seen[col(seen, "env_os").fillna("").astype(str).str.startswith("Linux")]
    if seen.empty:
        return missing("no Linux record carries the default start method (measured since records carry it)")
    parts, others = [], []
    for python, grp in seen.groupby(col(seen, "env_python").fillna("?"), sort=True):
        methods = sorted(set(grp["env_default_start_method"]))
        parts.append(f"Python {python} on Linux: {', '.join(methods)} ({len(grp)} records)")
        others += [m for m in methods if m != "fork"]
    return fact(not others, "; ".join(parts))


_needs_default = lambda rows: bool(col(rows, "env_default_start_method").notna().any())


_B = f"{1 + MIN_EFFECT:g}x"
QUESTION = Question(
    "start-method",
    ("start_method", "forkserver_preload", "num_workers", "parent_payload_mb"),
    lambda rows: varies(with_workers(rows), "start_method"),
    figure="loaderbench.analysis.figures.questions.start_method:time_to_first_batch_by_start_method",
    tables={
        "start-method": (
            Metric("time_to_first_batch_s", "first batch (s)"),
            Metric("epoch_gap_s", "epoch-2 restart gap (s)"),
            Metric("cpu_main_s", "main-process CPU (s)"),
            Metric("uss_peak_bytes", "USS (MiB)", MIB),
        )
    },
)
QUESTION.add("fork starts workers fastest", fork_starts_fastest, number=7)
QUESTION.add("spawn pays an interpreter start-up per worker", spawn_pays_startup, number=7)
QUESTION.add(
    "spawn pickles the dataset object to every worker (fork shares it)",
    f"pickling runs in the main process, once per worker start: holds if, at every num_workers, spawn's "
    f"main-process CPU seconds with the largest payload are at least {_B} those without, fork's rise is at "
    f"most {FORK_RISE_SHARE:g} x spawn's (median), and spawn's rise per worker at the most workers is at least "
    f"{PER_WORKER_KEEP:g}x that at the fewest (workers' USS peaks are reported, not used: a spawned worker's "
    "exit adds a transient as large as the payload)",
    spawn_pickles_dataset,
    number=8,
)
QUESTION.add(
    "spawned workers use more private memory than forked ones (fork shares the parent's pages)",
    spawn_uses_more_memory,
    number=9,
)
QUESTION.add("forkserver sits between fork and spawn (time to first batch)", forkserver_between, number=10)
QUESTION.add(
    "forkserver_preload starts the next loader's workers about as fast as fork "
    "(~0.3 s vs 0.25 s at 2 workers, Python 3.11)",
    preload_restarts_fast,
    number=10,
    role=EXTENSION,
    setting="with forkserver_preload, restarting the next loader's workers",
)
QUESTION.add(
    "fork is the Linux default start method",
    "the start method multiprocessing (and so a DataLoader given no multiprocessing_context) picks by "
    "default, read in a fresh interpreter of each record's Python on Linux: holds if it is fork for every "
    "Python version recorded (counted facts; Python 3.14 made forkserver the default)",
    fork_is_the_default,
    needs=_needs_default,
    number=11,
)

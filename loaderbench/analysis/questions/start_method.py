"""Start methods: what a worker costs to start under fork, spawn and forkserver (with and without preload)."""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.rules.claim import (
    EXTENSION,
    Claim,
    Metric,
    Question,
    finite,
    g,
    missing,
    varies,
    with_workers,
)
from loaderbench.analysis.table.derive import MIB, payload_mb, start_method_label
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import MIN_EFFECT, Outcome, all_of, at_least, at_most, both, decide_shift, fact

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
NEEDS = "fork and spawn (or forkserver) cells with 3 ok repetitions each"


def _sm(rows: pd.DataFrame) -> pd.DataFrame:
    ok = with_workers(ok_rows(rows)).copy()
    ok["method"] = start_method_label(ok)
    ok["payload_mb"] = payload_mb(ok)
    return ok


def _combos(ok: pd.DataFrame) -> list[tuple[int, float]]:
    return sorted({(int(n), float(p)) for n, p in zip(ok["num_workers"], ok["payload_mb"])})


def _v(ok, method, nw, mb, metric):
    return finite(ok[(ok["method"] == method) & (ok["num_workers"] == nw) & (ok["payload_mb"] == mb)][metric])


def _medians(vals: dict, unit: str) -> str:
    return ", ".join(f"{m} {g(pd.Series(v).median())}{unit} (n={len(v)})" for m, v in vals.items() if len(v))


def fork_starts_fastest(rows: pd.DataFrame) -> Outcome:
    ok = _sm(rows)
    checks = []
    for nw, mb in _combos(ok):
        v = {m: _v(ok, m, nw, mb, "time_to_first_batch_s") for m in METHODS}
        if len(v["fork"]) < 3 or (len(v["spawn"]) < 3 and len(v["forkserver"]) < 3):
            continue
        parts = [
            decide_shift(v["fork"], v[m], at_least(1 + MIN_EFFECT), label=f"{m} / fork")
            for m in METHODS[1:]
            if len(v[m])
        ]
        o = both(*parts)
        checks.append(Outcome(o.verdict, f"w={nw}, payload {mb:g} MiB, first batch: {o.evidence}"))
    return all_of(checks, f"needs {NEEDS}")


def spawn_pays_startup(rows: pd.DataFrame) -> Outcome:
    ok = _sm(rows)
    ok = ok.assign(cpu_per_worker=pd.to_numeric(col(ok, "cpu_workers_s"), errors="coerce") / ok["num_workers"])
    checks = []
    for nw, mb in _combos(ok):
        f, s = (_v(ok, m, nw, mb, "time_to_first_batch_s") for m in ("fork", "spawn"))
        fc, sc = (_v(ok, m, nw, mb, "cpu_per_worker") for m in ("fork", "spawn"))
        if min(len(f), len(s), len(fc), len(sc)) < 3:
            continue
        o = both(
            decide_shift(f, s, at_least(SPAWN_TTFB_MIN), label="first batch spawn / fork"),
            decide_shift(fc, sc, at_least(SPAWN_CPU_MIN), label="workers' CPU per worker spawn / fork"),
        )
        checks.append(Outcome(o.verdict, f"w={nw}, {mb:g} MiB: {o.evidence}"))
    ns = sorted({n for n, _ in _combos(ok)})
    if checks and len(ns) >= 2:
        for mb in sorted({p for _, p in _combos(ok)}):
            lo, hi = (_v(ok, "spawn", n, mb, "cpu_per_worker") for n in (ns[0], ns[-1]))
            if len(lo) >= 3 and len(hi) >= 3:
                checks.append(
                    decide_shift(
                        lo,
                        hi,
                        at_least(PER_WORKER_KEEP),
                        label=f"spawn, {mb:g} MiB, CPU per worker w={ns[-1]} / w={ns[0]}",
                    )
                )
    return all_of(checks, f"needs {NEEDS}")


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


def spawn_uses_more_memory(rows: pd.DataFrame) -> Outcome:
    """Read at the smallest payload only: a spawned worker's exit was seen to add a transient as large as the
    payload to its USS peak."""
    ok = _sm(rows)
    if ok.empty:
        return missing(f"needs {NEEDS}")
    ok = ok.assign(
        uss_mib=pd.to_numeric(col(ok, "workers_uss_peak_bytes"), errors="coerce") / 2**20 / ok["num_workers"]
    )
    mb = min(ok["payload_mb"])
    checks = []
    for nw in sorted(set(ok["num_workers"])):
        f, s = (_v(ok, m, nw, mb, "uss_mib") for m in ("fork", "spawn"))
        if min(len(f), len(s)) < 3:
            continue
        o = decide_shift(f, s, at_least(SPAWN_USS_MIN), label="workers' peak USS per worker spawn / fork")
        shown = f"{g(pd.Series(f).median())} -> {g(pd.Series(s).median())} MiB"
        checks.append(Outcome(o.verdict, f"w={int(nw)}, {mb:g} MiB payload: {o.evidence} ({shown})"))
    return all_of(checks, f"needs {NEEDS} and the workers' USS")


def forkserver_between(rows: pd.DataFrame) -> Outcome:
    ok = _sm(rows)
    checks = []
    for nw, mb in _combos(ok):
        f, fs, s = (_v(ok, m, nw, mb, "time_to_first_batch_s") for m in ("fork", "forkserver", "spawn"))
        if min(len(f), len(fs), len(s)) < 3:
            continue
        o = both(
            decide_shift(f, fs, at_least(1 + MIN_EFFECT), label="forkserver / fork"),
            decide_shift(fs, s, at_least(1 + MIN_EFFECT), label="spawn / forkserver"),
        )
        checks.append(Outcome(o.verdict, f"w={nw}, {mb:g} MiB, first batch: {o.evidence}"))
    return all_of(checks, "needs fork, forkserver and spawn cells with 3 ok repetitions each")


def preload_restarts_fast(rows: pd.DataFrame) -> Outcome:
    ok = _sm(rows)
    if "epoch_gap_s" not in ok or ok["epoch_gap_s"].dropna().empty:
        return missing("needs 2 or more epochs (epoch_gap_s: the next loader's workers starting)")
    mb = min(ok["payload_mb"])
    checks = []
    for nw in sorted(set(ok["num_workers"])):
        f, fs, pre = (_v(ok, m, nw, mb, "epoch_gap_s") for m in ("fork", "forkserver", "forkserver+preload"))
        if min(len(f), len(fs), len(pre)) < 3:
            continue
        first = _v(ok, "forkserver+preload", nw, mb, "time_to_first_batch_s")
        o = both(
            decide_shift(f, pre, at_most(PRELOAD_WITHIN), label="restart forkserver+preload / fork"),
            decide_shift(pre, fs, at_least(1 + MIN_EFFECT), label="restart forkserver / forkserver+preload"),
        )
        checks.append(
            Outcome(
                o.verdict,
                f"w={nw}, {mb:g} MiB, epoch 2: {o.evidence} (preload's first loader: {g(pd.Series(first).median())} s)",
            )
        )
    return all_of(checks, "needs fork, forkserver and forkserver+preload cells with 2 epochs, 3 ok repetitions each")


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


def _needs_default(rows: pd.DataFrame) -> bool:
    return bool(col(rows, "env_default_start_method").notna().any())


def _needs(rows: pd.DataFrame) -> bool:
    return varies(with_workers(rows), "start_method")


_B = f"{1 + MIN_EFFECT:g}x"
QUESTION = Question(
    "start-method",
    ("start_method", "forkserver_preload", "num_workers", "parent_payload_mb"),
    _needs,
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
QUESTION.claims.extend(
    [
        Claim(
            "start-method",
            "fork starts workers fastest",
            f"holds if, at every num_workers x parent_payload_mb, every other start method's time to first batch is "
            f"at least {_B} fork's",
            fork_starts_fastest,
            number=7,
        ),
        Claim(
            "start-method",
            "spawn pays an interpreter start-up per worker",
            f"holds if, at every num_workers x payload, spawn's time to first batch is at least {SPAWN_TTFB_MIN:g}x "
            f"fork's and its workers' CPU seconds per worker at least {SPAWN_CPU_MIN:g}x fork's, and spawn's CPU per "
            f"worker at the most workers is at least {PER_WORKER_KEEP:g}x that at the fewest: a cost paid by every "
            "worker, whatever the core count",
            spawn_pays_startup,
            number=7,
        ),
        Claim(
            "start-method",
            "spawn pickles the dataset object to every worker (fork shares it)",
            f"pickling runs in the main process, once per worker start: holds if, at every num_workers, spawn's "
            f"main-process CPU seconds with the largest payload are at least {_B} those without, fork's rise is at "
            f"most {FORK_RISE_SHARE:g} x spawn's (median), and spawn's rise per worker at the most workers is at least "
            f"{PER_WORKER_KEEP:g}x that at the fewest (workers' USS peaks are reported, not used: a spawned worker's "
            "exit adds a transient as large as the payload)",
            spawn_pickles_dataset,
            number=8,
        ),
        Claim(
            "start-method",
            "spawned workers use more private memory than forked ones (fork shares the parent's pages)",
            f"at the smallest payload, at every num_workers: holds if spawn's workers' peak USS per worker is at "
            f"least {SPAWN_USS_MIN:g}x fork's (the larger payloads are not read: a spawned worker's exit adds a "
            "transient as large as the payload)",
            spawn_uses_more_memory,
            number=9,
        ),
        Claim(
            "start-method",
            "forkserver sits between fork and spawn (time to first batch)",
            f"holds if, at every num_workers x payload, plain forkserver's time to first batch is at least {_B} fork's "
            f"and spawn's at least {_B} forkserver's",
            forkserver_between,
            number=10,
        ),
        Claim(
            "start-method",
            "forkserver_preload starts the next loader's workers about as fast as fork "
            "(~0.3 s vs 0.25 s at 2 workers, Python 3.11)",
            f"epoch 2's worker start (epoch_gap_s) at the smallest payload: holds if, at every num_workers, "
            f"forkserver+preload's is at most {PRELOAD_WITHIN:g}x fork's and plain forkserver's at least {_B} "
            "forkserver+preload's",
            preload_restarts_fast,
            number=10,
            role=EXTENSION,
            setting="with forkserver_preload, restarting the next loader's workers",
        ),
        Claim(
            "start-method",
            "fork is the Linux default start method",
            "the start method multiprocessing (and so a DataLoader given no multiprocessing_context) picks by "
            "default, read in a fresh interpreter of each record's Python on Linux: holds if it is fork for every "
            "Python version recorded (counted facts; Python 3.14 made forkserver the default)",
            fork_is_the_default,
            needs=_needs_default,
            number=11,
        ),
    ]
)

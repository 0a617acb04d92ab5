"""/dev/shm size: does too small a /dev/shm make the loader fail, what does a setting use, and what do crashed
workers leave behind?

Every cell runs with its own /dev/shm of `shm_size_mb` (a tmpfs in a private mount namespace: the use measured
is the cell's alone). Workers hand their batches over through shared memory: up to prefetch_factor batches per
worker, and the main process holds two (loaderbench.measure.private_shm). The `shm-size` study sweeps workers,
prefetch_factor and batch size one at a time around one setting, at sizes from too small to generous; the
`shm-size-leaks` study kills a worker mid-epoch under both sharing strategies and counts what stays in the
cell's /dev/shm once all its processes (torch_shm_manager included) have ended on their own.
"""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.rules.claim import EXTENSION, Question, finite, missing, narrow
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, Outcome, all_of, at_least, decide_shift, fact, g

#: "grows": the median /dev/shm peak at a sweep's highest value at least this times that at its lowest
RISE = 1.5
SHM_KIND = "shm_exhausted"
#: the batches at the /dev/shm peak may fall this far short of workers x prefetch_factor (a probe sample every
#: 0.2 s can miss the fullest moment) or exceed it, beyond the main process's two, by this much
IN_FLIGHT_BELOW = 1.0
IN_FLIGHT_ABOVE = 1.0
SWEEPS = ("num_workers", "prefetch_factor", "batch_size")
_READ = [
    *"status cell_id study workload fault sharing_strategy error_kind error_message".split(),
    *SWEEPS,
    *"shm_size_mb shm_peak_bytes shm_needed_bytes shm_batch_bytes shm_left_segments shm_left_bytes".split(),
]


def mib(n: float) -> str:
    return f"{g(n / 2**20)} MiB"


def sized_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Cells of a suite workload other than the fault workload, each with its own /dev/shm."""
    r = narrow(rows, _READ)
    if r.empty or "shm_size_mb" not in r:
        return r.iloc[0:0]
    return r[r["shm_size_mb"].notna() & (col(r, "workload") != "fault")]


def leak_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Fault-workload cells, each with its own /dev/shm whose leftovers were counted."""
    r = narrow(rows, _READ)
    if r.empty or "shm_size_mb" not in r or "shm_left_segments" not in r:
        return r.iloc[0:0]
    return r[r["shm_size_mb"].notna() & (col(r, "workload") == "fault") & r["shm_left_segments"].notna()]


def _setting(r) -> str:
    return f"w={int(r['num_workers'])}, prefetch {int(r['prefetch_factor'])}, batch {int(r['batch_size'])}"


def cell_states(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: its setting, size, repetitions, how many failed for want of /dev/shm, how many failed
    otherwise, its state (ok: every repetition ok; short: every one failed for /dev/shm; else mixed) and the
    computed size it needs."""
    r = sized_rows(rows)
    out = []
    for cid, c in r.groupby("cell_id", sort=False):
        first = c.iloc[0]
        timeouts = int((c["status"] == "timeout").sum())
        c = c[c["status"] != "timeout"]  # a timeout is neither a run nor a failure for want of /dev/shm
        if c.empty:
            continue
        n = len(c)
        ok = int((c["status"] == "ok").sum())
        short = int((col(c, "error_kind") == SHM_KIND).sum())
        needed = finite(col(c, "shm_needed_bytes"))
        out.append(
            {
                "cell_id": cid,
                **{k: int(first[k]) for k in SWEEPS},
                "shm_size_mb": int(first["shm_size_mb"]),
                "n": n,
                "ok": ok,
                "short": short,
                "other": n - ok - short,
                "timeouts": timeouts,
                "state": "ok" if ok == n else "short" if short == n else "mixed",
                "needed_mb": float(needed.max()) / 2**20 if needed.size else float("nan"),
                "peak_mb": float(finite(ok_rows(c)["shm_peak_bytes"]).max()) / 2**20 if ok else float("nan"),
            }
        )
    return pd.DataFrame(out)


def too_small_fails(rows: pd.DataFrame) -> Outcome:
    """#53: at the smallest size some setting fails for want of /dev/shm, the same setting runs at the largest,
    and at one size a setting with more workers fails where the same setting with fewer runs."""
    s = cell_states(rows)
    if s.empty or s["shm_size_mb"].nunique() < 2:
        return missing("needs cells with their own /dev/shm at two or more shm_size_mb")
    r = sized_rows(rows)
    failed = r[~r["status"].isin(("ok", "timeout"))]
    bus = int(col(failed, "error_message").fillna("").str.contains("bus error", case=False).sum())
    how = f"{int((col(failed, 'error_kind') == SHM_KIND).sum())} repetitions failed for /dev/shm ({bus} by a bus error)"
    if int(s["timeouts"].sum()):
        how += f"; {int(s['timeouts'].sum())} timed out, set aside (neither a run nor a failure for /dev/shm)"
    if (s["other"] > 0).any():
        kinds = sorted(set(col(failed, "error_kind").dropna()) - {SHM_KIND})
        return Outcome(INCONCLUSIVE, f"{how}; others failed otherwise ({', '.join(kinds)}): something else broke")
    small, big = s[s["shm_size_mb"] == s["shm_size_mb"].min()], s[s["shm_size_mb"] == s["shm_size_mb"].max()]
    short_small = small[small["state"] == "short"]
    checks = [
        fact(
            not short_small.empty,
            f"at {int(small['shm_size_mb'].iloc[0])} MiB {len(short_small)} of {len(small)} settings failed in every "
            "repetition",
        ),
        fact(
            bool((big["state"] == "ok").all()),
            f"at {int(big['shm_size_mb'].iloc[0])} MiB {int((big['state'] == 'ok').sum())} of {len(big)} ran in every "
            "repetition",
        ),
    ]
    pairs = []
    for (size, pf, bs), grp in s.groupby(["shm_size_mb", "prefetch_factor", "batch_size"]):
        fits = grp[grp["state"] == "ok"]["num_workers"]
        short = grp[grp["state"] == "short"]["num_workers"]
        if len(fits) and len(short) and short.min() > fits.max():
            pairs.append(
                f"{size} MiB: {int(fits.max())} workers ran, {int(short.min())} failed (prefetch {pf}, batch {bs})"
            )
    checks.append(
        fact(bool(pairs), "; ".join(pairs) if pairs else "no size at which more workers failed where fewer ran")
    )
    out = all_of(checks, "no settings")
    return Outcome(out.verdict, f"{how}; {out.evidence}")


def computed_size_suffices(rows: pd.DataFrame) -> Outcome:
    """The suite's own: the size computed from one batch (prefetch_factor batches per worker, two in the main
    process, 25% margin) is never less than the peak an ok cell used, and every cell given at least it ran."""
    s = cell_states(rows)
    s = s[s["needed_mb"].notna()] if not s.empty else s
    if s.empty:
        return missing("needs cells with their own /dev/shm that measured a batch")
    over = s[(s["state"] == "ok") & (s["peak_mb"] > s["needed_mb"])]
    given = s[s["shm_size_mb"] >= s["needed_mb"]]
    broke = given[given["state"] != "ok"]
    text = (
        f"{len(s) - len(over)} of {len(s)} cells used no more than the computed size"
        + (
            " (over: "
            + "; ".join(f"{_setting(r)}: {g(r['peak_mb'])} > {g(r['needed_mb'])} MiB" for _, r in over.iterrows())
            + ")"
            if len(over)
            else ""
        )
        + f"; {len(given) - len(broke)} of {len(given)} cells given at least it ran"
        + (
            " (failed: " + "; ".join(f"{_setting(r)} at {r['shm_size_mb']} MiB" for _, r in broke.iterrows()) + ")"
            if len(broke)
            else ""
        )
    )
    return fact(over.empty and broke.empty, text)


def shm_use_grows(rows: pd.DataFrame) -> Outcome:
    """#54: at the largest size, the /dev/shm peak rises by RISE from each sweep's lowest value to its highest, the
    other two held at the study's central setting."""
    r = ok_rows(sized_rows(rows))
    if r.empty:
        return missing("needs ok cells with their own /dev/shm")
    r = r[r["shm_size_mb"] == r["shm_size_mb"].max()]
    centre = {k: r[k].mode().iloc[0] for k in SWEEPS}
    checks = []
    for axis in SWEEPS:
        line = r
        for other in SWEEPS:
            if other != axis:
                line = line[line[other] == centre[other]]
        values = sorted(line[axis].unique())
        if len(values) < 2:
            continue
        lo = line[line[axis] == values[0]]["shm_peak_bytes"]
        hi = line[line[axis] == values[-1]]["shm_peak_bytes"]
        checks.append(
            decide_shift(lo, hi, at_least(RISE), label=f"/dev/shm peak {axis} {g(values[-1])} / {g(values[0])}")
        )
    return all_of(checks, "needs a sweep of num_workers, prefetch_factor or batch_size at the largest shm_size_mb")


def prefetch_in_flight(rows: pd.DataFrame) -> pd.DataFrame:
    """At the largest size, per prefetch_factor (the study's central workers and batch size): the batches the
    /dev/shm peak holds (median peak over one measured batch) against workers x prefetch_factor."""
    r = ok_rows(sized_rows(rows))
    if r.empty or "shm_batch_bytes" not in r:
        return pd.DataFrame()
    r = r[r["shm_size_mb"] == r["shm_size_mb"].max()]
    w, bs = r["num_workers"].mode().iloc[0], r["batch_size"].mode().iloc[0]
    line = r[(r["num_workers"] == w) & (r["batch_size"] == bs)]
    out = []
    for pf, c in line.groupby("prefetch_factor", sort=True):
        batch = finite(c["shm_batch_bytes"])
        peak = finite(c["shm_peak_bytes"])
        if batch.size and peak.size:
            out.append(
                {
                    "num_workers": int(w),
                    "prefetch_factor": int(pf),
                    "in_flight": float(pd.Series(peak).median()) / float(batch.max()),
                    "n": int(peak.size),
                }
            )
    return pd.DataFrame(out)


def prefetch_holds_batches(rows: pd.DataFrame) -> Outcome:
    """#45: the batches in /dev/shm at the peak lie between workers x prefetch_factor - IN_FLIGHT_BELOW and that
    plus the main process's two and IN_FLIGHT_ABOVE, at every prefetch_factor (counted from measured bytes)."""
    t = prefetch_in_flight(rows)
    if len(t) < 2:
        return missing("needs ok cells with their own /dev/shm at two or more prefetch_factor")
    checks = []
    for _, r in t.iterrows():
        model = r["num_workers"] * r["prefetch_factor"]
        lo, hi = model - IN_FLIGHT_BELOW, model + 2 + IN_FLIGHT_ABOVE
        checks.append(
            fact(
                lo <= r["in_flight"] <= hi,
                f"w={int(r['num_workers'])}, prefetch {int(r['prefetch_factor'])}: {g(r['in_flight'])} batches at the "
                f"peak (workers x prefetch = {int(model)}; allowed {g(lo)}-{g(hi)})",
            )
        )
    return all_of(checks, "no prefetch_factor measured")


def crashed_workers_leak(rows: pd.DataFrame, fault: str = "kill_self") -> Outcome:
    """#55: segments counted in the cell's /dev/shm after a worker (`fault` kill_self) or the main process
    (kill_main) was killed, once all its processes ended."""
    r = leak_rows(rows)
    crash = r[col(r, "fault").fillna("none") == fault]
    if crash.empty:
        who = "the main process" if fault == "kill_main" else "a worker"
        return missing(f"needs fault-workload cells ({who} killed, fault = {fault}) with their own /dev/shm")
    control = r[col(r, "fault").fillna("none") == "none"]
    parts, leaks, clean = [], [], []
    for strategy, c in crash.groupby("sharing_strategy"):
        left = finite(c["shm_left_segments"])
        leaked = int((left > 0).sum())
        size = finite(c["shm_left_bytes"])
        parts.append(
            f"{strategy}: {leaked} of {len(left)} repetitions left segments (at most "
            f"{int(left.max()) if left.size else 0}, {mib(size.max() if size.size else 0)})"
        )
        if len(left) >= 3 and leaked == len(left):
            leaks.append(strategy)
        elif len(left) >= 3 and leaked == 0:
            clean.append(strategy)
    ctl = finite(control["shm_left_segments"]) if not control.empty else finite([])
    parts.append(f"healthy controls: {int((ctl > 0).sum())} of {len(ctl)} left segments")
    text = "; ".join(parts)
    if leaks and (ctl == 0).all():
        return Outcome(HOLDS, text)
    if len(clean) == crash["sharing_strategy"].nunique():
        return Outcome(FAILS, text + ": torch's own clean-up removed what the killed worker left")
    return Outcome(INCONCLUSIVE, text)


_needs_sized = lambda rows: not sized_rows(rows).empty
_needs_leaks = lambda rows: not leak_rows(rows).empty


QUESTION = Question(
    "shm-size",
    (*SWEEPS, "shm_size_mb", "fault", "sharing_strategy"),
    lambda rows: not sized_rows(rows).empty or not leak_rows(rows).empty,
    figure="loaderbench.analysis.figures.questions.shm_size:shm_peak_by_setting",
)
QUESTION.add(
    "too little /dev/shm makes the loader fail; too many workers exhaust it",
    "every cell has its own /dev/shm; a cell is short when every repetition failed for want of /dev/shm "
    f"({SHM_KIND}), ok when every one ran; holds if at the smallest size some setting is short, at the largest "
    "every setting is ok, and at some size a setting with more workers is short where the same one with fewer "
    "is ok; a repetition that timed out is set aside; inconclusive if one failed for another reason",
    too_small_fails,
    needs=_needs_sized,
    number=53,
)
QUESTION.add(
    "the size computed from one batch suffices (prefetch_factor batches per worker, two in the main process, "
    "25% margin)",
    "holds if no ok cell's /dev/shm peak exceeds the computed size and every cell given at least that size ran "
    "in every repetition (counted facts)",
    computed_size_suffices,
    needs=_needs_sized,
)
QUESTION.add(
    "fewer workers, a lower prefetch_factor or smaller batches cut /dev/shm use",
    f"at the largest size, each of num_workers, prefetch_factor and batch_size swept with the other two at the "
    f"central setting: the median /dev/shm peak at the highest value at least {RISE:g}x that at the lowest",
    shm_use_grows,
    needs=_needs_sized,
    number=54,
)
QUESTION.add(
    "each worker keeps prefetch_factor batches in flight",
    "at the largest size, per prefetch_factor (central workers and batch size): the median /dev/shm peak over "
    f"one measured batch lies between workers x prefetch_factor - {g(IN_FLIGHT_BELOW)} and workers x "
    f"prefetch_factor + 2 (the main process's) + {g(IN_FLIGHT_ABOVE)}, at every prefetch_factor",
    prefetch_holds_batches,
    needs=_needs_sized,
    number=45,
)
QUESTION.add(
    "crashed workers leak /dev/shm segments",
    "a worker killed mid-epoch (the fault workload), per sharing strategy, counted in the cell's own /dev/shm "
    "once all its processes ended on their own: holds if under some strategy every repetition (3 or more) "
    "left a segment and no healthy control did; does not hold if under every strategy none did",
    crashed_workers_leak,
    needs=_needs_leaks,
    number=55,
    study="shm-size-leaks",
)
QUESTION.add(
    "a crashed main process leaks /dev/shm segments",
    "as above with the main process killed by one of its workers mid-epoch (fault = kill_main): holds if "
    "under some strategy every repetition (3 or more) left a segment and no healthy control did; does not "
    "hold if under every strategy none did",
    lambda rows: crashed_workers_leak(rows, "kill_main"),
    needs=_needs_leaks,
    number=55,
    study="shm-size-leaks",
    role=EXTENSION,
    setting="when the main process crashes instead of a worker",
)

"""The seeds' claims, each put to the test by one study and decided from its records by a stated rule.

A verdict is never written by hand: every rule below reads the tidy table (analysis.records), computes
medians and 95% intervals (analysis.stats), and returns one of

    "holds"                           the data show what the claim says, by the rule's criteria
    "does not hold here"              the data needed are there and do not show it (on this machine)
    "not measurable on this machine"  the data needed are absent: no records of the study, fewer than 3
                                      ok repetitions on a side, or a feature this machine cannot exercise
                                      (pin_memory without a GPU, an open-file limit never approached)

with the numbers it was decided on (the evidence).

Statistics. The studies run 3 repetitions per cell. With 3 against 3 the smallest two-sided Mann-Whitney
p-value is 0.1, so no rule asks for p < 0.05. A difference counts when the two cells' 95% bootstrap
intervals of the median do not overlap ("separated": with 3 repetitions the interval is the range, so
every repetition of one is below every repetition of the other; the one-sided exact probability of that
under no difference is 1/20) AND the medians differ by a stated minimum effect. Rules that need only a
median (a ratio against a published number) say so.

Pure functions on the tidy table; no I/O except `write_claims`, no figures, no torch.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from analysis.stats import MIN_N, compare, median_ci

HOLDS = "holds"
FAILS = "does not hold here"
NOT_MEASURABLE = "not measurable on this machine"
VERDICTS = (HOLDS, FAILS, NOT_MEASURABLE)
COLUMNS = ["study", "claim", "rule", "evidence", "verdict"]

#: The questions of issue 4, each answered by the study file of the same name in suite/studies/.
QUESTIONS = ("start-method", "cow-memory", "persistence", "sharing", "ladder", "oversubscription", "rng", "in-order")

SEP = ("95% intervals of the medians do not overlap (3 repetitions: every repetition of one below every "
       "repetition of the other)")
MIB = 2**20


# --------------------------------------------------------------------------------------------------------
# small statistics helpers


@dataclass(frozen=True)
class Est:
    """Median and 95% bootstrap interval of one cell's (or group's) ok repetitions."""

    n: int
    median: float
    lo: float
    hi: float

    @property
    def ok(self) -> bool:
        return self.n >= MIN_N

    def fmt(self, unit: str = "", scale: float = 1.0, digits: int = 3) -> str:
        if self.n == 0:
            return "no data"
        med = _g(self.median / scale, digits)
        if not self.ok:
            return f"{med}{unit} (n={self.n})"
        return f"{med}{unit} [{_g(self.lo / scale, digits)}-{_g(self.hi / scale, digits)}]"


def _g(x: float, digits: int = 3) -> str:
    if x is None or not np.isfinite(x):
        return "nan"
    return f"{x:.{digits}g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def est(values) -> Est:
    x = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return Est(0, math.nan, math.nan, math.nan)
    lo, hi, _ = median_ci(x)
    return Est(int(x.size), float(np.median(x)), lo, hi)


def below(a: Est, b: Est) -> bool:
    """a is below b with separated intervals (both with at least 3 repetitions)."""
    return a.ok and b.ok and a.hi < b.lo


def ok_only(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "ok"] if "status" in rows else rows


def pick(rows: pd.DataFrame, **eq) -> pd.DataFrame:
    """Rows whose columns equal the given values (None matches a missing value; a missing column matches
    only None)."""
    mask = pd.Series(True, index=rows.index)
    for col, want in eq.items():
        if col not in rows:
            if want is not None:
                return rows.iloc[0:0]
            continue
        c = rows[col]
        if want is None:
            mask &= c.isna()
        else:
            mask &= c.map(lambda v, w=want: _same(v, w)).astype(bool)
    return rows[mask]


def is_true(v) -> bool:
    """A boolean axis value that is true (bool, numpy bool, or 1.0 after a round trip through a float column)."""
    return v is True or v is np.True_ or (isinstance(v, (int, float, np.integer, np.floating)) and not
                                          isinstance(v, bool) and v == 1)


def _same(v, w) -> bool:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    if isinstance(w, bool) or isinstance(v, (bool, np.bool_)):
        return is_true(v) == bool(w) if isinstance(v, (bool, np.bool_, int, float, np.integer, np.floating)) else False
    if isinstance(w, (int, float)) and isinstance(v, (int, float, np.integer, np.floating)):
        return float(v) == float(w)
    return v == w


def col(rows: pd.DataFrame, name: str, default=None) -> pd.Series:
    return rows[name] if name in rows else pd.Series(default, index=rows.index, dtype=object)


def values_of(rows: pd.DataFrame, name: str) -> list:
    if name not in rows:
        return []
    return sorted(v for v in rows[name].dropna().unique())


def env_one(rows: pd.DataFrame, name: str) -> str:
    c = f"env_{name}"
    if c not in rows or rows[c].dropna().empty:
        return "?"
    vals = rows[c].dropna().astype(str).unique()
    return vals[0] if len(vals) == 1 else "/".join(sorted(vals))


@dataclass(frozen=True)
class Outcome:
    verdict: str
    evidence: str


def _missing(what: str) -> Outcome:
    return Outcome(NOT_MEASURABLE, what)


def _all(checks: list[tuple[bool, str]], empty: str) -> Outcome:
    """HOLDS when every check passed, FAILS when one did not; NOT_MEASURABLE when there was nothing to check."""
    if not checks:
        return _missing(empty)
    verdict = HOLDS if all(ok for ok, _ in checks) else FAILS
    return Outcome(verdict, "; ".join(text for _, text in checks))


# --------------------------------------------------------------------------------------------------------
# 1. start-method


def start_method_label(rows: pd.DataFrame) -> pd.Series:
    """fork | spawn | forkserver | forkserver+preload."""
    lab = col(rows, "start_method").astype(object).copy()
    pre = col(rows, "forkserver_preload").map(is_true)
    lab[(lab == "forkserver") & pre] = "forkserver+preload"
    return lab


def _sm(rows: pd.DataFrame) -> pd.DataFrame:
    ok = ok_only(rows).copy()
    ok["method"] = start_method_label(ok)
    ok["payload_mb"] = pd.to_numeric(col(ok, "parent_payload_mb", 0.0), errors="coerce").fillna(0.0)
    return ok[ok["num_workers"] > 0]


def _sm_combos(ok: pd.DataFrame) -> list[tuple[int, float]]:
    return sorted({(int(n), float(p)) for n, p in zip(ok["num_workers"], ok["payload_mb"])})


def _sm_est(ok, method, nw, mb, metric) -> Est:
    return est(ok[(ok["method"] == method) & (ok["num_workers"] == nw) & (ok["payload_mb"] == mb)][metric])


def fork_starts_fastest(rows: pd.DataFrame) -> Outcome:
    ok = _sm(rows)
    checks = []
    for nw, mb in _sm_combos(ok):
        e = {m: _sm_est(ok, m, nw, mb, "time_to_first_batch_s") for m in ("fork", "spawn", "forkserver",
                                                                           "forkserver+preload")}
        if not (e["fork"].ok and (e["spawn"].ok or e["forkserver"].ok)):
            continue
        others = [m for m in ("spawn", "forkserver", "forkserver+preload") if e[m].n]
        lowest = all(e["fork"].median < e[m].median for m in others)
        sep = all(below(e["fork"], e[m]) for m in ("spawn", "forkserver") if e[m].ok)
        text = f"w={nw}, payload {mb:g} MiB: " + ", ".join(f"{m} {e[m].fmt(' s')}" for m in e if e[m].n)
        checks.append((lowest and sep, text))
    return _all(checks, "needs fork and spawn (or forkserver) cells with 3 ok repetitions each")


def spawn_pays_startup(rows: pd.DataFrame) -> Outcome:
    ok = _sm(rows)
    ok = ok.assign(cpu_per_worker=pd.to_numeric(col(ok, "cpu_workers_s"), errors="coerce") / ok["num_workers"])
    checks = []
    for nw, mb in _sm_combos(ok):
        f, s = (_sm_est(ok, m, nw, mb, "time_to_first_batch_s") for m in ("fork", "spawn"))
        fc, sc = (_sm_est(ok, m, nw, mb, "cpu_per_worker") for m in ("fork", "spawn"))
        if not (f.ok and s.ok and fc.ok and sc.ok):
            continue
        ratio = s.median / f.median if f.median > 0 else math.inf
        cratio = sc.median / fc.median if fc.median > 0 else math.inf
        checks.append((ratio >= 2 and below(f, s) and cratio >= 5 and below(fc, sc),
                       f"w={nw}, {mb:g} MiB: first batch spawn {s.fmt(' s')} = {_g(ratio)}x fork {f.fmt(' s')}; "
                       f"workers' CPU per worker spawn {sc.fmt(' s')} vs fork {fc.fmt(' s')}"))
    ns = sorted({n for n, _ in _sm_combos(ok)})
    if checks and len(ns) >= 2:
        for mb in sorted({p for _, p in _sm_combos(ok)}):
            lo, hi = (_sm_est(ok, "spawn", n, mb, "cpu_per_worker") for n in (ns[0], ns[-1]))
            if lo.ok and hi.ok:
                checks.append((hi.median >= 0.75 * lo.median,
                               f"spawn, {mb:g} MiB, workers' CPU per worker: w={ns[0]} {lo.fmt(' s')} -> "
                               f"w={ns[-1]} {hi.fmt(' s')}"))
    return _all(checks, "needs fork and spawn cells with 3 ok repetitions each")


def spawn_pickles_dataset(rows: pd.DataFrame) -> Outcome:
    """Pickling happens in the main process, once per worker start: its CPU time rises with the payload, by as
    much again for every worker. The workers' USS peaks are reported, not decided on: a spawned worker's exit
    (interpreter teardown) was seen to add a transient as large as the payload."""
    ok = _sm(rows)
    payloads = sorted(set(ok["payload_mb"]))
    if len(payloads) < 2 or payloads[0] != 0:
        return _missing("needs cells with parent_payload_mb = 0 and > 0")
    big = payloads[-1]
    rise: dict[tuple[str, int], float] = {}
    checks = []
    for nw in sorted(set(ok["num_workers"])):
        c = {m: [_sm_est(ok, m, nw, p, "cpu_main_s") for p in (0.0, big)] for m in ("spawn", "fork")}
        if not all(e.ok for pair in c.values() for e in pair):
            continue
        for m, (e0, e1) in c.items():
            rise[(m, nw)] = e1.median - e0.median
        u0, u1 = (_sm_est(ok, "spawn", nw, p, "workers_uss_peak_bytes") for p in (0.0, big))
        good = below(*c["spawn"]) and rise[("fork", nw)] < 0.25 * rise[("spawn", nw)]
        checks.append((good, f"w={nw}, main-process CPU with {big:g} MiB payload vs none: spawn "
                             f"{c['spawn'][0].fmt(' s')} -> {c['spawn'][1].fmt(' s')} (+{_g(rise[('spawn', nw)])} s), "
                             f"fork +{_g(rise[('fork', nw)])} s; spawn workers' USS peak per worker "
                             f"{_g(u0.median / MIB / nw)} -> {_g(u1.median / MIB / nw)} MiB"))
    ns = sorted(n for m, n in rise if m == "spawn")
    if len(ns) >= 2:
        lo, hi = rise[("spawn", ns[0])] / ns[0], rise[("spawn", ns[-1])] / ns[-1]
        checks.append((hi >= 0.75 * lo, f"spawn's rise per worker: w={ns[0]} {_g(lo)} s, w={ns[-1]} {_g(hi)} s"))
    return _all(checks, "needs spawn and fork cells with and without payload, 3 ok repetitions each")


def forkserver_between(rows: pd.DataFrame) -> Outcome:
    ok = _sm(rows)
    checks = []
    for nw, mb in _sm_combos(ok):
        f, fs, s = (_sm_est(ok, m, nw, mb, "time_to_first_batch_s") for m in ("fork", "forkserver", "spawn"))
        if not (f.ok and fs.ok and s.ok):
            continue
        checks.append((below(f, fs) and below(fs, s),
                       f"w={nw}, {mb:g} MiB: fork {f.fmt(' s')}, forkserver {fs.fmt(' s')}, spawn {s.fmt(' s')}"))
    return _all(checks, "needs fork, forkserver and spawn cells with 3 ok repetitions each")


def preload_restarts_fast(rows: pd.DataFrame) -> Outcome:
    ok = _sm(rows)
    if "epoch_gap_s" not in ok or ok["epoch_gap_s"].dropna().empty:
        return _missing("needs 2 or more epochs (epoch_gap_s: the next loader's workers starting)")
    mb = min(ok["payload_mb"]) if len(ok) else 0.0
    checks = []
    for nw in sorted(set(ok["num_workers"])):
        f, fs, pre = (_sm_est(ok, m, nw, mb, "epoch_gap_s") for m in ("fork", "forkserver", "forkserver+preload"))
        if not (f.ok and fs.ok and pre.ok):
            continue
        first = _sm_est(ok, "forkserver+preload", nw, mb, "time_to_first_batch_s")
        checks.append((pre.median <= f.median + 0.5 and below(pre, fs),
                       f"w={nw}, {mb:g} MiB, epoch-2 restart: forkserver+preload {pre.fmt(' s')}, fork {f.fmt(' s')}, "
                       f"forkserver {fs.fmt(' s')} (preload's first loader: {first.fmt(' s')})"))
    return _all(checks, "needs fork, forkserver and forkserver+preload cells with 2 epochs, 3 ok repetitions each")


# --------------------------------------------------------------------------------------------------------
# 2. cow-memory


def timeline_growth(timeline, num_workers: int) -> tuple[float, float]:
    """(growth, peak) of the workers' summed USS in bytes, over the probe samples in which all workers were
    alive: the highest such sample minus the first, and the highest. (The highest, not the last: the last
    may catch a worker unmapping its memory on the way out.) NaN with fewer than 3 such samples."""
    if isinstance(timeline, str):
        try:
            timeline = json.loads(timeline)
        except ValueError:
            return math.nan, math.nan
    if not isinstance(timeline, list):
        return math.nan, math.nan
    alive = [s for s in timeline if isinstance(s, list) and len(s) >= 6 and s[1] >= 1 + num_workers]
    if len(alive) < 3:
        return math.nan, math.nan
    peak = max(s[5] for s in alive)
    return float(peak - alive[0][5]), float(peak)


def with_growth(rows: pd.DataFrame) -> pd.DataFrame:
    """ok rows with `growth_mib_per_worker` and `end_mib_per_worker` (workers' USS growth and peak, per worker,
    from memory_timeline)."""
    ok = ok_only(rows)
    ok = ok[ok["num_workers"] > 0].copy()
    g = [timeline_growth(t, int(n)) for t, n in zip(col(ok, "memory_timeline"), ok["num_workers"])]
    ok["growth_mib_per_worker"] = [a / MIB / n for (a, _), n in zip(g, ok["num_workers"])]
    ok["end_mib_per_worker"] = [b / MIB / n for (_, b), n in zip(g, ok["num_workers"])]
    return ok


GROW_MIB = 10.0  # "copies what it reads": the run reads ~400k index entries, about 35 MiB of str objects
FLAT_MIB = 4.0   # "does not grow": below this per worker (torch's own first allocations fit in it)
# numpy_bytes is the control: the same worker, loop and samples, with an index that is one object. Growth it
# shows too (e.g. a pass of Python's cyclic GC over the parent's objects, which writes to every tracked object's
# header) is not the index's; the index's share is a backing's growth minus the control's.


def _cow(rows, backing, nw, value: str = "growth_mib_per_worker") -> Est:
    ok = rows[(col(rows, "index_backing") == backing) & (rows["num_workers"] == nw) &
              (col(rows, "start_method") == "fork")]
    return est(ok[value])


def cow_grows(backing: str) -> Callable[[pd.DataFrame], Outcome]:
    def rule(rows: pd.DataFrame) -> Outcome:
        ok = with_growth(rows)
        checks = []
        for nw in sorted(set(ok["num_workers"])):
            g, ctl = _cow(ok, backing, nw), _cow(ok, "numpy_bytes", nw)
            if not (g.ok and ctl.ok):
                continue
            checks.append((g.median - ctl.median >= GROW_MIB and below(ctl, g),
                           f"fork, w={nw}: {backing} +{g.fmt(' MiB')}/worker vs numpy_bytes (control) "
                           f"+{ctl.fmt(' MiB')}/worker"))
        return _all(checks, f"needs fork cells of {backing} and numpy_bytes with a memory timeline, 3 ok repetitions")
    return rule


def cow_flat(rows: pd.DataFrame) -> Outcome:
    ok = with_growth(rows)
    checks = []
    for nw in sorted(set(ok["num_workers"])):
        ref, nb, ar = (_cow(ok, b, nw) for b in ("list_str", "numpy_bytes", "arrow"))
        if not (nb.ok and ar.ok):
            continue
        flat = nb.median < FLAT_MIB and ar.median < FLAT_MIB
        common = (abs(ar.median - nb.median) < FLAT_MIB and ref.ok and ref.median - max(nb.median, ar.median)
                  >= GROW_MIB)
        text = (f"fork, w={nw}: numpy_bytes +{nb.fmt(' MiB')}/worker, arrow +{ar.fmt(' MiB')}/worker, list_str "
                f"+{ref.fmt(' MiB')}/worker")
        if not flat and common:
            text += " (growth common to both, not the index's)"
        checks.append((flat or common, text))
    return _all(checks, "needs fork cells of numpy_bytes and arrow with a memory timeline, 3 ok repetitions")


def cow_grows_with_workers(rows: pd.DataFrame) -> Outcome:
    ok = with_growth(rows)
    ns = sorted(set(pick(ok, start_method="fork", index_backing="list_str")["num_workers"]))
    if len(ns) < 2:
        return _missing("needs fork list_str cells at two or more num_workers")
    tot = {}
    for n in (ns[0], ns[-1]):
        ctl = _cow(ok, "numpy_bytes", n)
        if not ctl.ok:
            return _missing(f"needs the numpy_bytes control at w={n} (3 ok repetitions; has {ctl.n})")
        rows_n = pick(ok, start_method="fork", index_backing="list_str", num_workers=n)
        tot[n] = est((rows_n["growth_mib_per_worker"] - ctl.median) * n)
    lo, hi = tot[ns[0]], tot[ns[-1]]
    if not (lo.ok and hi.ok):
        return _missing(f"fewer than 3 ok repetitions (w={ns[0]}: {lo.n}, w={ns[-1]}: {hi.n})")
    good = hi.median >= 2 * lo.median and below(lo, hi) and hi.median >= GROW_MIB * ns[-1]
    return Outcome(HOLDS if good else FAILS,
                   f"fork list_str, all workers' USS growth beyond the numpy_bytes control: w={ns[0]} "
                   f"+{lo.fmt(' MiB')}, w={ns[-1]} +{hi.fmt(' MiB')}")


# --------------------------------------------------------------------------------------------------------
# 3. persistence


def _pers(rows):
    ok = ok_only(rows)
    ok = ok[ok["num_workers"] > 0]
    if ok.empty:
        return ok, 0
    top = int(ok["epochs"].max())
    return ok[ok["epochs"] == top], top


def persistent_removes_gap(start_method: str) -> Callable[[pd.DataFrame], Outcome]:
    def rule(rows: pd.DataFrame) -> Outcome:
        ok, epochs = _pers(rows)
        if epochs < 2:
            return _missing("needs cells with 2 or more epochs")
        off, on = (est(pick(ok, start_method=start_method, persistent_workers=p)["epoch_gap_s"]) for p in (False, True))
        if not (off.ok and on.ok):
            return _missing(f"needs persistent and non-persistent {start_method} cells with 3 ok repetitions each "
                            f"(has {off.n} and {on.n})")
        return Outcome(HOLDS if on.median <= 0.5 * off.median and below(on, off) else FAILS,
                       f"{start_method}, {epochs} epochs: epoch-boundary gap {off.fmt(' s')} restarting workers -> "
                       f"{on.fmt(' s')} persistent")
    return rule


def gap_grows_with_spawn(rows: pd.DataFrame) -> Outcome:
    ok, epochs = _pers(rows)
    if epochs < 2:
        return _missing("needs cells with 2 or more epochs")
    f, s = (est(pick(ok, start_method=m, persistent_workers=False)["epoch_gap_s"]) for m in ("fork", "spawn"))
    if not (f.ok and s.ok):
        return _missing(f"needs non-persistent fork and spawn cells (ok repetitions: fork {f.n}, spawn {s.n})")
    fs = est(pick(ok, start_method="forkserver", persistent_workers=False)["epoch_gap_s"])
    extra = f", forkserver {fs.fmt(' s')}" if fs.n else ""
    ratio = s.median / f.median if f.median > 0 else math.inf
    return Outcome(HOLDS if ratio >= 2 and below(f, s) else FAILS,
                   f"epoch gap without persistent workers: spawn {s.fmt(' s')} = {_g(ratio)}x fork "
                   f"{f.fmt(' s')}{extra}")


def persistent_speeds_up_run(rows: pd.DataFrame) -> Outcome:
    ok, epochs = _pers(rows)
    if epochs < 2:
        return _missing("needs cells with 2 or more epochs")
    parts, verdict = [], None
    for sm in values_of(ok, "start_method"):
        on, off = (pick(ok, start_method=sm, persistent_workers=p)["total_s"] for p in (True, False))
        c = compare(on, off)  # ratio = median(off) / median(on): the speed-up of persistent workers
        if c.verdict == "not enough data":
            continue
        parts.append(f"{sm}: {_g(c.ratio)}x [{_g(c.ci_low)}-{_g(c.ci_high)}]")
        if sm == "fork":
            verdict = HOLDS if c.ratio >= 1.05 and c.ci_low > 1 else FAILS
    if verdict is None:
        return _missing("needs persistent and non-persistent fork cells with 3 ok repetitions each")
    return Outcome(verdict, f"whole-run speed-up over {epochs} epochs (total_s non-persistent / persistent): "
                            + ", ".join(parts) + "; tutorial: 1.13x over 10 epochs (GPU, its model)")


# --------------------------------------------------------------------------------------------------------
# 4. sharing


def _limits(rows: pd.DataFrame) -> pd.Series:
    """The open-file limit each cell ran under: the ulimit_nofile axis when set, else what the record saw."""
    axis = pd.to_numeric(col(rows, "ulimit_nofile"), errors="coerce")
    seen = pd.to_numeric(col(rows, "env_ulimit_nofile"), errors="coerce")
    return axis.fillna(seen)


def _fd_exhausted(rows: pd.DataFrame) -> pd.Series:
    kind = col(rows, "error_kind").fillna("").astype(str)
    msg = col(rows, "error_message").fillna("").astype(str).str.lower()
    return (rows["status"] != "ok") & ((kind == "too_many_open_files") | msg.str.contains("too many open files")
                                       | msg.str.contains("ancdata"))


def _cfg(r) -> str:
    return f"w={int(r['num_workers'])}, {int(r['tensors_per_sample'])} tensors/sample, ulimit -n {_g(r['limit'], 6)}"


def fd_runs_out(rows: pd.DataFrame) -> Outcome:
    if rows.empty or "sharing_strategy" not in rows:
        return _missing("no records")
    rows = rows.assign(limit=_limits(rows), exhausted=_fd_exhausted(rows))
    fd = rows[rows["sharing_strategy"] == "file_descriptor"]
    fs = rows[rows["sharing_strategy"] == "file_system"]
    keys = ["num_workers", "tensors_per_sample", "limit"]
    fd_bad = fd[fd["exhausted"]]
    fs_bad = fs[fs["exhausted"]]
    text = (f"file_descriptor: {len(fd_bad)} of {len(fd)} repetitions ran out of descriptors"
            + (" (" + "; ".join(sorted({_cfg(r) for _, r in fd_bad.iterrows()})) + ")" if len(fd_bad) else "")
            + f"; file_system: {len(fs_bad)} of {len(fs)}")
    if len(fs_bad):
        return Outcome(FAILS, text + " (file_system ran out too)")
    if len(fd_bad):
        twins = fs.merge(fd_bad[keys].drop_duplicates(), on=keys)
        if (twins["status"] == "ok").sum() == 0:
            return _missing(text + "; no ok file_system cell at the same workers, tensors and limit to compare")
        return Outcome(HOLDS, text + f"; the same configurations under file_system: {(twins['status'] == 'ok').sum()} "
                                     f"of {len(twins)} ok")
    okfd = ok_only(fd)
    if okfd.empty:
        return _missing(text + "; no ok file_descriptor cell")
    frac = (okfd["open_fds_peak"] / okfd["limit"]).max()
    if frac >= 0.8:
        return Outcome(FAILS, text + f"; file_descriptor used up to {_g(100 * frac)}% of the limit without failing")
    return _missing(text + f"; descriptors in use never approached the limit (at most {_g(100 * frac)}% of it)")


def _sharing_ok(rows):
    ok = ok_only(rows).assign(limit=_limits(ok_only(rows)))
    return ok[ok["limit"] == ok["limit"].max()] if len(ok) else ok


def fd_per_tensor(rows: pd.DataFrame) -> Outcome:
    ok = _sharing_ok(rows)
    ts = values_of(ok, "tensors_per_sample")
    if len(ts) < 2:
        return _missing("needs ok cells at two or more tensors_per_sample")
    checks = []
    for nw in values_of(ok, "num_workers"):
        e = {(s, t): est(pick(ok, sharing_strategy=s, num_workers=nw, tensors_per_sample=t)["open_fds_peak"])
             for s in ("file_descriptor", "file_system") for t in (ts[0], ts[-1])}
        if not all(v.ok for v in e.values()):
            continue
        fd1, fdT = e[("file_descriptor", ts[0])], e[("file_descriptor", ts[-1])]
        fs1, fsT = e[("file_system", ts[0])], e[("file_system", ts[-1])]
        good = fdT.median >= 2 * fd1.median and below(fd1, fdT) and fsT.median <= 1.5 * fs1.median
        checks.append((good, f"w={nw}, peak open fds {ts[0]:g} -> {ts[-1]:g} tensors: file_descriptor "
                             f"{fd1.fmt()} -> {fdT.fmt()}, file_system {fs1.fmt()} -> {fsT.fmt()}"))
    return _all(checks, "needs ok cells of both strategies at the fewest and most tensors per sample")


def per_tensor_cost_differs(rows: pd.DataFrame) -> Outcome:
    ok = _sharing_ok(rows)
    ts = values_of(ok, "tensors_per_sample")
    if len(ts) < 2:
        return _missing("needs ok cells at two or more tensors_per_sample")
    t1, tn = ts[0], ts[-1]
    checks = []
    for nw in values_of(ok, "num_workers"):
        e = {(s, t): est(pick(ok, sharing_strategy=s, num_workers=nw, tensors_per_sample=t)["samples_per_s"])
             for s in ("file_descriptor", "file_system") for t in (t1, tn)}
        if not all(v.ok for v in e.values()):
            continue
        cost = {s: (1 / e[(s, tn)].median - 1 / e[(s, t1)].median) / (tn - t1) * 1e6 for s in ("file_descriptor",
                                                                                               "file_system")}
        a, b = e[("file_descriptor", tn)], e[("file_system", tn)]
        diff = abs(a.median / b.median - 1)
        checks.append((diff >= 0.10 and (below(a, b) or below(b, a)),
                       f"w={nw}, {tn:g} tensors/sample: file_descriptor {a.fmt(' samples/s')} vs file_system "
                       f"{b.fmt(' samples/s')}; extra cost per tensor: file_descriptor "
                       f"{_g(cost['file_descriptor'])} us,"
                       f" file_system {_g(cost['file_system'])} us"))
    if not checks:
        return _missing("needs ok cells of both strategies at the fewest and most tensors per sample")
    # "differs" is shown by one configuration where it clearly does; the others are reported, not required
    return Outcome(HOLDS if any(ok for ok, _ in checks) else FAILS, "; ".join(t for _, t in checks))


# --------------------------------------------------------------------------------------------------------
# 5. ladder

RUNGS = ("baseline", "+workers", "+pin_memory", "+persistent", "+prefetcher", "+batched")
#: The tutorial's published cumulative speed-ups over its baseline (seeds 001/002, on a GPU).
PUBLISHED = {"+workers": 3.30, "+pin_memory": 3.33, "+persistent": 3.76, "+prefetcher": 3.77, "+batched": 11.55}
GPU_ONLY = ("+pin_memory", "+prefetcher")


def ladder_rung(rows: pd.DataFrame) -> pd.Series:
    def one(r) -> str:
        if not r.get("num_workers"):
            return "baseline"
        for name, key in (("+batched", "batched"), ("+prefetcher", "prefetcher"), ("+persistent", "persistent_workers"),
                          ("+pin_memory", "pin_memory")):
            if is_true(r.get(key)):
                return name
        return "+workers"
    return rows.apply(one, axis=1) if len(rows) else pd.Series(dtype=object)


def _ladder(rows):
    ok = ok_only(rows).copy()
    if not ok.empty:
        ok["rung"] = ladder_rung(ok)
    return ok


def _on_gpu(rows) -> bool:
    return bool((col(rows, "consumer") == "gpu").any() or col(rows, "consumer_device").astype(str).str.startswith(
        "cuda").any())


def ladder_matches(rung: str) -> Callable[[pd.DataFrame], Outcome]:
    published = PUBLISHED[rung]

    def rule(rows: pd.DataFrame) -> Outcome:
        ok = _ladder(rows)
        if ok.empty:
            return _missing("no ok records")
        base, this = ok[ok["rung"] == "baseline"], ok[ok["rung"] == rung]
        c = compare(base["end_to_end_samples_per_s"], this["end_to_end_samples_per_s"])
        if c.verdict == "not enough data":
            return _missing(f"fewer than 3 ok repetitions (baseline {c.n_a}, {rung} {c.n_b})")
        ours = f"ours {_g(c.ratio)}x [{_g(c.ci_low)}-{_g(c.ci_high)}] vs published {published}x"
        if not _on_gpu(this):
            device = ", ".join(sorted(set(col(this, "consumer").dropna().astype(str)))) or "?"
            why = ("pin_memory was not in effect (no GPU)" if rung == "+pin_memory" else
                   "the CUDA-stream prefetcher needs a GPU" if rung == "+prefetcher" else
                   "the published numbers are for the model on a GPU")
            return _missing(f"{ours}; consumer ran on {device}: {why}")
        good = published / 1.25 <= c.ratio <= published * 1.25
        return Outcome(HOLDS if good else FAILS, ours)
    return rule


def ladder_step_helps(rung: str, previous: str) -> Callable[[pd.DataFrame], Outcome]:
    def rule(rows: pd.DataFrame) -> Outcome:
        ok = _ladder(rows)
        if ok.empty:
            return _missing("no ok records")
        a, b = ok[ok["rung"] == previous], ok[ok["rung"] == rung]
        c = compare(a["end_to_end_samples_per_s"], b["end_to_end_samples_per_s"])
        if c.verdict == "not enough data":
            return _missing(f"fewer than 3 ok repetitions ({previous} {c.n_a}, {rung} {c.n_b})")
        pa, pb = est(a["end_to_end_samples_per_s"]), est(b["end_to_end_samples_per_s"])
        pub = PUBLISHED[rung] / PUBLISHED.get(previous, 1.0)
        good = c.ratio >= 1.05 and c.ci_low > 1
        device = ", ".join(sorted(set(col(b, "consumer").dropna().astype(str)))) or "?"
        return Outcome(HOLDS if good else FAILS,
                       f"{previous} {pa.fmt(' samples/s')} -> {rung} {pb.fmt(' samples/s')}: {_g(c.ratio)}x "
                       f"[{_g(c.ci_low)}-{_g(c.ci_high)}] (tutorial: {_g(pub)}x; model step on {device})")
    return rule


# --------------------------------------------------------------------------------------------------------
# 6. oversubscription


def _curves(rows):
    ok = ok_only(rows)
    ok = ok[(ok["num_workers"] > 0) & (pd.to_numeric(col(ok, "ranks", 1), errors="coerce").fillna(1) == 1)]
    for (w, cores), g in ok.groupby(["workload", "cores"]):
        meds = {int(n): est(gg["samples_per_s"]) for n, gg in g.groupby("num_workers")}
        meds = {n: e for n, e in meds.items() if e.ok}
        if len(meds) >= 2:
            yield w, int(cores), meds


NOISY = 0.25  # median over cells of (max - min) / median of the repetitions' throughput


def _too_noisy(rows: pd.DataFrame, metric: str = "samples_per_s") -> str | None:
    """CPU-bound scaling can only be judged on cores the cells have to themselves: when other work competes for
    them, more workers win a bigger share of the machine and repetitions scatter. None when the spread is fine,
    else why not."""
    ok = ok_only(rows)
    spreads = []
    for _, g in ok.groupby("cell_id"):
        v = pd.to_numeric(g[metric], errors="coerce").dropna()
        if len(v) >= MIN_N and v.median() > 0:
            spreads.append((v.max() - v.min()) / v.median())
    if spreads and float(np.median(spreads)) > NOISY:
        return (f"repetitions scatter by {_g(100 * float(np.median(spreads)))}% of the median (median over "
                f"{len(spreads)} cells; at most {_g(100 * NOISY)}% to judge): other work competes for the cores")
    return None


def _quiet(rule: Callable[[pd.DataFrame], Outcome],
           metric: str = "samples_per_s") -> Callable[[pd.DataFrame], Outcome]:
    def checked(rows: pd.DataFrame) -> Outcome:
        out = rule(rows)
        noise = _too_noisy(rows, metric)
        if noise and out.verdict != NOT_MEASURABLE:
            return Outcome(NOT_MEASURABLE, f"{noise}; {out.evidence}")
        return out
    checked.__name__ = rule.__name__
    return checked


def peaks_near_cores(rows: pd.DataFrame) -> Outcome:
    checks = []
    for w, cores, meds in _curves(rows):
        best_n = max(meds, key=lambda n: meds[n].median)
        knee = min(n for n, e in meds.items() if e.median >= 0.95 * meds[best_n].median)
        checks.append((cores / 2 <= knee <= 2 * cores,
                       f"{w}, {cores} cores: within 5% of the best from {knee} workers (best {best_n}: "
                       f"{meds[best_n].fmt(' samples/s')})"))
    pc = env_one(rows, "physical_cores")
    out = _all(checks, "needs ok cpu/jpeg cells at two or more num_workers")
    return Outcome(out.verdict, out.evidence + (f"; physical cores reported: {pc}" if checks else ""))


def degrades_past_cores(rows: pd.DataFrame) -> Outcome:
    checks = []
    for w, cores, meds in _curves(rows):
        best_n = max(meds, key=lambda n: meds[n].median)
        top = max(meds)
        if top <= cores:
            continue
        worse = meds[top].median <= 0.95 * meds[best_n].median and below(meds[top], meds[best_n])
        checks.append((worse, f"{w}, {cores} cores: {top} workers {meds[top].fmt(' samples/s')} vs best "
                              f"({best_n}) {meds[best_n].fmt(' samples/s')}"))
    return _all(checks, "needs ok cpu/jpeg cells past the core count")


def ranks_share_cores(rows: pd.DataFrame) -> Outcome:
    ok = ok_only(rows)
    ranks = pd.to_numeric(col(ok, "ranks", 1), errors="coerce").fillna(1)
    ok = ok.assign(ranks=ranks)
    checks = []
    for (w, cores, r), g in ok[ok["ranks"] > 1].groupby(["workload", "cores", "ranks"]):
        cores, r = int(cores), int(r)
        if cores % r:
            continue
        a, b = (est(g[g["num_workers"] == n]["samples_per_s"]) for n in (cores // r, cores))
        if not (a.ok and b.ok):
            continue
        checks.append((a.median >= 1.05 * b.median and below(b, a),
                       f"{w}, {cores} cores, {r} ranks: W={cores // r} (R x W = cores) {a.fmt(' samples/s')} vs "
                       f"W={cores} (R x W = {r * cores}) {b.fmt(' samples/s')}"))
    return _all(checks, "needs ranks > 1 cells at W = cores / R and W = cores")


# --------------------------------------------------------------------------------------------------------
# 7. rng

DUP = 0.01  # a duplicate fraction above 1% is a repeat (independent float64 draws never collide)


def _rng_cells(rows, **eq):
    ok = ok_only(rows)
    ok = ok[ok["num_workers"] >= 2]
    return pick(ok, **eq) if eq else ok


def _dup_check(rows, source: str, part: str, want_dups: bool) -> list[tuple[bool, str, float]]:
    """Per cell: (as wanted?, the cell in words, median duplicate fraction) of one source's draws."""
    c = f"rng_dup_{source}_{part}"
    checks = []
    if c not in rows:
        return checks
    for _, g in rows.groupby("cell_id"):
        e = est(g[c])
        if not e.n:
            continue
        r = g.iloc[0]
        where = (f"w={int(r['num_workers'])}, {r.get('start_method')}, worker_init={r.get('worker_init')}, "
                 f"{'persistent' if is_true(r.get('persistent_workers')) else 'restarted'}")
        checks.append(((e.median > DUP) == want_dups, where, e.median))
    return checks


def _dup_outcome(checks: list[tuple[bool, str, float]], what: str, empty: str, extra: str = "",
                 unit: str = "cells") -> Outcome:
    """HOLDS when every cell is as wanted; the evidence gives the range over cells and names the exceptions."""
    if not checks:
        return _missing(empty)
    vals = [v for _, _, v in checks]
    bad = [f"{w}: {_g(100 * v)}%" for ok, w, v in checks if not ok]
    lo, hi = _g(100 * min(vals)), _g(100 * max(vals))
    text = f"{what}: {lo}% in each of {len(checks)} {unit}" if lo == hi else \
        f"{what}: {lo}-{hi}% over {len(checks)} {unit}"
    if bad and len(bad) < len(checks):
        text += f"; not as the claim says in {len(bad)}: " + "; ".join(bad[:6]) + (" ..." if len(bad) > 6 else "")
    return Outcome(FAILS if bad else HOLDS, text + extra)


def _versions(rows) -> str:
    return f" (torch {env_one(rows, 'torch')}, numpy {env_one(rows, 'numpy')}, python {env_one(rows, 'python')})"


def rng_repeats(source: str) -> Callable[[pd.DataFrame], Outcome]:
    def rule(rows: pd.DataFrame) -> Outcome:
        cells = _rng_cells(rows, worker_init="none", start_method="fork")
        return _dup_outcome(_dup_check(cells, source, "within", True),
                            f"{source} draws equal to another draw of the same epoch, fork, worker_init = none",
                            "needs fork cells with 2+ workers and worker_init = none", _versions(rows))
    return rule


def torch_never_repeats(rows: pd.DataFrame) -> Outcome:
    cells = _rng_cells(rows)
    checks = _dup_check(cells, "torch", "within", False) + _dup_check(cells, "torch", "across", False)
    n = cells["cell_id"].nunique() if len(cells) else 0
    return _dup_outcome(checks, "torch draws repeated within an epoch or from the epoch before, every cell with 2+ "
                                "workers", "needs cells with 2+ workers", _versions(rows),
                        unit=f"checks ({n} cells, within and across epochs)")


def rng_repeats_across_epochs(rows: pd.DataFrame) -> Outcome:
    cells = _rng_cells(rows, worker_init="none", start_method="fork", persistent_workers=False)
    if "rng_dup_numpy_across" not in cells or cells["rng_dup_numpy_across"].dropna().empty:
        return _missing("needs non-persistent fork cells with 2+ workers and 2 or more epochs")
    checks = []
    for cell, g in cells.groupby("cell_id"):
        e = {s: est(g[f"rng_dup_{s}_across"]).median for s in ("python", "numpy", "torch")}
        top = max(e.values())
        checks.append((top > DUP, f"w={int(g.iloc[0]['num_workers'])} ("
                       + ", ".join(f"{s} {_g(100 * v)}%" for s, v in e.items()) + ")", top))
    return _dup_outcome(checks, "draws already drawn the epoch before (the most of python/numpy/torch), fork, "
                                "restarted workers, worker_init = none", "needs non-persistent fork cells",
                        _versions(rows))


def seed_all_no_duplicates(rows: pd.DataFrame) -> Outcome:
    cells = _rng_cells(rows, worker_init="seed_all")
    checks = []
    for s in ("python", "numpy", "torch"):
        for part in ("within", "across"):
            checks += [(ok, f"{s} {part}, {w}", v) for ok, w, v in _dup_check(cells, s, part, False)]
    n = cells["cell_id"].nunique() if len(cells) else 0
    return _dup_outcome(checks, "duplicates of any source, within or across epochs, worker_init = seed_all",
                        "needs cells with 2+ workers and worker_init = seed_all",
                        unit=f"checks ({n} cells x python/numpy/torch x within/across epochs)")


# --------------------------------------------------------------------------------------------------------
# 8. in-order


def _in_order(rows):
    ok = ok_only(rows)
    slow = pd.to_numeric(col(ok, "slow_worker_ms", 0.0), errors="coerce").fillna(0.0)
    return ok.assign(slow=slow)


def out_of_order_cuts_tail(rows: pd.DataFrame) -> Outcome:
    ok = _in_order(rows)
    checks = []
    for (nw, slow), g in ok[ok["slow"] > 0].groupby(["num_workers", "slow"]):
        t, f = (est(pick(g, in_order=v)["batch_wait_p99_s"]) for v in (True, False))
        if not (t.ok and f.ok):
            continue
        ctl = [est(pick(ok[(ok["slow"] == 0) & (ok["num_workers"] == nw)], in_order=v)["batch_wait_p99_s"])
               for v in (True, False)]
        checks.append((f.median <= 0.8 * t.median and below(f, t),
                       f"w={int(nw)}, straggler +{slow:g} ms/sample: p99 wait in order {t.fmt(' ms', 1e-3)} -> "
                       f"out of order {f.fmt(' ms', 1e-3)} (no straggler: {ctl[0].fmt(' ms', 1e-3)} -> "
                       f"{ctl[1].fmt(' ms', 1e-3)})"))
    return _all(checks, "needs in_order true and false cells with a straggler (slow_worker_ms > 0)")


def out_of_order_keeps_throughput(rows: pd.DataFrame) -> Outcome:
    ok = _in_order(rows)
    checks = []
    for (nw, slow), g in ok[ok["slow"] > 0].groupby(["num_workers", "slow"]):
        t, f = (est(pick(g, in_order=v)["samples_per_s"]) for v in (True, False))
        if not (t.ok and f.ok):
            continue
        ratio = f.median / t.median
        checks.append((0.9 <= ratio <= 1.1,
                       f"w={int(nw)}, straggler +{slow:g} ms/sample: {t.fmt(' samples/s')} in order vs "
                       f"{f.fmt(' samples/s')} out of order ({_g(ratio)}x)"))
    return _all(checks, "needs in_order true and false cells with a straggler (slow_worker_ms > 0)")


# --------------------------------------------------------------------------------------------------------
# the claims


@dataclass(frozen=True)
class Claim:
    question: str
    claim: str
    rule: str
    decide: Callable[[pd.DataFrame], Outcome]


CLAIMS: list[Claim] = [
    Claim("start-method", "fork starts workers fastest",
          "holds if, at every num_workers x parent_payload_mb, fork has the lowest median time to first batch and "
          f"is separated from spawn and plain forkserver ({SEP})", fork_starts_fastest),
    Claim("start-method", "spawn pays an interpreter start-up per worker",
          "holds if, at every num_workers x payload, spawn's median time to first batch is at least 2x fork's and "
          "its workers' CPU seconds per worker at least 5x fork's (both separated), and spawn's CPU per worker "
          "does not fall (stays above 0.75x) from the fewest to the most workers: a cost paid by every worker, "
          "whatever the core count", spawn_pays_startup),
    Claim("start-method", "spawn pickles the dataset object to every worker (fork shares it)",
          "pickling runs in the main process, once per worker start: holds if, at every num_workers, spawn's "
          "main-process CPU seconds with the largest payload are separated above those without, fork's rise is "
          "below a quarter of spawn's, and spawn's rise per worker at the most workers is at least 0.75x that at "
          "the fewest (workers' USS peaks are reported, not used: a spawned worker's exit adds a transient as large "
          "as the payload)", spawn_pickles_dataset),
    Claim("start-method", "forkserver sits between fork and spawn (time to first batch)",
          "holds if, at every num_workers x payload, plain forkserver's time to first batch is above fork's and "
          "below spawn's, separated from both", forkserver_between),
    Claim("start-method", "forkserver_preload starts the next loader's workers about as fast as fork "
          "(FACTS.md: ~0.3 s vs 0.25 s)",
          "epoch 2's worker start (epoch_gap_s) at the smallest payload: holds if, at every num_workers, "
          "forkserver+preload's median is within 0.5 s of fork's and separated below plain forkserver's",
          preload_restarts_fast),
    Claim("cow-memory", "forked workers reading a Python list of str copy the index pages they touch: their memory "
          "grows",
          f"fork, workers' USS growth per worker over the run (memory_timeline: highest minus first probe sample "
          f"with all workers alive): holds if at every num_workers list_str grows at least {GROW_MIB:g} MiB per "
          f"worker more than the numpy_bytes control (same loop, an index that is one object), separated",
          cow_grows("list_str")),
    Claim("cow-memory", "a NumPy object array behaves like a list (its elements carry refcounts)",
          f"as above for numpy_object: at least {GROW_MIB:g} MiB per worker above numpy_bytes, separated",
          cow_grows("numpy_object")),
    Claim("cow-memory", "NumPy fixed-width bytes and Arrow indexes add no copy-on-write growth",
          f"holds if at every num_workers (fork) numpy_bytes and arrow both grow by less than {FLAT_MIB:g} MiB per "
          f"worker, or grow alike (within {FLAT_MIB:g} MiB of each other) while list_str grows at least "
          f"{GROW_MIB:g} MiB more: growth common to every backing is not the index's", cow_flat),
    Claim("cow-memory", "the copies grow with the number of workers (each copies for itself)",
          "fork list_str, all workers' USS growth together beyond the numpy_bytes control: holds if at the most "
          f"workers it is at least 2x that at the fewest, separated, and at least {GROW_MIB:g} MiB per worker",
          cow_grows_with_workers),
    *[Claim("persistence", f"persistent workers remove the per-epoch start-up cost ({sm})",
            "at the most epochs: holds if the persistent median epoch-boundary gap is at most half the "
            "non-persistent one, separated (what is left is the refill: one batch made after iter())",
            persistent_removes_gap(sm)) for sm in ("fork", "forkserver", "spawn")],
    Claim("persistence", "the epoch-boundary gap grows with spawn",
          "non-persistent workers: holds if spawn's median epoch gap is at least 2x fork's, separated",
          gap_grows_with_spawn),
    Claim("persistence", "persistent workers speed up a run of short epochs (tutorial: 1.13x over 10 epochs)",
          "fork, at the most epochs: holds if total_s without / with persistent workers is at least 1.05x and its "
          "95% bootstrap interval (exact, of the ratio of medians) is above 1", persistent_speeds_up_run),
    Claim("sharing", "file_descriptor runs out of descriptors with many workers or tensors ('Too many open "
          "files'); file_system does not",
          "holds if some file_descriptor repetition failed for lack of descriptors, none under file_system did, "
          "and file_system ran ok at the same workers, tensors and limit; not measurable if no "
          "file_descriptor cell came within 80% of its open-file limit", fd_runs_out),
    Claim("sharing", "file_descriptor holds a descriptor per shared tensor in flight; file_system does not",
          "at the highest open-file limit, at every num_workers: holds if file_descriptor's peak open "
          "descriptors at the most tensors per sample is at least 2x that at the fewest (separated) and "
          "file_system's grows by at most 1.5x", fd_per_tensor),
    Claim("sharing", "the per-tensor cost differs between the strategies",
          "at the highest open-file limit and the most tensors per sample: holds if at some num_workers the two "
          "strategies' median throughputs differ by at least 10%, separated (the other worker counts are "
          "reported)", per_tensor_cost_differs),
    *[Claim("ladder", f"tutorial ladder {rung}: {PUBLISHED[rung]}x over the baseline (published, GPU)",
            "end-to-end samples/s over all 160 batches, ratio of medians to the baseline: holds if within a "
            "factor 1.25 of the published ratio; not measurable unless the model step ran on a GPU "
            "(like-for-like with the tutorial; pin_memory and the prefetcher do nothing without one)",
            ladder_matches(rung)) for rung in RUNGS[1:]],
    *[Claim("ladder", f"{rung} speeds the tutorial's training loop up over {prev}",
            f"holds if end-to-end samples/s of {rung} over {prev} is at least 1.05x and the 95% bootstrap "
            f"interval of the ratio of medians is above 1; not measurable when repetitions scatter by more than "
            f"{NOISY:.0%} of their median (the cores were not the cells' own)",
            _quiet(ladder_step_helps(rung, prev), "end_to_end_samples_per_s"))
      for rung, prev in (("+workers", "baseline"), ("+persistent", "+pin_memory"), ("+batched", "+prefetcher"))],
    Claim("oversubscription", "CPU-bound throughput peaks near the core count",
          "per workload and cores (ranks = 1): holds if the fewest workers whose median throughput is within 5% of "
          "the best median lie between cores/2 and 2 x cores; not measurable when repetitions scatter by more than "
          f"{NOISY:.0%} of their median (median over cells of range/median): the cores were not the cells' own",
          _quiet(peaks_near_cores)),
    Claim("oversubscription", "CPU-bound throughput degrades past the core count",
          "per workload and cores: holds if the median at the most workers is at least 5% below the best median, "
          f"separated; not measurable when repetitions scatter by more than {NOISY:.0%} (as above)",
          _quiet(degrades_past_cores)),
    Claim("oversubscription", "with R ranks, R x W = cores beats R x cores workers",
          "per workload, cores and R > 1: holds if total throughput at W = cores/R is at least 5% above that at "
          f"W = cores, separated; not measurable when repetitions scatter by more than {NOISY:.0%} (as above)",
          _quiet(ranks_share_cores)),
    Claim("rng", "NumPy's global generator repeats draws across forked workers without a worker_init_fn",
          f"holds if in every fork cell with 2+ workers and worker_init = none more than {DUP:.0%} of an epoch's "
          "NumPy draws equal another draw of the same epoch", rng_repeats("numpy")),
    Claim("rng", "Python's random repeats draws across forked workers without a worker_init_fn",
          f"as above for Python's random (more than {DUP:.0%} duplicates in every such cell)", rng_repeats("python")),
    Claim("rng", "torch's generator never repeats across workers (PyTorch seeds each worker)",
          f"holds if in every cell with 2+ workers at most {DUP:.0%} of torch draws repeat, within an epoch and "
          "from the previous epoch", torch_never_repeats),
    Claim("rng", "random augmentations repeat every epoch",
          f"non-persistent fork cells with 2+ workers, worker_init = none: holds if in every cell more than "
          f"{DUP:.0%} of some source's draws were already drawn the epoch before", rng_repeats_across_epochs),
    Claim("rng", "a seeding worker_init_fn (seed_all) leaves no duplicates",
          f"holds if no seed_all cell with 2+ workers has more than {DUP:.0%} duplicates in any source, within or "
          "across epochs", seed_all_no_duplicates),
    Claim("in-order", "in_order=False cuts the tail batch wait when a worker straggles",
          "with slow_worker_ms > 0, at every num_workers: holds if the median p99 batch wait out of order is at "
          "least 20% below in order, separated", out_of_order_cuts_tail),
    Claim("in-order", "in_order=False leaves mean throughput about the same when a worker straggles",
          "with slow_worker_ms > 0, at every num_workers: holds if median throughput out of order is within "
          "+-10% of in order", out_of_order_keeps_throughput),
]


# --------------------------------------------------------------------------------------------------------
# which study answers which question


def _varies(rows: pd.DataFrame, name: str) -> bool:
    return name in rows and rows[name].astype(str).nunique() > 1


def question_of(study: str, rows: pd.DataFrame | None = None) -> str | None:
    """The question a study answers: by its name (the question's name, or it followed by '-' or '_' and a
    suffix, e.g. 'start-method-64c'), else by the axes its records vary. None for other studies."""
    for q in sorted(QUESTIONS, key=len, reverse=True):
        if study == q or study.startswith((q + "-", q + "_")):
            return q
    if rows is None or rows.empty:
        return None
    if "index_backing" in rows and (rows["index_backing"].dropna() != "none").any():
        return "cow-memory"
    if _varies(rows, "sharing_strategy"):
        return "sharing"
    if "workload" in rows and (rows["workload"] == "rng").all():
        return "rng"
    if _varies(rows, "in_order") and "slow_worker_ms" in rows:
        return "in-order"
    if "model" in rows and (rows["model"] == "tutorial").all() and (rows["workload"] == "tutorial").all():
        return "ladder"
    if _varies(rows, "persistent_workers") and "epochs" in rows and rows["epochs"].max() > 1:
        return "persistence"
    if _varies(rows, "start_method") and (_varies(rows, "parent_payload_mb") or _varies(rows, "forkserver_preload")):
        return "start-method"
    if _varies(rows, "ranks"):
        return "oversubscription"
    return None


def studies_by_question(df: pd.DataFrame) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {q: [] for q in QUESTIONS}
    if df.empty or "study" not in df:
        return out
    for study, rows in df.groupby("study"):
        q = question_of(str(study), rows)
        if q:
            out[q].append(str(study))
    return out


def claims_for(df: pd.DataFrame, study: str, question: str | None = None) -> pd.DataFrame:
    """The claims of one study's question, decided on that study's records."""
    rows = df[df["study"] == study] if "study" in df else df.iloc[0:0]
    question = question or question_of(study, rows)
    out = []
    for c in CLAIMS:
        if c.question != question:
            continue
        if rows.empty:
            o = _missing(f"no records of study {study}")
        else:
            try:
                o = c.decide(rows)
            except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:  # a column the records lack
                o = _missing(f"the records lack what this rule reads ({type(exc).__name__}: {exc})")
        out.append({"study": study, "claim": c.claim, "rule": c.rule, "evidence": o.evidence, "verdict": o.verdict})
    return pd.DataFrame(out, columns=COLUMNS)


def claims_table(df: pd.DataFrame) -> pd.DataFrame:
    """Every claim of every question: decided on each study that answers it, or 'not measurable on this
    machine' (no records) when none does. Columns: study, claim, rule, evidence, verdict."""
    parts = []
    for q, studies in studies_by_question(df).items():
        if not studies:
            parts.append(pd.DataFrame([{"study": q, "claim": c.claim, "rule": c.rule,
                                        "evidence": f"no records of a {q} study (suite/studies/{q}.toml)",
                                        "verdict": NOT_MEASURABLE} for c in CLAIMS if c.question == q],
                                      columns=COLUMNS))
        for s in studies:
            parts.append(claims_for(df, s, q))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_claims(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """claims.csv and claims.md under out_dir: the claims table, verdicts computed from the records."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = claims_table(df)
    csv = out / "claims.csv"
    table.to_csv(csv, index=False)
    counts = table["verdict"].value_counts()
    lines = ["# Claims of the seeds, decided from the records", "",
             "Each verdict is computed from the records by the rule next to it (analysis/claims.py); none is "
             "written by hand. \"Separated\" means the 95% bootstrap intervals of the two medians do not overlap; "
             "with 3 repetitions that is every repetition of one below every repetition of the other.", "",
             ", ".join(f"{v}: {int(counts.get(v, 0))}" for v in VERDICTS), ""]
    for study, part in table.groupby("study", sort=False):
        lines += [f"## {study}", "", "| claim | verdict | evidence | rule |", "|---|---|---|---|"]
        for _, r in part.iterrows():
            lines.append(f"| {_md_cell(r['claim'])} | **{r['verdict']}** | {_md_cell(r['evidence'])} | "
                         f"{_md_cell(r['rule'])} |")
        lines.append("")
    md = out / "claims.md"
    md.write_text("\n".join(lines))
    return [csv, md]

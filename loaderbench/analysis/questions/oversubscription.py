"""Oversubscription: CPU-bound loading against the core count, and ranks x workers: loaders side by side
(DDP-like) and real DDP ranks (a process group, DistributedSampler, a model step and its gradient all-reduce:
the `oversubscription-ddp` study), whose records also count each rank's share of every epoch.

The curves are read from whatever study carries them (the quick and scaling studies as well as the
oversubscription one): CPU-bound workloads (cpu, jpeg; not the decode-only reference cells), no consumer
step or model, one rank; one curve per value of every other axis that varies, so no curve mixes cells.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pandas as pd

from loaderbench.analysis.rules.claim import NOISE_RULE, Metric, Question, finite, narrow, quiet, with_workers
from loaderbench.analysis.rules.kinds import MOST, Of, Shift
from loaderbench.analysis.rules.rows import loading_alone
from loaderbench.analysis.rules.worker_costs import CLAIMS as WORKER_COSTS
from loaderbench.analysis.table.derive import ranks
from loaderbench.analysis.table.environment import env_one
from loaderbench.analysis.table.records import AXIS_COLUMNS, col, ok_rows
from loaderbench.stats.verdicts import (
    FAILS,
    HOLDS,
    MIN_EFFECT,
    NOT_MEASURED,
    Outcome,
    Region,
    all_of,
    at_least,
    at_most,
    both,
    decide_shift,
)

CPU_BOUND = ("cpu", "jpeg")
#: "rises to the core count": throughput at num_workers = cores at least this many times that at 1 worker.
PEAK_RISE_MIN = 1.2
#: "peaks near the core count": no num_workers past this many times the cores gains more than MIN_EFFECT.
PEAK_SPAN = 2
#: "degrades past the core count": at the most workers at least this share below num_workers = cores.
DEGRADE_MIN = 0.05
#: "R x W = cores beats R x cores workers": by at least this factor.
RANKS_GAIN = 1.05


def cpu_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows of CPU-bound loading alone: cpu/jpeg workloads with workers, no decode-only reference, no read-only
    or remote (storage = "http") cells, no consumer step or model, one rank."""
    ok = with_workers(rows)
    if ok.empty:
        return ok
    keep = col(ok, "workload").isin(CPU_BOUND) & loading_alone(ok)
    keep &= col(ok, "jpeg_stage").astype(object).ne("decode")
    keep &= col(ok, "jpeg_stage").astype(object).ne("read")  # reading only: nothing for the cores to bind
    keep &= col(ok, "storage").astype(object).ne("http")  # remote data waits on the network (the storage question)
    return ok[keep]


_READ = ["status", "cell_id", *AXIS_COLUMNS, "samples_per_s"]


def _curve_axes(cpu: pd.DataFrame) -> list[str]:
    """The axes besides num_workers and cores that vary among the CPU-bound rows: one curve per value of each."""
    return [
        a
        for a in AXIS_COLUMNS
        if a in cpu and a not in ("num_workers", "cores") and cpu[a].dropna().astype(str).nunique() > 1
    ]


def _curves(rows) -> Iterator[tuple[str, int, dict[int, pd.Series]]]:
    """(label, cores, {num_workers: ok values}) per curve with two or more num_workers."""
    cpu = cpu_rows(narrow(rows, _READ))
    if cpu.empty:
        return
    keys = _curve_axes(cpu)
    ok = ok_rows(cpu)
    for key, grp in ok.groupby(keys + ["cores"], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        cores = int(key[-1])
        label = " · ".join(
            [str(grp["workload"].iloc[0])] + [f"{a}={v}" for a, v in zip(keys, key[:-1]) if a != "workload"]
        )
        vals = {int(n): finite(g["samples_per_s"]) for n, g in grp.groupby("num_workers")}
        if len(vals) >= 2:
            yield f"{label}, {cores} core{'s' if cores != 1 else ''}", cores, vals


def peaks_near_cores(rows: pd.DataFrame) -> Outcome:
    checks, skipped = [], []
    for label, cores, v in _curves(rows):
        if cores < 2:
            skipped.append(label)
            continue
        if len(v.get(1, [])) < 3 or len(v.get(cores, [])) < 3:
            checks.append(Outcome(NOT_MEASURED, f"{label}: needs num_workers = 1 and = cores with 3 ok repetitions"))
            continue
        rise = decide_shift(v[1], v[cores], at_least(PEAK_RISE_MIN), label=f"w={cores} / w=1")
        beyond = [n for n in sorted(v) if n > PEAK_SPAN * cores]
        past = [decide_shift(v[cores], v[n], at_most(1 + MIN_EFFECT), label=f"w={n} / w={cores}") for n in beyond]
        if not beyond:
            past = [Outcome(NOT_MEASURED, f"no num_workers above {PEAK_SPAN} x cores measured")]
        o = both(rise, *past)
        checks.append(Outcome(o.verdict, f"{label}: {o.evidence}"))
    out = all_of(
        checks, f"needs ok cpu/jpeg cells on 2 or more cores at num_workers = 1, = cores and past {PEAK_SPAN} x cores"
    )
    extra = f"; physical cores reported: {env_one(rows, 'physical_cores')}" if checks else ""
    if skipped:
        extra += f"; not used (1 core: the core count is the fewest workers, nothing to rise to): {', '.join(skipped)}"
    return Outcome(out.verdict, out.evidence + extra)


def curve_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The ok rows of _curves, each with its curve's label (the workload and every other axis that varies)."""
    cpu = cpu_rows(narrow(rows, _READ))
    if cpu.empty:
        return cpu
    keys = _curve_axes(cpu)
    ok = ok_rows(cpu)
    label = col(ok, "workload").astype(str)
    for a in keys:
        if a != "workload":
            label = label + f" · {a}=" + ok[a].astype(str)
    return ok.assign(curve=label)


def _throughput(a: dict, b: dict, region: Region) -> Shift:
    return Shift("samples_per_s", "throughput", a, b, region, ("curve", "cores"), frame=curve_rows, note=NOISE_RULE)


rises_to_cores = _throughput({"num_workers": 1}, {"num_workers": Of("cores")}, at_least(PEAK_RISE_MIN))
degrades_past_cores = _throughput({"num_workers": Of("cores")}, {"num_workers": MOST}, at_most(1 - DEGRADE_MIN))


def rank_mode(rows: pd.DataFrame) -> pd.Series:
    """How each row's ranks ran: side_by_side (also where the axis is not set) or ddp."""
    return col(rows, "rank_mode", "side_by_side").fillna("side_by_side").astype(str)


def _rank_cells(rows: pd.DataFrame, mode: str) -> pd.DataFrame:
    """The ok rows of R > 1 ranks run as `mode`, with R and the total workers R x W."""
    ok = ok_rows(rows)
    ok = ok[rank_mode(ok) == mode]
    r = ranks(ok)
    ok = ok.assign(ranks=r, **{"R x W": pd.to_numeric(col(ok, "num_workers", 0), errors="coerce") * r})
    return ok[ok["ranks"] > 1]


def _ranks_share_cores(mode: str, setting: str) -> Shift:
    """R ranks (run as `mode`) at R x W = cores against W = cores workers each, per workload, cores and R."""
    return Shift(
        "samples_per_s",
        "total samples/s",
        {"num_workers": Of("cores")},
        {"R x W": Of("cores")},
        at_least(RANKS_GAIN),
        ("workload", "cores", "ranks"),
        frame=partial(_rank_cells, mode=mode),
        note=f"{setting}; {NOISE_RULE}",
    )


ranks_share_cores = _ranks_share_cores("side_by_side", "R > 1 loaders side by side (no process group)")
ddp_ranks_share_cores = _ranks_share_cores(
    "ddp",
    "R > 1 real DDP ranks (gloo, DistributedSampler, gradient all-reduce), total throughput over the window all "
    "ranks shared",
)


def ddp_shares_disjoint(rows: pd.DataFrame) -> Outcome:
    """Every DDP record's counted shares: holds when, in every epoch counted, the ranks' samplers together gave
    each index of the epoch exactly once; does not hold at the first record with an overlap or a gap."""
    ok = ok_rows(rows)
    ok = ok[(rank_mode(ok) == "ddp") & (ranks(ok) > 1)]
    counted = pd.to_numeric(col(ok, "ddp_epochs_counted", 0), errors="coerce").fillna(0)
    ok = ok[counted > 0]
    if ok.empty:
        return Outcome(NOT_MEASURED, "needs ok DDP records (rank_mode = ddp, ranks > 1) of a map-style dataset")
    num = {c: pd.to_numeric(ok[c], errors="coerce").fillna(-1).astype(int) for c in _SHARES}
    expected = num["ddp_epochs_counted"] * num["ddp_epoch_samples"]
    bad = (num["ddp_share_overlap"] != 0) | (num["ddp_share_missing"] != 0) | (num["ddp_share_reads"] != expected)
    totals = (
        f"{len(ok)} records, {int(num['ddp_epochs_counted'].sum())} epochs of up to "
        f"{int(num['ddp_epoch_samples'].max())} samples over {int(ranks(ok).min())}-{int(ranks(ok).max())} ranks: "
        f"{int(num['ddp_share_reads'].sum())} reads, {int(num['ddp_share_overlap'].sum())} of an index another "
        f"rank also read, {int(num['ddp_share_missing'].sum())} indices no rank read"
    )
    if bad.any():
        first = ok[bad].iloc[0]
        return Outcome(FAILS, f"{totals}; first record with an overlap or a gap: {first['cell_id']}")
    return Outcome(HOLDS, totals)


_SHARES = ("ddp_epochs_counted", "ddp_epoch_samples", "ddp_share_reads", "ddp_share_overlap", "ddp_share_missing")


def _has_curves(rows: pd.DataFrame) -> bool:
    cpu = cpu_rows(narrow(rows, _READ))
    if cpu.empty:
        return False
    keys = [a for a in AXIS_COLUMNS if a in cpu and a != "num_workers" and cpu[a].dropna().astype(str).nunique() > 1]
    counts = (
        cpu.groupby(keys or ["cores"], dropna=False)["num_workers"].nunique()
        if keys or "cores" in cpu
        else pd.Series([cpu["num_workers"].nunique()])
    )
    return bool((counts >= 2).any())


_has_ranks = lambda rows: bool(((ranks(rows) > 1) & (rank_mode(rows) == "side_by_side")).any())
_has_ddp = lambda rows: bool(((ranks(rows) > 1) & (rank_mode(rows) == "ddp")).any())
_ddp_read = lambda rows: rows[rank_mode(rows) == "ddp"]
_cpu_read = lambda rows: cpu_rows(narrow(rows, _READ))


QUESTION = Question(
    "oversubscription",
    (),
    lambda rows: _has_curves(rows) or _has_ranks(rows) or _has_ddp(rows),
    counted=cpu_rows,
    figure="loaderbench.analysis.figures.questions.oversubscription:oversubscription_ranks_x_workers",
    tables={
        "oversubscription": (Metric("samples_per_s", "samples/s"),),
        "oversubscription-ddp": (
            Metric("samples_per_s", "samples/s"),
            Metric("ddp_step_s", "DDP step (ms)", 1e-3),
            Metric("ddp_allreduce_s", "all-reduce (ms)", 1e-3),
            Metric("ddp_share_overlap", "shares overlapping", agg="max"),
            Metric("ddp_share_missing", "indices missed", agg="max"),
        ),
    },
)
QUESTION.add(
    "worker processes parallelize CPU-bound Python work",
    rises_to_cores,
    quiet(rises_to_cores, select=_cpu_read),
    needs=_has_curves,
    number=5,
)
QUESTION.add(
    "CPU-bound throughput peaks near the core count",
    f"per CPU-bound curve on 2 or more cores (ranks = 1): holds if throughput at num_workers = cores is at "
    f"least {PEAK_RISE_MIN:g}x that at 1 worker and no num_workers past {PEAK_SPAN} x cores reaches "
    f"{1 + MIN_EFFECT:g}x that at cores (a flat or falling curve does not hold); {NOISE_RULE}",
    quiet(peaks_near_cores, select=_cpu_read),
    needs=_has_curves,
    number=13,
)
QUESTION.add(
    "CPU-bound throughput degrades past the core count",
    degrades_past_cores,
    quiet(degrades_past_cores, select=_cpu_read),
    needs=_has_curves,
    number=14,
)
QUESTION.add(
    "with R loaders side by side (DDP-like), R x W = cores beats R x cores workers",
    ranks_share_cores,
    quiet(ranks_share_cores),
    needs=_has_ranks,
)
QUESTION.add(
    "with R DDP ranks, R x W = cores beats R x cores workers",
    ddp_ranks_share_cores,
    quiet(ddp_ranks_share_cores, select=_ddp_read),
    needs=_has_ddp,
    number=19,
    study="oversubscription-ddp",
)
QUESTION.add(
    "DistributedSampler gives each rank a disjoint share, together the epoch exactly once",
    "per DDP record (rank_mode = ddp, ranks > 1), each rank's sampler indices counted per epoch: holds if "
    "no index was read twice and none was missed in any epoch of any record; does not hold at the first "
    "overlap or gap",
    ddp_shares_disjoint,
    needs=_has_ddp,
    number=20,
    study="oversubscription-ddp",
)
QUESTION.claims.extend(WORKER_COSTS)

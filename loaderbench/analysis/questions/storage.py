"""Remote storage (loaderbench/storage/): how far more workers hide a network path, what stops them, what a connection
per request costs, and whether streamed shards are read exactly once.

The curves are HTTP cells of the jpeg workload reading only (jpeg_stage = "read": nothing decoded, so the
path is what the workers hide), one per latency, bandwidth cap and client, with no consumer step or model and
one rank. Little's law sets the ideal: with W workers each waiting for one answer at a time,
throughput = W / (latency + service time).
"""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.rules.claim import EXTENSION, NOISE_RULE, Metric, Question, finite, narrow, pick, quiet
from loaderbench.analysis.rules.kinds import Of, Shift
from loaderbench.analysis.rules.rows import loading_alone, with_workers
from loaderbench.analysis.rules.worker_costs import IO_ENOUGH
from loaderbench.analysis.table.records import col, ok_rows
from loaderbench.stats.verdicts import (
    MIN_EFFECT,
    NOT_MEASURED,
    Outcome,
    all_of,
    at_least,
    at_most,
    both,
    decide_shift,
    fact,
    g,
)

#: "far past the cores": at the most workers, at least this many times the throughput at num_workers = cores.
#: CPU-bound loading on one core gains nothing past one worker; this much can only come from hidden waits.
FAR_PAST = 4.0
#: ... judged at every latency of at least this many ms (below it the service time, not the path, dominates)
FAR_LATENCY_MS = 10.0
#: ... and only on curves reaching at least this many workers per core.
FAR_WORKERS_PER_CORE = 8
#: "until bandwidth binds": under a cap, the most workers gain at most this factor over half as many ...
CAP_FLAT = 1.10
#: ... while without the cap, at the same latency, the most workers reach at least this factor more.
CAP_BINDS = 1 + MIN_EFFECT
#: "costs more than any num_workers can hide": the best per-request throughput (over the workers measured) is
#: at most this share of the best pooled one.
PER_REQUEST_MAX = 1 - MIN_EFFECT

#: "remote storage makes the pipeline I/O-bound": at num_workers = cores, reading over HTTP at FAR_LATENCY_MS or
#: more gives at most this share of reading the same files locally.
REMOTE_SHARE = 0.5

AXES = tuple(
    "workload storage num_workers cores jpeg_stage latency_ms jitter_ms bandwidth_mbit http_client sharding shards "
    "shard_samples shaping".split()
)
_READ = [
    "status",
    "cell_id",
    *AXES,
    *"model step_ms ranks samples_per_s storage_payload_mbit_per_s shard_duplicates shard_missing".split(),
    *"shard_passes_complete shard_expected_per_pass".split(),
]


def _jpeg_alone(rows: pd.DataFrame) -> pd.DataFrame:
    """Ok jpeg rows with workers loading alone (no consumer step or model, one rank)."""
    ok = ok_rows(narrow(rows, _READ))
    if ok.empty:
        return ok
    return with_workers(ok[(col(ok, "workload") == "jpeg") & loading_alone(ok)])


def http_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Ok rows of HTTP reading alone: jpeg over HTTP, read stage, workers, no consumer step or model, one rank."""
    ok = _jpeg_alone(rows)
    return ok[(col(ok, "storage") == "http") & (col(ok, "jpeg_stage") == "read")] if not ok.empty else ok


def curves(rows: pd.DataFrame) -> dict[tuple, dict[int, list[float]]]:
    """(cores, latency_ms, bandwidth_mbit, http_client) -> {num_workers: throughput of each repetition}."""
    out: dict[tuple, dict[int, list[float]]] = {}
    http = http_rows(rows)
    if http.empty:
        return out
    keys = ["cores", "latency_ms", "bandwidth_mbit", "http_client"]
    for key, grp in http.groupby(keys, dropna=False, sort=True):
        out[tuple(key)] = {int(n): finite(g_["samples_per_s"]) for n, g_ in grp.groupby("num_workers")}
    return out


def _label(cores, latency, mbit, client) -> str:
    cap = f", {g(mbit)} Mbit/s cap" if mbit else ""
    return f"{g(latency)} ms{cap}, {client}, {int(cores)} core{'s' if cores != 1 else ''}"


def scale_until_bandwidth(rows: pd.DataFrame) -> Outcome:
    checks = []
    by = curves(rows)
    for (cores, latency, mbit, client), v in by.items():
        if client != "pooled":
            continue
        base, top = int(cores), max(v)
        label = _label(cores, latency, mbit, client)
        if not mbit and latency >= FAR_LATENCY_MS and top >= FAR_WORKERS_PER_CORE * cores and base in v:
            o = decide_shift(v[base], v[top], at_least(FAR_PAST), label=f"w={top} / w={base}")
            checks.append(Outcome(o.verdict, f"{label}: {o.evidence}"))
        if mbit and top // 2 in v:
            flat = decide_shift(v[top // 2], v[top], at_most(CAP_FLAT), label=f"w={top} / w={top // 2}")
            free = by.get((cores, latency, 0.0, client), {}).get(top)
            binds = (
                decide_shift(v[top], free, at_least(CAP_BINDS), label=f"uncapped / capped at w={top}")
                if free is not None
                else Outcome(NOT_MEASURED, f"no uncapped cell at {g(latency)} ms, w={top}")
            )
            o = both(flat, binds)
            payload = pick(
                http_rows(rows),
                cores=cores,
                latency_ms=latency,
                bandwidth_mbit=mbit,
                http_client=client,
                num_workers=top,
            )
            mbits = finite(col(payload, "storage_payload_mbit_per_s"))
            shown = f"; payload at w={top}: {g(float(pd.Series(mbits).median()))} Mbit/s" if mbits.size else ""
            checks.append(Outcome(o.verdict, f"{label}: {o.evidence}{shown}"))
    return all_of(
        checks,
        f"needs HTTP read-stage cells (pooled) at {g(FAR_LATENCY_MS)} ms or more from num_workers = "
        f"cores to {FAR_WORKERS_PER_CORE} x cores, and capped ones with their uncapped twins",
    )


def per_request_costs_more(rows: pd.DataFrame) -> Outcome:
    checks = []
    by = curves(rows)
    for (cores, latency, mbit, client), fresh in by.items():
        pooled = by.get((cores, latency, mbit, "pooled"))
        if client != "per_request" or not pooled:
            continue
        best = {
            name: max(c, key=lambda n: float(pd.Series(c[n]).median()))
            for name, c in (("pooled", pooled), ("per_request", fresh))
        }
        o = decide_shift(
            pooled[best["pooled"]],
            fresh[best["per_request"]],
            at_most(PER_REQUEST_MAX),
            label=f"best per_request (w={best['per_request']}) / best pooled (w={best['pooled']})",
        )
        span = sorted(set(pooled) | set(fresh))
        checks.append(
            Outcome(
                o.verdict, f"{_label(cores, latency, mbit, 'both')} over num_workers {span[0]}-{span[-1]}: {o.evidence}"
            )
        )
    return all_of(checks, "needs HTTP read-stage cells with both http_client values at the same latency")


def _reads(rows: pd.DataFrame) -> pd.DataFrame:
    """Ok jpeg rows, local or over HTTP (pooled, uncapped), with workers, no consumer step or model, one rank."""
    ok = _jpeg_alone(rows)
    if ok.empty:
        return ok
    keep = col(ok, "storage").isin(("local", "http"))
    http = col(ok, "storage") == "http"
    keep &= ~http | (col(ok, "http_client") == "pooled")
    keep &= ~http | (pd.to_numeric(col(ok, "bandwidth_mbit", 0.0), errors="coerce").fillna(0.0) == 0)
    return ok[keep]


def _far_reads(rows: pd.DataFrame) -> pd.DataFrame:
    """_reads' HTTP rows at FAR_LATENCY_MS or more, and its local rows once per such latency (their twins)."""
    ok = _reads(rows)
    if ok.empty:
        return ok
    http = ok[(ok["storage"] == "http") & (pd.to_numeric(col(ok, "latency_ms"), errors="coerce") >= FAR_LATENCY_MS)]
    local = ok[ok["storage"] == "local"]
    return pd.concat([http, *(local.assign(latency_ms=v) for v in sorted(set(http["latency_ms"])))])


remote_is_io_bound = Shift(
    "samples_per_s",
    "throughput",
    {"storage": "local", "num_workers": Of("cores")},
    {"storage": "http", "num_workers": Of("cores")},
    at_most(REMOTE_SHARE),
    ("jpeg_stage", "cores", "latency_ms"),
    names=("local reads", "HTTP reads"),
    frame=_far_reads,
    note=f"HTTP pooled and uncapped, at every latency of at least {g(FAR_LATENCY_MS)} ms; {NOISE_RULE}",
)


def io_rule_of_thumb_over_http(rows: pd.DataFrame) -> Outcome:
    """#17 on a real I/O-bound pipeline: the full jpeg pipeline (read over HTTP, decode, transform) at every latency
    of at least FAR_LATENCY_MS. Its curve has an optimum: workers hide the wait until the decoding fills the cores.
    The best num_workers within 2-4 x cores against the best beyond 4 x cores (measured beyond, so that an optimum
    further out would show): "enough" is the share IO_ENOUGH of it, as for the sleep curves."""
    ok = _reads(rows)
    ok = ok[(col(ok, "storage") == "http") & (col(ok, "jpeg_stage") == "full")] if not ok.empty else ok
    ok = ok[pd.to_numeric(col(ok, "latency_ms", 0.0), errors="coerce") >= FAR_LATENCY_MS] if not ok.empty else ok
    checks = []
    for (cores, latency), grp in ok.groupby(["cores", "latency_ms"], sort=True):
        by = {int(n): finite(c["samples_per_s"]) for n, c in grp.groupby("num_workers")}
        medians = {n: float(pd.Series(v).median()) for n, v in by.items() if len(v)}
        inside = [n for n in medians if 2 * cores <= n <= 4 * cores]
        beyond = [n for n in medians if n > 4 * cores]
        if not inside or not beyond:
            continue
        best_in = max(inside, key=lambda n: medians[n])
        best_out = max(beyond, key=lambda n: medians[n])
        curve = ", ".join(f"w={n}: {g(medians[n])}" for n in sorted(medians))
        label = f"{g(latency)} ms, {int(cores)} core{'s' if cores != 1 else ''}: w={best_in} / w={best_out}"
        o = decide_shift(by[best_out], by[best_in], at_least(IO_ENOUGH), label=label)
        checks.append(Outcome(o.verdict, f"{o.evidence} (samples/s {curve})"))
    return all_of(
        checks,
        f"needs full-pipeline jpeg cells over HTTP at {g(FAR_LATENCY_MS)} ms or more, within 2-4 x cores and "
        "beyond 4 x cores",
    )


def _has_local_and_remote(rows: pd.DataFrame) -> bool:
    ok = _reads(rows)
    return bool((col(ok, "storage") == "local").any() and (col(ok, "storage") == "http").any())


def shards_exactly_once(rows: pd.DataFrame) -> Outcome:
    ok = ok_rows(narrow(rows, _READ))
    ok = ok[col(ok, "workload") == "shards"] if not ok.empty else ok
    checks = []
    for key, grp in ok.groupby(["storage", "sharding", "num_workers"], dropna=False, sort=True):
        storage, sharding, workers = key
        dup, miss = finite(grp["shard_duplicates"]), finite(grp["shard_missing"])
        complete = finite(grp["shard_passes_complete"])
        label = f"{storage}, sharding={sharding}, {int(workers)} workers ({len(grp)} repetitions)"
        if not complete.size or complete.min() < 1:
            checks.append(Outcome(NOT_MEASURED, f"{label}: a repetition with no complete pass"))
        elif sharding == "split":
            checks.append(
                fact(
                    dup.sum() == 0 and miss.sum() == 0,
                    f"{label}: {int(dup.sum())} duplicates, {int(miss.sum())} missing over "
                    f"{int(complete.sum())} complete passes",
                )
            )
        elif int(workers) > 1:
            checks.append(
                fact(
                    bool((dup > 0).all()) and miss.sum() == 0,
                    f"{label}: duplicates {', '.join(str(int(d)) for d in dup)} (each sample once per "
                    f"worker), {int(miss.sum())} missing",
                )
            )
    return all_of(checks, "needs shards cells with complete passes")


_has_http = lambda rows: any(len(v) >= 2 for v in curves(rows).values())
_has_shards = lambda rows: "shard_duplicates" in rows and bool((col(rows, "workload") == "shards").any())


QUESTION = Question(
    "storage",
    AXES,
    lambda rows: _has_http(rows) or _has_shards(rows),
    figure="loaderbench.analysis.figures.questions.storage:workers_hide_latency",
    tables={"storage": (Metric("samples_per_s", "samples/s"),)},
)
QUESTION.add(
    "with remote storage, workers scale far past the cores until bandwidth binds",
    f'HTTP reads (jpeg_stage = "read", pooled): at every latency of at least {g(FAR_LATENCY_MS)} ms, '
    f"throughput at the most workers (at least {FAR_WORKERS_PER_CORE} x cores) is at least {g(FAR_PAST)}x "
    f"that at num_workers = cores; under a bandwidth cap, the most workers gain at most {g(CAP_FLAT)}x over "
    f"half as many while the uncapped twin reaches at least {g(CAP_BINDS)}x more; {NOISE_RULE}",
    quiet(scale_until_bandwidth, select=http_rows),
    needs=_has_http,
    number=56,
    role=EXTENSION,
    setting="scaling far past the cores until bandwidth binds",
)
QUESTION.add(
    "remote storage makes a pipeline I/O-bound: at num_workers = cores it loads far slower than from local disk",
    remote_is_io_bound,
    quiet(remote_is_io_bound, select=_reads),
    needs=_has_local_and_remote,
    number=56,
)
QUESTION.add(
    "I/O-bound loading needs 2-4 x the cores as workers (reading over a network path, then decoding)",
    f"the full jpeg pipeline over HTTP (pooled, uncapped) at every latency of at least {g(FAR_LATENCY_MS)} ms, "
    f"per cores: holds if the best num_workers from 2 to 4 x cores reaches at least {g(IO_ENOUGH)}x the "
    f"throughput of the best one beyond 4 x cores, does not hold if it is shown below; {NOISE_RULE}",
    quiet(io_rule_of_thumb_over_http, select=_reads),
    needs=_has_local_and_remote,
    number=17,
)
QUESTION.add(
    "a new connection per sample costs more than any num_workers can hide",
    f"per latency with both clients: the best per_request throughput over the num_workers measured is at "
    f"most {g(PER_REQUEST_MAX)}x the best pooled one; {NOISE_RULE}",
    quiet(per_request_costs_more, select=http_rows),
    needs=_has_http,
)
QUESTION.add(
    "split shards are read exactly once per pass; unsplit ones repeat each sample per worker",
    'counted, not estimated: every complete pass of a sharding = "split" cell has 0 duplicates and 0 '
    'missing samples; every sharding = "none" cell with 2 or more workers has duplicates and 0 missing',
    shards_exactly_once,
    needs=_has_shards,
)

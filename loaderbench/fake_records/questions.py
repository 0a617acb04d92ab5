"""Synthetic records for the questions the studies answer, made by loaderbench.schema.record.Record as the runner makes
them (nested metrics, env) and flattened by loaderbench.schema.record_row into the tidy table: small, deterministic sets
for
tests of loaderbench.analysis.claims and loaderbench.analysis.figures.questions. Every builder takes the effect sizes
it should show."""

from __future__ import annotations

import itertools
import json

import pandas as pd

from loaderbench.schema.record import Record
from loaderbench.schema.record_row import flatten
from loaderbench.stats.verdicts import FAILS, HOLDS, INCONCLUSIVE, NOT_MEASURABLE, NOT_MEASURED

H, F, I = HOLDS, FAILS, INCONCLUSIVE  # noqa: E741 - one letter per verdict keeps the tables of expectations readable
N, X = NOT_MEASURED, NOT_MEASURABLE  # records missing; not like for like on this machine


def rec(study, config, metrics, rep, status="ok", error=None, env=None):
    cfg = {"workload": "sleep", "num_workers": 2, "cores": 2, "start_method": "fork", "epochs": 1, **config}
    cell = "c" + str(abs(hash(json.dumps(cfg, sort_keys=True, default=str))) % 10**12)
    return Record(
        study=study,
        cell_id=cell,
        repetition=rep,
        config=cfg,
        status=status,
        launcher={"kind": "local"},
        started_at="2026-01-01T00:00:00.000+00:00",
        finished_at="2026-01-01T00:00:01.000+00:00",
        metrics=metrics if status == "ok" else {"open_fds_peak": 10},
        error=error,
        env={"torch": "2.14.1", "numpy": "2.4.6", "physical_cores": 2, "ulimit_nofile": [20000, 20000], **(env or {})},
    ).to_json()


def table(records) -> pd.DataFrame:
    return pd.DataFrame([flatten(r, f"/r/{i}.json") for i, r in enumerate(records)])


MIB = 2**20
SPREAD = 0.01


def jitter(rep: int, spread: float = SPREAD) -> float:
    return 1 + spread * (rep - 1)  # 0.99, 1.00, 1.01: small, separated spreads (wide ones: inconclusive)


def decide(rule, df) -> str:
    return rule(df).verdict


SM_BASE = {"fork": 0.3, "forkserver": 3.0, "forkserver+preload": 2.0, "spawn": 5.0}


def sm_table(
    ttfb=SM_BASE, gap=None, uss=None, reps=3, nws=(1, 4), payloads=(0.0, 64.0), uss_copies=True, spread=SPREAD
):
    gap = gap or {"fork": 0.2, "forkserver": 3.0, "forkserver+preload": 0.25, "spawn": 5.0}
    uss = uss or (lambda m, nw, p: nw * (300 + (1.6 * p if m != "fork" else 0)) * MIB)
    out = []
    for m, nw, p, r in itertools.product(ttfb, nws, payloads, range(reps)):
        sm, pre = ("forkserver", m.endswith("preload")) if m.startswith("forkserver") else (m, None)
        cfg = {"start_method": sm, "forkserver_preload": pre, "num_workers": nw, "parent_payload_mb": p, "epochs": 2}
        grow = 1 + 0.2 * (nw - 1) if m == "spawn" else 1
        cpu = nw * (2.5 if m in ("spawn", "forkserver") else 0.1) * jitter(r, spread)
        out.append(
            rec(
                "start-method",
                cfg,
                {
                    "time_to_first_batch_s": ttfb[m] * grow * jitter(r, spread),
                    "cpu_s": {
                        "main": (0.05 + (0.2 * nw * p / 64 if m != "fork" and uss_copies else 0)) * jitter(r, spread),
                        "workers": cpu,
                    },
                    "epoch_gap_s": gap[m] * jitter(r, spread),
                    "samples_per_s": 100.0,
                    "memory_bytes": {"workers_uss_peak": uss(m, nw, p) * jitter(r, spread)},
                },
                r,
            )
        )
    return table(out)


def timeline(nw, start_mib, growth_mib, samples=10):
    return [
        [0.2 * i, 1 + nw, 50 * MIB, 0, 40 * MIB, int(nw * (start_mib + growth_mib * i / (samples - 1)) * MIB)]
        for i in range(samples)
    ] + [[0.2 * samples, 1, 50 * MIB, 0, 40 * MIB, 0]]


def cow_records(growth, reps=3, nws=(1, 4), spread=SPREAD, gc_freeze=None):
    """growth[backing]: MiB per worker, or f(nw), or f(nw, repetition); gc_freeze: None leaves the axis out."""
    out = []
    for b, nw, r in itertools.product(growth, nws, range(reps)):
        f = growth[b]
        g = (f(nw, r) if f.__code__.co_argcount == 2 else f(nw)) if callable(f) else f
        cfg = {"index_backing": b, "index_items": 2_000_000, "num_workers": nw}
        if gc_freeze is not None:
            cfg["gc_freeze"] = gc_freeze
        out.append(
            rec(
                "cow-memory", cfg, {"samples_per_s": 1e5, "memory_timeline": timeline(nw, 20, g * jitter(r, spread))}, r
            )
        )
    return out


def cow_table(growth, reps=3, nws=(1, 4), spread=SPREAD, gc_freeze=None):
    return table(cow_records(growth, reps, nws, spread, gc_freeze))


COW_OK = {"list_str": 30.0, "numpy_object": 28.0, "numpy_bytes": 0.5, "arrow": 1.0}


def pers_table(gap, total, reps=3, epochs=(1, 5), spread=SPREAD):
    out = []
    for sm, p, e, r in itertools.product(("fork", "spawn"), (False, True), epochs, range(reps)):
        g = gap[(sm, p)] if e > 1 else None
        out.append(
            rec(
                "persistence",
                {"start_method": sm, "persistent_workers": p, "epochs": e},
                {
                    "epoch_gap_s": None if g is None else g * jitter(r, spread),
                    "total_s": total[(sm, p)] * e * jitter(r, spread),
                    "epoch_s": [1.0] * e,
                },
                r,
            )
        )
    return table(out)


GAP_OK = {("fork", False): 0.3, ("fork", True): 0.1, ("spawn", False): 5.0, ("spawn", True): 0.1}
TOTAL_OK = {("fork", False): 1.5, ("fork", True): 1.3, ("spawn", False): 6.0, ("spawn", True): 1.4}


def sharing_table(
    fail_fd=True,
    fail_fs=False,
    fds_fd_many=4000,
    thr=(1000.0, 400.0, 1000.0, 800.0),
    reps=3,
    limits=(256, 8192),
    spread=SPREAD,
):
    """thr: samples/s for (fd 1 tensor, fd many, fs 1 tensor, fs many)."""
    out = []
    for s, nw, t, lim, r in itertools.product(
        ("file_descriptor", "file_system"), (2, 8), (1, 256), limits, range(reps)
    ):
        fd = s == "file_descriptor"
        fds = (fds_fd_many if fd and t > 1 else 60) * nw / 8
        cfg = {"sharing_strategy": s, "num_workers": nw, "tensors_per_sample": t, "ulimit_nofile": lim}
        fails = t > 1 and nw == 8 and lim == 256 and ((fd and fail_fd) or (not fd and fail_fs))
        if fails:
            out.append(
                rec(
                    "sharing",
                    cfg,
                    {},
                    r,
                    status="failed",
                    error={"kind": "too_many_open_files", "message": "too many open files"},
                )
            )
            continue
        k = (0 if fd else 2) + (1 if t > 1 else 0)
        out.append(
            rec(
                "sharing",
                cfg,
                {
                    "samples_per_s": thr[k] * jitter(r, spread),
                    "open_fds_peak": fds * jitter(r, spread),
                    "shm_peak_bytes": 0,
                },
                r,
                env={"ulimit_nofile_cell": lim},
            )
        )
    return table(out)


def ddp_block(overlap=0, epochs=2, samples=64):
    """The `ddp` metrics of a 2-rank record whose samplers gave `samples` indices per epoch, `overlap` read twice."""
    rank = {"rank": 0, "host": "h", "step_s": 0.01, "allreduce_s": 0.001, "grad_local": 1.0, "grad_reduced": 1.5}
    return {
        "backend": "gloo",
        "world_size": 2,
        "nodes": 1,
        "step_s": 0.01,
        "allreduce_s": 0.001,
        "epoch_samples": samples,
        "epochs_counted": epochs,
        "share_reads": epochs * samples,
        "share_overlap": 2 * overlap,
        "share_missing": overlap,
        "grads_equal": True,
        "ranks": [{**rank, "params": 3.0}, {**rank, "rank": 1, "grad_local": 2.0, "params": 3.0}],
    }


def over_table(curve, ranks2=None, reps=3, spread=SPREAD, mode=None, overlap=0):
    """CPU-bound curves (one rank) and 2-rank cells at the given workers: loaders side by side, or with
    `mode = "ddp"` real DDP ranks whose shares overlap in `overlap` indices."""
    out = []
    for w in ("cpu", "jpeg"):
        for nw, v in curve.items():
            for r in range(reps):
                out.append(
                    rec(
                        "oversubscription",
                        {"workload": w, "num_workers": nw, "ranks": 1},
                        {"samples_per_s": v * jitter(r, spread)},
                        r,
                    )
                )
    for nw, v in (ranks2 or {}).items():
        for r in range(reps):
            out.append(
                rec(
                    "oversubscription",
                    {"workload": "cpu", "num_workers": nw, "ranks": 2} | ({"rank_mode": mode} if mode else {}),
                    {"samples_per_s": v * jitter(r, spread)} | ({"ddp": ddp_block(overlap)} if mode == "ddp" else {}),
                    r,
                )
            )
    return table(out)


PEAK = {1: 500.0, 2: 900.0, 3: 920.0, 4: 880.0, 6: 800.0, 8: 700.0}


def rng_table(numpy_within=0.0, python_within=0.0, torch_within=0.0, across=0.0, seeded_dups=0.0, reps=3, epochs=3):
    out = []
    for nw, wi, p, r in itertools.product((0, 2, 4), ("none", "seed_all"), (False, True), range(reps)):
        multi = nw >= 2 and wi == "none"
        dup = lambda v, multi=multi, nw=nw: v if multi else (seeded_dups if nw >= 2 else 0.0)
        acr = lambda v, multi=multi, p=p: (v if multi and not p else 0.0) if epochs > 1 else None
        m = {
            "rng_duplicates": {
                "python": {"within_epoch": dup(python_within), "across_epochs": acr(across)},
                "numpy": {"within_epoch": dup(numpy_within), "across_epochs": acr(across)},
                "torch": {"within_epoch": torch_within if nw >= 2 else 0.0, "across_epochs": acr(0.0)},
            }
        }
        out.append(
            rec(
                "rng",
                {
                    "workload": "rng",
                    "num_workers": nw,
                    "worker_init": wi,
                    "persistent_workers": p if nw else None,
                    "epochs": epochs,
                },
                m,
                r,
            )
        )
    return table(out)


def in_order_table(p99, thr, reps=3, spread=SPREAD, order=None, occasional=None):
    """`order`, when given: (in_order, straggler) -> per repetition (batches out of order, fingerprint).
    `occasional`, when given: in_order -> throughput of cells with occasional stragglers (1 sample in 40)."""
    out = []
    for io, slow, r in itertools.product((True, False), (0.0, 10.0), range(reps)):
        k = (io, slow > 0)
        metrics = {
            "batch_wait_s": {"p99": p99[k] * jitter(r, spread), "p50": 0.001},
            "samples_per_s": thr[k] * jitter(r, spread),
        }
        if order is not None:
            moved, fingerprint = order[k][r]
            metrics["order"] = {"batches": 120, "out_of_order": moved, "fingerprint": fingerprint}
        out.append(rec("in-order", {"in_order": io, "slow_worker_ms": slow, "num_workers": 4}, metrics, r))
    for io, r in itertools.product(occasional or {}, range(reps)):
        metrics = {"batch_wait_s": {"p99": 0.02, "p50": 0.001}, "samples_per_s": occasional[io] * jitter(r, spread)}
        cfg = {"in_order": io, "slow_worker_ms": 10.0, "slow_every": 40, "num_workers": 4}
        out.append(rec("in-order", cfg, metrics, r))
    return table(out)


def cheap_rate(cores: int, size: int, work: float, nw: int) -> float:
    """In-memory samples: 0 workers pay the work and a tiny collate; workers pay a hand-over per sample (more for
    bigger samples) and run on at most `cores` cores, the main process receiving at its own ceiling."""
    if nw == 0:
        return 1e6 / (work + 1 + size * 1e-5)
    return min(min(nw, cores) * 1e6 / (work + 25 + size * 1e-4), 1e6 / (15 + size * 5e-5))


def cheap_table(
    rate=cheap_rate, reps=3, works=(0.0, 10.0, 30.0, 100.0, 1000.0), sizes=(16, 150528), spread=SPREAD
) -> pd.DataFrame:
    """cheap-work cells on 1 and 2 cores, num_workers 0, 1, 2: samples/s `rate(cores, size, work, nw)`."""
    out = []
    for cores, size, work, nw, r in itertools.product((1, 2), sizes, works, (0, 1, 2), range(reps)):
        cfg = {"workload": "inmem", "work_us": work, "sample_bytes": size, "num_workers": nw, "cores": cores}
        out.append(rec("cheap-work", cfg, {"samples_per_s": rate(cores, size, work, nw) * jitter(r, spread)}, r))
    return table(out)


def curve_table(curves: dict, reps=3, spread=SPREAD, ttfb=None, ctx=None) -> pd.DataFrame:
    """quick-like plain loading: curves[(workload, cores)] = {num_workers: samples/s}; `ttfb(workload, nw)` the
    first batch in s, `ctx(workload, cores, nw)` involuntary context switches per sample."""
    out = []
    for (w, cores), curve in curves.items():
        for nw, v in curve.items():
            for r in range(reps):
                x = v * jitter(r, spread)
                cfg = {"workload": w, "num_workers": nw, "cores": cores, "sleep_ms": 2.0 if w == "sleep" else None}
                m = {
                    "samples_per_s": x,
                    "end_to_end_samples_per_s": x,
                    "total_s": 2.0,
                    "time_to_first_batch_s": (ttfb(w, nw) if ttfb else 0.1 + 0.05 * min(nw, 1)) * jitter(r, spread),
                    "ctx_switches": {
                        "voluntary": 100,
                        "involuntary": int((ctx(w, cores, nw) if ctx else 0.01) * x * 2.0 * jitter(r, spread)),
                    },
                }
                out.append(rec("quick", cfg, m, r))
    return table(out)


#: 2 cores: sleep scales far past them, cpu stops at them
CURVES = {
    ("sleep", 2): {0: 450.0, 1: 480.0, 2: 950.0, 4: 1900.0, 8: 3700.0},
    ("cpu", 2): {0: 500.0, 1: 480.0, 2: 930.0, 4: 920.0, 8: 900.0},
}


#: the shm-size study's settings (workers, prefetch_factor, batch size): one axis at a time around (2, 2, 32)
SHM_STAR = [(1, 2, 32), (2, 2, 32), (4, 2, 32), (2, 1, 32), (2, 4, 32), (2, 2, 16), (2, 2, 64)]


def shm_table(sizes=(16, 64, 1024), reps=3, spread=SPREAD) -> pd.DataFrame:
    """Cells with their own /dev/shm: a setting runs where its computed size fits, else fails for want of /dev/shm;
    the peak is every batch in flight (workers x prefetch + 2) of 256 KiB samples."""
    from loaderbench.measure.private_shm import in_flight_batches, needed_bytes

    records = []
    for (w, pf, bs), size in itertools.product(SHM_STAR, sizes):
        batch = bs * 256 * 1024
        need = needed_bytes(batch, w, pf)
        fits = need <= size * MIB
        for rep in range(reps):
            metrics = {
                "samples_per_s": 1500.0 * jitter(rep, spread),
                "shm_peak_bytes": int(in_flight_batches(w, pf) * batch * jitter(rep, spread)),
                "shm_private": {
                    "size_bytes": size * MIB,
                    "batch_bytes": batch,
                    "in_flight_batches": in_flight_batches(w, pf),
                    "needed_bytes": need,
                    "left_segments": 0,
                    "left_bytes": 0,
                },
            }
            config = {"num_workers": w, "prefetch_factor": pf, "batch_size": bs, "shm_size_mb": size, "step_ms": 20.0}
            error = None if fits else {"kind": "shm_exhausted", "message": "/dev/shm of shm_size_mb is too small"}
            records.append(rec("shm-size", config, metrics, rep, "ok" if fits else "failed", error))
    return table(records)


def batch_table(per_sample_s: float = 2.5e-4, per_batch_s: float = 0.0, reps=3, spread=SPREAD) -> pd.DataFrame:
    """cpu cells with no step at batch sizes 16-128, 0 and 2 workers: a batch costs per_batch_s plus per_sample_s
    a sample (2 workers: 1.8x as fast)."""
    records = []
    for w, bs in itertools.product((0, 2), (16, 32, 64, 128)):
        per = (per_sample_s + per_batch_s / bs) / (1.8 if w else 1)
        for rep in range(reps):
            metrics = {"samples_per_s": jitter(rep, spread) / per}
            records.append(rec("batch-size", {"workload": "cpu", "num_workers": w, "batch_size": bs}, metrics, rep))
    return table(records)


def sharing_size_rate(strategy: str, kb: float) -> float:
    """Tensors per second: file_descriptor pays less per tensor, file_system less per byte (synthetic)."""
    fixed, per_kb = (60e-6, 4e-6) if strategy == "file_descriptor" else (90e-6, 2e-6)
    return 1 / (fixed + per_kb * kb)


def sharing_size_table(rate=sharing_size_rate, reps=3, spread=SPREAD) -> pd.DataFrame:
    records = []
    for s, kb, r in itertools.product(("file_descriptor", "file_system"), (1.0, 256.0, 65536.0), range(reps)):
        cfg = {"sharing_strategy": s, "sample_kb": kb, "batch_size": 1, "tensors_per_sample": 1}
        records.append(rec("sharing-size", cfg, {"samples_per_s": rate(s, kb) * jitter(r, spread)}, r))
    return table(records)


def sharing_switch_table(persistent_seen: list[str], fresh_seen: list[str], reps=3) -> pd.DataFrame:
    """sharing_switch cells (file_descriptor, switched to file_system): what each epoch's first batch showed."""
    records = []
    for persistent, seen in ((True, persistent_seen), (False, fresh_seen)):
        for r in range(reps):
            cfg = {
                "sharing_strategy": "file_descriptor",
                "sharing_switch": "file_system",
                "persistent_workers": persistent,
                "epochs": len(seen),
            }
            records.append(rec("sharing-size-switch", cfg, {"samples_per_s": 1000.0, "sharing_seen": seen}, r))
    return table(records)


def lazy_table(eager_mib: dict, lazy_mib: float = 20.0, reps=3, spread=SPREAD) -> pd.DataFrame:
    """cow-memory-lazy cells at 2 workers: peak USS per worker of the eager datasets, eager_mib[(backing, start
    method)] for the backings decoded and decoded_objects, and of the lazy (list_str) one."""
    out = []
    backings = sorted({b for b, _ in eager_mib}) + ["list_str"]
    for sm, b, r in itertools.product(("fork", "spawn"), backings, range(reps)):
        peak = eager_mib[(b, sm)] if b != "list_str" else lazy_mib
        cfg = {"index_backing": b, "index_items": 2000, "num_workers": 2, "start_method": sm, "gc_freeze": True}
        metrics = {"samples_per_s": 1e4, "memory_timeline": timeline(2, peak * jitter(r, spread), 0.0)}
        out.append(rec("cow-memory-lazy", cfg, metrics, r))
    return table(out)


def state_table(stale: dict, held_mib: dict, reps=3, samples=192) -> pd.DataFrame:
    """persistence-state cells: stale[persistent] samples of `samples` that saw the old attribute, and
    held_mib[(persistent, second_loader)] the workers' USS held over the run (2 workers)."""
    out = []
    for persistent, second, r in itertools.product((True, False), (False, True), range(reps)):
        cfg = {"persistent_workers": persistent, "second_loader": second, "epoch_attribute": True, "epochs": 4}
        metrics = {
            "samples_per_s": 1000.0,
            "memory_timeline": timeline(2, held_mib[(persistent, second)] * jitter(r) / 2, 0.0),
            "epoch_attribute": {"samples": samples, "stale": stale[persistent]},
        }
        out.append(rec("persistence-state", cfg, metrics, r))
    return table(out)


def threads_rate(workload: str, cores: int, method: str | None, nw: int) -> float:
    """samples/s of a cell of the threads study: pure-Python work stays at one core with threads; the rest scales
    with the cores, threads as processes."""
    if nw == 0:
        return 1000.0
    if workload == "cpu" and method == "thread":
        return 950.0
    return 1000.0 * min(nw, cores if workload != "sleep" else nw)


def threads_table(rate=threads_rate, pss_mib=None, ttfb_s=None, reps=3, spread=SPREAD) -> pd.DataFrame:
    """threads cells (loader = nodes) on 1 and 2 cores for cpu, zlib and sleep: samples/s `rate(workload, cores,
    method, nw)`, PSS `pss_mib(method, nw)` MiB, first batch `ttfb_s(method, nw)` seconds."""
    pss_mib = pss_mib or (lambda m, nw: 400 + (250 * nw if m == "process" else 5 * nw))
    ttfb_s = ttfb_s or (lambda m, nw: 0.01 + (0.03 * nw if m == "process" else 0.0))
    out = []
    cells = [(0, None)] + [(nw, m) for nw in (1, 2, 4) for m in ("thread", "process")]
    for workload, cores, (nw, m), r in itertools.product(("cpu", "zlib", "sleep"), (1, 2), cells, range(reps)):
        cfg = {"workload": workload, "cores": cores, "num_workers": nw, "loader": "nodes", "worker_method": m}
        metrics = {
            "samples_per_s": rate(workload, cores, m, nw) * jitter(r, spread),
            "memory_bytes": {"pss_peak": int(pss_mib(m, nw) * MIB * jitter(r, spread))},
            "time_to_first_batch_s": ttfb_s(m, nw) * jitter(r, spread),
        }
        out.append(rec("threads", cfg, metrics, r))
    return table(out)


def ckpt_rate(workload: str, cores: int, nw: int, n: int) -> float:
    """Samples/s that snapshots slow down: 10% at every step, falling as 1/n."""
    base = {"cpu": 4000.0, "jpeg": 900.0}[workload] * cores
    return base / (1 + 0.10 / n) if n else base


def ckpt_table(rate=ckpt_rate, reps=3, replay=None, exactly_once=True, spread=SPREAD) -> pd.DataFrame:
    """checkpointing cells: cpu and jpeg on 1 and 2 cores, num_workers 0/2/4, snapshot_every_n_steps 0, 1, 4,
    16, 64 uninterrupted; cpu on 2 cores resumed at steps 40 and 63, replaying `replay(at, n, nw, bs)` samples
    (default: what torchdata 0.11 does, (at mod n) x bs with workers, 0 without)."""
    replay = replay or (lambda at, n, nw, bs: (at % n) * bs if nw else 0)
    out = []
    for workload, cores, nw, n, r in itertools.product(
        ("cpu", "jpeg"), (1, 2), (0, 2, 4), (0, 1, 4, 16, 64), range(reps)
    ):
        if nw == 0 and n > 1:
            continue
        cfg = {"workload": workload, "cores": cores, "num_workers": nw, "batch_size": 16, "snapshot_every_n_steps": n}
        out.append(rec("checkpointing", cfg, {"samples_per_s": rate(workload, cores, nw, n) * jitter(r, spread)}, r))
    for at, nw, n, r in itertools.product((40, 63), (0, 2, 4), (1, 4, 16, 64), range(reps)):
        if nw == 0 and n > 1:
            continue
        cfg = {
            "workload": "cpu",
            "cores": 2,
            "num_workers": nw,
            "batch_size": 16,
            "snapshot_every_n_steps": n,
            "resume_at": at,
        }
        replayed = replay(at, n, nw, 16)
        resume = {
            "replayed_samples": replayed,
            "replayed_batches": replayed / 16,
            "restart_to_first_batch_s": 0.05 + 0.001 * replayed,
            "state_bytes": 4000,
            "steps_since_snapshot": at % n if nw else 0,
            "lost": 0 if exactly_once else 16,
            "duplicated": 0,
            "exactly_once": exactly_once,
            "same_order": exactly_once,
        }
        metrics = {"samples_per_s": rate("cpu", 2, nw, n) * jitter(r, spread), "resume": resume}
        out.append(rec("checkpointing", cfg, metrics, r))
    return table(out)

"""analysis.claims: every rule decides correctly on small synthetic record sets (holds, does not hold, not
enough data), built as the runner writes records and flattened by analysis.records, so column names are
the real ones."""

from __future__ import annotations

import itertools
import json

import pandas as pd
import pytest

from analysis import claims as C
from analysis.records import flatten

H, F, N = C.HOLDS, C.FAILS, C.NOT_MEASURABLE
MIB = 2**20


def rec(study, config, metrics, rep, status="ok", error=None, env=None):
    cfg = {"workload": "sleep", "num_workers": 2, "cores": 2, "start_method": "fork", "epochs": 1, **config}
    cell = "c" + str(abs(hash(json.dumps(cfg, sort_keys=True, default=str))) % 10**12)
    r = {"schema": "loaderbench.record/1", "study": study, "cell_id": cell, "repetition": rep, "status": status,
         "config": cfg, "metrics": metrics if status == "ok" else {"open_fds_peak": 10},
         "env": {"torch": "2.14.1", "numpy": "2.4.6", "physical_cores": 2, "ulimit_nofile": [20000, 20000],
                 **(env or {})}}
    if error:
        r["error"] = error
    return r


def table(records) -> pd.DataFrame:
    return pd.DataFrame([flatten(r, f"/r/{i}.json") for i, r in enumerate(records)])


def jitter(rep: int) -> float:
    return 1 + 0.01 * (rep - 1)  # 0.99, 1.00, 1.01: small, separated spreads


def decide(rule, df) -> str:
    return rule(df).verdict


# --------------------------------------------------------------------------------------------------------
# start-method

SM_BASE = {"fork": 0.3, "forkserver": 3.0, "forkserver+preload": 2.0, "spawn": 5.0}


def sm_table(ttfb=SM_BASE, gap=None, uss=None, reps=3, nws=(1, 4), payloads=(0.0, 64.0)):
    gap = gap or {"fork": 0.2, "forkserver": 3.0, "forkserver+preload": 0.3, "spawn": 5.0}
    uss = uss or (lambda m, nw, p: nw * (300 + (1.6 * p if m != "fork" else 0)) * MIB)
    out = []
    for m, nw, p, r in itertools.product(ttfb, nws, payloads, range(reps)):
        sm, pre = ("forkserver", m.endswith("preload")) if m.startswith("forkserver") else (m, None)
        cfg = {"start_method": sm, "forkserver_preload": pre, "num_workers": nw, "parent_payload_mb": p, "epochs": 2}
        grow = 1 + 0.2 * (nw - 1) if m == "spawn" else 1
        out.append(rec("start-method", cfg, {"time_to_first_batch_s": ttfb[m] * grow * jitter(r),
                                             "epoch_gap_s": gap[m] * jitter(r), "samples_per_s": 100.0,
                                             "memory_bytes": {"workers_uss_peak": uss(m, nw, p) * jitter(r)}}, r))
    return table(out)


def test_start_method_rules_hold():
    df = sm_table()
    for rule in (C.fork_starts_fastest, C.spawn_pays_startup, C.spawn_pickles_dataset, C.forkserver_between,
                 C.preload_restarts_fast):
        assert decide(rule, df) == H, rule.__name__


def test_start_method_rules_fail():
    # forkserver as slow as spawn (Python 3.11 without preload); fork not fastest; no per-worker copy
    df = sm_table(ttfb={"fork": 6.0, "forkserver": 5.0, "forkserver+preload": 2.0, "spawn": 5.0},
                  gap={"fork": 0.2, "forkserver": 3.0, "forkserver+preload": 2.5, "spawn": 5.0},
                  uss=lambda m, nw, p: nw * 300 * MIB)
    for rule in (C.fork_starts_fastest, C.spawn_pays_startup, C.spawn_pickles_dataset, C.forkserver_between,
                 C.preload_restarts_fast):
        assert decide(rule, df) == F, rule.__name__


def test_start_method_rules_not_enough_data():
    df = sm_table(reps=2)
    for rule in (C.fork_starts_fastest, C.spawn_pays_startup, C.spawn_pickles_dataset, C.forkserver_between,
                 C.preload_restarts_fast):
        assert decide(rule, df) == N, rule.__name__
    assert decide(C.spawn_pickles_dataset, sm_table(payloads=(0.0,))) == N


# --------------------------------------------------------------------------------------------------------
# cow-memory


def timeline(nw, start_mib, growth_mib, samples=10):
    return [[0.2 * i, 1 + nw, 50 * MIB, 0, 40 * MIB, int(nw * (start_mib + growth_mib * i / (samples - 1)) * MIB)]
            for i in range(samples)] + [[0.2 * samples, 1, 50 * MIB, 0, 40 * MIB, 0]]


def cow_table(growth, reps=3, nws=(1, 4)):
    out = []
    for b, nw, r in itertools.product(growth, nws, range(reps)):
        g = growth[b](nw) if callable(growth[b]) else growth[b]
        out.append(rec("cow-memory", {"index_backing": b, "index_items": 2_000_000, "num_workers": nw},
                       {"samples_per_s": 1e5, "memory_timeline": timeline(nw, 20, g * jitter(r))}, r))
    return table(out)


COW_OK = {"list_str": 30.0, "numpy_object": 28.0, "numpy_bytes": 0.5, "arrow": 1.0}


def test_timeline_growth_uses_samples_with_all_workers_alive():
    g, end = C.timeline_growth(json.dumps(timeline(4, 20, 30)), 4)
    assert g == pytest.approx(4 * 30 * MIB, rel=1e-6) and end == pytest.approx(4 * 50 * MIB, rel=1e-6)
    assert pd.isna(C.timeline_growth([[0, 1, 0, 0, 0, 0]], 4)[0])


@pytest.mark.parametrize("rule", [C.cow_grows("list_str"), C.cow_grows("numpy_object"), C.cow_flat,
                                  C.cow_grows_with_workers])
def test_cow_rules(rule):
    assert decide(rule, cow_table(COW_OK)) == H
    flat = {b: 1.0 for b in COW_OK}  # nothing grows
    assert decide(rule, cow_table(flat)) == (H if rule is C.cow_flat else F)
    assert decide(rule, cow_table(COW_OK, reps=2)) == N


def test_cow_flat_fails_when_bytes_grow():
    assert decide(C.cow_flat, cow_table({**COW_OK, "numpy_bytes": 20.0})) == F


def test_cow_grows_with_workers_fails_when_per_worker_growth_shrinks():
    # total growth the same at 1 and 4 workers (the copy shared, not per worker)
    df = cow_table({**COW_OK, "list_str": lambda nw: 30.0 / nw})
    assert decide(C.cow_grows_with_workers, df) == F


# --------------------------------------------------------------------------------------------------------
# persistence


def pers_table(gap, total, reps=3, epochs=(1, 5)):
    out = []
    for sm, p, e, r in itertools.product(("fork", "spawn"), (False, True), epochs, range(reps)):
        g = gap[(sm, p)] if e > 1 else None
        out.append(rec("persistence", {"start_method": sm, "persistent_workers": p, "epochs": e},
                       {"epoch_gap_s": None if g is None else g * jitter(r),
                        "total_s": total[(sm, p)] * e * jitter(r), "epoch_s": [1.0] * e}, r))
    return table(out)


GAP_OK = {("fork", False): 0.3, ("fork", True): 0.1, ("spawn", False): 5.0, ("spawn", True): 0.1}
TOTAL_OK = {("fork", False): 1.5, ("fork", True): 1.3, ("spawn", False): 6.0, ("spawn", True): 1.4}


@pytest.mark.parametrize("rule", [C.persistent_removes_gap, C.gap_grows_with_spawn, C.persistent_speeds_up_run])
def test_persistence_rules(rule):
    assert decide(rule, pers_table(GAP_OK, TOTAL_OK)) == H
    same = {k: 1.0 for k in GAP_OK}
    assert decide(rule, pers_table(same, same)) == F
    assert decide(rule, pers_table(GAP_OK, TOTAL_OK, reps=2)) == N
    assert decide(rule, pers_table(GAP_OK, TOTAL_OK, epochs=(1,))) == N


# --------------------------------------------------------------------------------------------------------
# sharing


def sharing_table(fail_fd=True, fail_fs=False, fds_fd_many=4000, thr=(1000.0, 400.0, 1000.0, 800.0), reps=3,
                  limits=(256, 8192)):
    """thr: samples/s for (fd 1 tensor, fd many, fs 1 tensor, fs many)."""
    out = []
    for s, nw, t, lim, r in itertools.product(("file_descriptor", "file_system"), (2, 8), (1, 256), limits,
                                              range(reps)):
        fd = s == "file_descriptor"
        fds = (fds_fd_many if fd and t > 1 else 60) * nw / 8
        cfg = {"sharing_strategy": s, "num_workers": nw, "tensors_per_sample": t, "ulimit_nofile": lim}
        fails = t > 1 and nw == 8 and lim == 256 and ((fd and fail_fd) or (not fd and fail_fs))
        if fails:
            out.append(rec("sharing", cfg, {}, r, status="failed",
                           error={"kind": "too_many_open_files", "message": "too many open files"}))
            continue
        k = (0 if fd else 2) + (1 if t > 1 else 0)
        out.append(rec("sharing", cfg, {"samples_per_s": thr[k] * jitter(r), "open_fds_peak": fds * jitter(r),
                                        "shm_peak_bytes": 0}, r, env={"ulimit_nofile_cell": lim}))
    return table(out)


def test_sharing_fd_runs_out():
    assert decide(C.fd_runs_out, sharing_table()) == H
    assert decide(C.fd_runs_out, sharing_table(fail_fs=True)) == F
    # no failure and never near the limit: the claim was not put to the test
    assert decide(C.fd_runs_out, sharing_table(fail_fd=False, fds_fd_many=100, limits=(8192,))) == N
    # no failure although descriptors in use reached 80% of the limit
    assert decide(C.fd_runs_out, sharing_table(fail_fd=False, fds_fd_many=7000, limits=(8192,))) == F


def test_sharing_per_tensor_rules():
    assert decide(C.fd_per_tensor, sharing_table()) == H
    assert decide(C.fd_per_tensor, sharing_table(fds_fd_many=60)) == F
    assert decide(C.fd_per_tensor, sharing_table(reps=2)) == N
    assert decide(C.per_tensor_cost_differs, sharing_table()) == H
    assert decide(C.per_tensor_cost_differs, sharing_table(thr=(1000.0, 800.0, 1000.0, 810.0))) == F
    assert decide(C.per_tensor_cost_differs, sharing_table(reps=2)) == N


# --------------------------------------------------------------------------------------------------------
# ladder


def ladder_table(speed, consumer="cpu", reps=3, pin_effective=False):
    steps = {"baseline": {"num_workers": 0}, "+workers": {"num_workers": 4},
             "+pin_memory": {"num_workers": 4, "pin_memory": True},
             "+persistent": {"num_workers": 4, "pin_memory": True, "persistent_workers": True},
             "+prefetcher": {"num_workers": 4, "pin_memory": True, "persistent_workers": True, "prefetcher": True},
             "+batched": {"num_workers": 4, "pin_memory": True, "persistent_workers": True, "prefetcher": True,
                          "batched": True}}
    out = []
    for name, cfg in steps.items():
        full = {"pin_memory": False, "persistent_workers": False if cfg["num_workers"] else None, "prefetcher": False,
                "batched": False, "workload": "tutorial", "model": "tutorial", **cfg}
        for r in range(reps):
            out.append(rec("ladder", full, {"end_to_end_samples_per_s": 100 * speed[name] * jitter(r),
                                            "consumer": consumer, "device": "cuda:0" if consumer == "gpu" else "cpu",
                                            "pin_memory_effective": pin_effective and full["pin_memory"]}, r))
    return table(out)


TUTORIAL = {"baseline": 1.0, **C.PUBLISHED}


def test_ladder_rungs_are_recognised():
    df = ladder_table(TUTORIAL)
    assert list(dict.fromkeys(C.ladder_rung(df))) == list(C.RUNGS)


@pytest.mark.parametrize("rung", C.RUNGS[1:])
def test_ladder_matches(rung):
    rule = C.ladder_matches(rung)
    assert decide(rule, ladder_table(TUTORIAL, consumer="gpu", pin_effective=True)) == H
    assert decide(rule, ladder_table({k: 1.0 for k in TUTORIAL}, consumer="gpu", pin_effective=True)) == F
    assert decide(rule, ladder_table(TUTORIAL, consumer="gpu", reps=2)) == N
    assert decide(rule, ladder_table(TUTORIAL, consumer="cpu")) == N  # not like for like without a GPU


@pytest.mark.parametrize("rung,prev", [("+workers", "baseline"), ("+persistent", "+pin_memory"),
                                       ("+batched", "+prefetcher")])
def test_ladder_step_helps(rung, prev):
    rule = C.ladder_step_helps(rung, prev)
    assert decide(rule, ladder_table(TUTORIAL)) == H
    assert decide(rule, ladder_table({k: 1.0 for k in TUTORIAL})) == F
    assert decide(rule, ladder_table(TUTORIAL, reps=2)) == N


# --------------------------------------------------------------------------------------------------------
# oversubscription


def over_table(curve, ranks2=None, reps=3):
    out = []
    for w in ("cpu", "jpeg"):
        for nw, v in curve.items():
            for r in range(reps):
                out.append(rec("oversubscription", {"workload": w, "num_workers": nw, "ranks": 1},
                               {"samples_per_s": v * jitter(r)}, r))
    for nw, v in (ranks2 or {}).items():
        for r in range(reps):
            out.append(rec("oversubscription", {"workload": "cpu", "num_workers": nw, "ranks": 2},
                           {"samples_per_s": v * jitter(r)}, r))
    return table(out)


PEAK = {1: 500.0, 2: 900.0, 3: 920.0, 4: 880.0, 6: 800.0, 8: 700.0}


def test_oversubscription_rules():
    assert decide(C.peaks_near_cores, over_table(PEAK)) == H
    assert decide(C.degrades_past_cores, over_table(PEAK)) == H
    linear = {n: 100.0 * n for n in PEAK}  # keeps scaling: peaks at 8 workers on 2 cores
    assert decide(C.peaks_near_cores, over_table(linear)) == F
    assert decide(C.degrades_past_cores, over_table(linear)) == F
    assert decide(C.peaks_near_cores, over_table(PEAK, reps=2)) == N
    assert decide(C.degrades_past_cores, over_table({1: 500.0, 2: 900.0})) == N  # nothing past the cores
    assert decide(C.ranks_share_cores, over_table(PEAK, {1: 900.0, 2: 700.0, 4: 600.0})) == H
    assert decide(C.ranks_share_cores, over_table(PEAK, {1: 900.0, 2: 900.0, 4: 880.0})) == F
    assert decide(C.ranks_share_cores, over_table(PEAK)) == N
    assert decide(C.ranks_share_cores, over_table(PEAK, {1: 900.0, 2: 700.0}, reps=2)) == N


# --------------------------------------------------------------------------------------------------------
# rng


def rng_table(numpy_within=0.0, python_within=0.0, torch_within=0.0, across=0.0, seeded_dups=0.0, reps=3,
              epochs=3):
    out = []
    for nw, wi, p, r in itertools.product((0, 2, 4), ("none", "seed_all"), (False, True), range(reps)):
        multi = nw >= 2 and wi == "none"
        dup = lambda v: v if multi else (seeded_dups if nw >= 2 else 0.0)  # noqa: E731
        acr = lambda v: (v if multi and not p else 0.0) if epochs > 1 else None  # noqa: E731
        m = {"rng_duplicates": {
            "python": {"within_epoch": dup(python_within), "across_epochs": acr(across)},
            "numpy": {"within_epoch": dup(numpy_within), "across_epochs": acr(across)},
            "torch": {"within_epoch": torch_within if nw >= 2 else 0.0, "across_epochs": acr(0.0)}}}
        out.append(rec("rng", {"workload": "rng", "num_workers": nw, "worker_init": wi,
                               "persistent_workers": p if nw else None, "epochs": epochs}, m, r))
    return table(out)


def test_rng_rules():
    old = rng_table(numpy_within=0.75, python_within=0.75, across=1.0)  # torch < 1.9 behaviour
    new = rng_table()  # every source seeded per worker
    assert decide(C.rng_repeats("numpy"), old) == H and decide(C.rng_repeats("numpy"), new) == F
    assert decide(C.rng_repeats("python"), old) == H and decide(C.rng_repeats("python"), new) == F
    assert decide(C.rng_repeats_across_epochs, old) == H and decide(C.rng_repeats_across_epochs, new) == F
    assert decide(C.torch_never_repeats, new) == H
    assert decide(C.torch_never_repeats, rng_table(torch_within=0.5)) == F
    assert decide(C.seed_all_no_duplicates, new) == H
    assert decide(C.seed_all_no_duplicates, rng_table(seeded_dups=0.5)) == F
    empty = rng_table().iloc[0:0]
    for rule in (C.rng_repeats("numpy"), C.torch_never_repeats, C.rng_repeats_across_epochs,
                 C.seed_all_no_duplicates):
        assert decide(rule, empty) == N
    assert decide(C.rng_repeats_across_epochs, rng_table(epochs=1)) == N


# --------------------------------------------------------------------------------------------------------
# in-order


def in_order_table(p99, thr, reps=3):
    out = []
    for io, slow, r in itertools.product((True, False), (0.0, 10.0), range(reps)):
        k = (io, slow > 0)
        out.append(rec("in-order", {"in_order": io, "slow_worker_ms": slow, "num_workers": 4},
                       {"batch_wait_s": {"p99": p99[k] * jitter(r), "p50": 0.001}, "samples_per_s": thr[k] * jitter(r)},
                       r))
    return table(out)


def test_in_order_rules():
    p99 = {(True, False): 0.01, (False, False): 0.01, (True, True): 0.08, (False, True): 0.02}
    thr = {(True, False): 1000.0, (False, False): 1000.0, (True, True): 400.0, (False, True): 420.0}
    assert decide(C.out_of_order_cuts_tail, in_order_table(p99, thr)) == H
    assert decide(C.out_of_order_keeps_throughput, in_order_table(p99, thr)) == H
    same = {k: 0.08 for k in p99}
    assert decide(C.out_of_order_cuts_tail, in_order_table(same, thr)) == F
    faster = {**thr, (False, True): 800.0}
    assert decide(C.out_of_order_keeps_throughput, in_order_table(p99, faster)) == F
    assert decide(C.out_of_order_cuts_tail, in_order_table(p99, thr, reps=2)) == N
    assert decide(C.out_of_order_keeps_throughput, in_order_table(p99, thr, reps=2)) == N


# --------------------------------------------------------------------------------------------------------
# the table


def test_claims_table_names_every_question_and_only_known_verdicts(tmp_path):
    df = pd.concat([sm_table(), in_order_table({(a, b): 0.01 for a in (True, False) for b in (True, False)},
                                               {(a, b): 1.0 for a in (True, False) for b in (True, False)})])
    t = C.claims_table(df)
    assert list(t.columns) == C.COLUMNS
    assert set(t["verdict"]) <= set(C.VERDICTS)
    assert len(t) == len(C.CLAIMS)
    absent = t[t["study"] == "rng"]
    assert (absent["verdict"] == N).all() and absent["evidence"].str.contains("no records").all()
    assert (t[t["study"] == "start-method"]["verdict"] == H).all()
    paths = C.write_claims(df, tmp_path)
    assert [p.name for p in paths] == ["claims.csv", "claims.md"]
    assert pd.read_csv(paths[0]).shape == t.shape
    md = paths[1].read_text()
    assert "## start-method" in md and "**holds**" in md


def test_question_of_by_name_and_by_axes():
    assert C.question_of("start-method") == "start-method"
    assert C.question_of("in-order-64c") == "in-order"
    assert C.question_of("quick") is None
    renamed = sharing_table().assign(study="fd-vs-fs")
    assert C.question_of("fd-vs-fs", renamed) == "sharing"
    assert C.question_of("x", cow_table(COW_OK)) == "cow-memory"


def test_a_rule_that_cannot_read_the_records_is_not_measurable():
    df = table([rec("persistence", {"persistent_workers": True, "epochs": 2}, {"total_s": 1.0}, 0)])
    df = df.drop(columns=["epoch_gap_s"])
    t = C.claims_for(df, "persistence")
    assert set(t["verdict"]) == {N}

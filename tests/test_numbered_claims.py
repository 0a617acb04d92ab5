"""The numbered catalogue of claims and the rules added for it: every number gets a row, and every new rule
decides correctly on small synthetic record sets (holds, does not hold, inconclusive, not measured yet), as in
tests/test_claims.py."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from loaderbench.analysis.claims.claims_table import (
    CLAIMS,
    LATER,
    NUMBERED_COLUMNS,
    claims_table,
    numbered,
    write_claims,
)
from loaderbench.analysis.questions.cheap_work import WIN, crossovers, zero_wins_when_cheap
from loaderbench.analysis.questions.gpu_feed import (
    PINNED_H2D_MIN,
    few_workers_suffice,
    non_blocking_frees_host,
    pin_thread_bottleneck,
    pinned_copies_faster,
)
from loaderbench.analysis.questions.ladder import ABOUT_ONE, ladder_step_about_one
from loaderbench.analysis.questions.start_method import spawn_uses_more_memory
from loaderbench.analysis.questions.storage import REMOTE_SHARE, remote_is_io_bound
from loaderbench.analysis.rules.catalogue import BY_NUMBER, CATALOGUE
from loaderbench.analysis.rules.claim import Claim
from loaderbench.analysis.rules.step_overlap import knee_at_prep_over_train, step_is_max_not_sum
from loaderbench.analysis.rules.worker_costs import (
    CTX_RISE,
    FIRST_BATCH_MIN,
    IO_ENOUGH,
    PYTHON_LOOP,
    REAL_LOAD,
    first_batch_without_workers,
    io_rule_of_thumb,
    readable_tracebacks,
    sleep_scales_past_cores,
    switches_rise_past_cores,
)
from loaderbench.fake_records.gpu import TUTORIAL, ladder_table, stepped_table
from loaderbench.fake_records.questions import (
    CURVES,
    MIB,
    F,
    H,
    I,
    N,
    X,
    cheap_table,
    curve_table,
    decide,
    jitter,
    rec,
    sm_table,
    table,
)
from loaderbench.fake_records.storage import storage_table

# --------------------------------------------------------------------------------------------------------
# the catalogue and the table's rows


def test_the_catalogue_numbers_57_claims_each_with_a_source():
    assert [s.number for s in CATALOGUE] == list(range(1, 58))
    assert all(s.source and s.where in ("C", "G", "B") for s in CATALOGUE)


def test_every_number_is_decided_by_a_rule_or_says_what_would_decide_it():
    ruled = {c.number for c in CLAIMS if c.number is not None}
    assert ruled <= set(BY_NUMBER)
    open_ = [s.number for s in CATALOGUE if s.number not in ruled and not s.pending]
    assert open_ == []
    for n in (18,):  # a 64-core node
        assert n not in ruled and BY_NUMBER[n].pending
    assert 6 in ruled and not BY_NUMBER[6].pending  # the threads study decides it
    assert 49 in ruled and not BY_NUMBER[49].pending  # checkpointable loading: the `checkpointing` study
    for n in (19, 20):  # decided from real DDP records
        assert n in ruled and not BY_NUMBER[n].pending


def test_the_table_has_a_row_for_every_number_even_without_records(tmp_path):
    t = claims_table(pd.DataFrame())
    assert set(t["number"]) - {"–"} == {s.tag for s in CATALOGUE}
    later = t[t["question"] == LATER]
    assert (later["verdict"] == N).all() and later["evidence"].str.startswith("not measured yet: ").all()
    assert "64 or more cores" in later.set_index("number").loc["#18", "evidence"]
    index = numbered(t)
    assert list(index.columns) == NUMBERED_COLUMNS and len(index) == 57
    assert (index["verdict"] == N).all()
    md = write_claims(pd.DataFrame(), tmp_path)[1].read_text()
    assert "## The 57 numbered claims" in md and "not measured yet: 57" in md


def test_a_numbered_claim_holds_only_when_all_its_rows_do():
    rows = pd.DataFrame(
        {
            "number": ["#7", "#7", "#8", "#10", "#10"],
            "question": ["start-method"] * 5,
            "verdict": [H, H, H, H, F],
        }
    )
    index = numbered(rows).set_index("number")
    assert index.loc["#7", "verdict"] == H and index.loc["#10", "verdict"] == F
    assert index.loc["#2", "verdict"] == N and index.loc["#7", "rows"].startswith("2 (")


def test_rows_of_a_setting_the_suite_added_are_reported_beside_the_verdict_and_never_decide_it():
    rows = pd.DataFrame(
        {
            "number": ["#26", "#26", "#26"],
            "question": ["persistence", "persistence", "ladder"],
            "verdict": [H, F, H],
            "role": ["seed", "extension: under fork on this machine", "seed"],
        }
    )
    row = numbered(rows).set_index("number").loc["#26"]
    assert row["verdict"] == H and row["rows"].startswith("2 (")
    assert row["elsewhere"] == "does not hold under fork on this machine"
    seed_fails = rows.assign(verdict=[F, H, H])
    assert numbered(seed_fails).set_index("number").loc["#26", "verdict"] == F


def test_every_extension_names_its_setting_and_every_numbered_claim_has_a_row_in_its_own_setting():
    from loaderbench.analysis.rules.claim import EXTENSION, SEED

    assert all(c.setting for c in CLAIMS if c.role == EXTENSION)
    numbered_rules = {c.number for c in CLAIMS if c.number is not None}
    seeded = {c.number for c in CLAIMS if c.number is not None and c.role == SEED}
    assert numbered_rules == seeded
    with pytest.raises(ValueError, match="an extension names"):
        Claim("q", "c", "r", lambda rows: None, number=1, role=EXTENSION)


# --------------------------------------------------------------------------------------------------------
# #2: where num_workers = 0 wins


def test_zero_workers_win_cheap_work_and_the_crossover_is_bracketed():
    df = cheap_table()
    assert decide(zero_wins_when_cheap, df) == H
    found = {(c.cores, c.sample_bytes): c for c in crossovers(df)}
    small, big = found[(2, 16)], found[(2, 150528)]
    assert (small.below, small.above) == (10.0, 30.0)
    assert (big.below, big.above) == (30.0, 100.0)
    one = found[(1, 16)]
    assert one.above is None and "above the grid" in one.text()  # one core: workers never win


def test_cheap_work_rule_fails_where_workers_win_at_no_work():
    df = cheap_table(lambda cores, size, work, nw: 100.0 * (1 + min(nw, cores)))
    assert decide(zero_wins_when_cheap, df) == F


def test_cheap_work_rule_inconclusive_and_not_measured():
    out = zero_wins_when_cheap(cheap_table(lambda cores, size, work, nw: 100.0))
    assert out.verdict == I and "no crossover shown" in out.evidence
    assert decide(zero_wins_when_cheap, cheap_table(reps=2)) == N
    t = claims_table(cheap_table()).set_index("number")
    assert t.loc["#2", "study"] == "cheap-work" and t.loc["#2", "verdict"] == H


# --------------------------------------------------------------------------------------------------------
# #3, #4: a simulated step beside loading

STEP = {0: 0.125, 1: 0.100, 2: 0.050, 3: 0.050, 4: 0.050}  # T_load 100 ms, T_train 25 ms, 2 cores
# T_load 100 ms beside a 100 ms step on 4 cores: the knee is ceil(100 / 100) = 1 worker, below the cores
LONG = {0: 0.200, 1: 0.100, 2: 0.100, 3: 0.100, 4: 0.100}


def test_step_overlap_rules_hold():
    assert decide(step_is_max_not_sum, stepped_table(STEP)) == H
    out = knee_at_prep_over_train(stepped_table(LONG, step_ms=100.0, cores=4))
    assert out.verdict == H and "= 1" in out.evidence


def test_the_knee_is_not_judged_where_the_cores_would_stop_the_curve_anyway():
    out = knee_at_prep_over_train(stepped_table(STEP))  # ceil(100 / 25) = 4 at or above the 2 cores: #13's question
    assert out.verdict == N and "at or above the 2 cores, not judged" in out.evidence


def test_the_knee_reads_t_prep_from_loading_alone_not_from_the_step_beside_one_worker():
    """A 300 ms step beside 200 ms of loading: one worker's loop runs at the step's pace (a little over it), which
    says nothing of T_prep; loading alone (0 workers, less the step) gives it, and the knee, 1, is below 2 cores."""
    longer = {0: 0.500, 1: 0.306, 2: 0.303, 3: 0.303, 4: 0.303}
    out = knee_at_prep_over_train(stepped_table(longer, step_ms=300.0, cores=2))
    assert out.verdict == H and "T_prep 200 ms (at 0 workers), knee ceil(T_prep / T_train) = 1" in out.evidence


def test_step_overlap_rules_fail():
    assert decide(step_is_max_not_sum, stepped_table({**STEP, 1: 0.124})) == F  # the sum: nothing overlapped
    gains = {**LONG, 3: 0.08}  # past the knee of 1 worker, 3 workers still gain
    assert decide(knee_at_prep_over_train, stepped_table(gains, step_ms=100.0, cores=4)) == F


def test_step_overlap_inconclusive_when_max_and_sum_are_alike_and_not_measured_without_repetitions():
    out = step_is_max_not_sum(stepped_table({0: 0.026, 1: 0.025, 2: 0.025}))  # loading 1 ms beside 25 ms
    assert out.verdict == N and "within 10% of each other, not judged" in out.evidence
    assert decide(step_is_max_not_sum, stepped_table(STEP, reps=2)) == N
    t = claims_table(stepped_table(LONG, step_ms=100.0, cores=4)).set_index("number")
    assert t.loc["#3", "study"] == "gpu-feed-small" and t.loc["#3", "verdict"] == H and t.loc["#4", "verdict"] == H


# --------------------------------------------------------------------------------------------------------
# #15, #16, #17, #57 on num_workers curves


def test_first_batch_without_workers():
    assert decide(first_batch_without_workers, curve_table(CURVES)) == H
    assert decide(first_batch_without_workers, curve_table(CURVES, ttfb=lambda w, nw: 0.1)) == F
    assert decide(first_batch_without_workers, curve_table(CURVES, reps=2)) == N


def test_context_switches_past_the_cores():
    more = curve_table(CURVES, ctx=lambda w, cores, nw: 0.01 if nw <= cores else 0.1)
    assert decide(switches_rise_past_cores, more) == H
    assert decide(switches_rise_past_cores, curve_table(CURVES)) == F
    assert decide(switches_rise_past_cores, curve_table({("sleep", 2): CURVES[("sleep", 2)]})) == N


def test_sleep_scales_past_the_cores_where_image_loading_does_not():
    seed = lambda rows: sleep_scales_past_cores(rows, REAL_LOAD)
    loop = lambda rows: sleep_scales_past_cores(rows, PYTHON_LOOP)
    jpeg = {**CURVES, ("jpeg", 2): {0: 300.0, 1: 290.0, 2: 560.0, 4: 540.0, 8: 520.0}}
    assert decide(seed, curve_table(jpeg)) == H
    flat = {**jpeg, ("sleep", 2): {0: 450.0, 1: 480.0, 2: 950.0, 4: 950.0, 8: 950.0}}
    assert decide(seed, curve_table(flat)) == F
    assert decide(seed, curve_table({("sleep", 2): CURVES[("sleep", 2)]})) == N
    # the seed's rule reads image loading only: a pure-Python loop that gained past the cores decides the extension
    gains = {**jpeg, ("cpu", 2): {0: 500.0, 1: 480.0, 2: 930.0, 4: 1400.0, 8: 1800.0}}
    assert (decide(seed, curve_table(gains)), decide(loop, curve_table(gains))) == (H, F)
    assert decide(seed, curve_table(CURVES)) == N  # sleep and a Python loop, no image loading


def test_four_times_the_cores_for_io_bound_loading():
    assert decide(io_rule_of_thumb, curve_table(CURVES)) == H
    longer = {("sleep", 2): {**CURVES[("sleep", 2)], 16: 7000.0}}
    out = io_rule_of_thumb(curve_table(longer))
    assert out.verdict == F and "2 x cores (w=4) reaches" in out.evidence
    assert decide(io_rule_of_thumb, curve_table({("cpu", 2): CURVES[("cpu", 2)]})) == N


def test_curve_claims_are_read_from_the_quick_study():
    t = claims_table(curve_table(CURVES))
    quick = t[t["study"] == "quick"].set_index("number")
    for n in ("#17", "#57"):
        assert quick.loc[n, "verdict"] == H, quick.loc[n, "evidence"]
    assert quick.loc["#17", "role"].startswith("extension: on a pure sleep")  # the seed's I/O is a network path
    # #16's source compares sleep with real image loading; against the pure-Python loop it is an extension
    sleep = t[t["number"] == "#16"].set_index("role")["verdict"].to_dict()
    assert sleep == {"seed": N, "extension: against a pure-Python loop, not image loading": H}
    with_jpeg = claims_table(curve_table({**CURVES, ("jpeg", 2): {0: 300.0, 1: 290.0, 2: 560.0, 4: 540.0, 8: 520.0}}))
    assert with_jpeg[(with_jpeg["number"] == "#16") & (with_jpeg["role"] == "seed")]["verdict"].tolist() == [H]


# --------------------------------------------------------------------------------------------------------
# #9, #56


def test_spawn_uses_more_memory_than_fork():
    more = sm_table(uss=lambda m, nw, p: nw * (20 if m == "fork" else 150) * MIB)
    assert decide(spawn_uses_more_memory, more) == H
    assert decide(spawn_uses_more_memory, sm_table()) == F  # the default table: alike at no payload
    assert decide(spawn_uses_more_memory, sm_table(reps=2)) == N


def test_remote_storage_is_io_bound():
    df = storage_table()
    assert decide(remote_is_io_bound, df) == H
    slow_disk = df.copy()
    slow_disk.loc[slow_disk["storage"] == "local", "samples_per_s"] = 50.0
    assert decide(remote_is_io_bound, slow_disk) == F
    assert decide(remote_is_io_bound, df[df["storage"] != "local"]) == N


# --------------------------------------------------------------------------------------------------------
# #33, #35 (gpu-feed) and #34, #40 (ladder) on GPU records


def gpu_copy_table(gbps, share, consumer="gpu", reps=3) -> pd.DataFrame:
    """gpu-feed cells on 16 cores: host-to-device GB/s `gbps(pinned)`, pin-memory thread share `share(nw)`."""
    out = []
    for nw, pin, r in itertools.product((4, 16), (False, True), range(reps)):
        cfg = {"workload": "jpeg", "model": "resnet50", "device": "auto", "num_workers": nw, "cores": 16}
        cfg["pin_memory"] = pin
        metrics = {
            "samples_per_s": 100.0 * nw,
            "consumer": consumer,
            "accelerator_busy_fraction": 0.5,
            "h2d_gbps": gbps(pin) * jitter(r),
            "total_s": 10.0,
            "cpu_s": {"main": 1.0, "workers": 5.0, "pin_memory_thread": 10.0 * share(nw) * jitter(r) if pin else 0},
        }
        out.append(rec("gpu-feed", cfg, metrics, r))
    return table(out)


def test_pinned_copies_are_faster():
    assert decide(pinned_copies_faster, gpu_copy_table(lambda p: 47.0 if p else 4.5, lambda n: 0.1)) == H
    assert decide(pinned_copies_faster, gpu_copy_table(lambda p: 10.0, lambda n: 0.1)) == F
    assert decide(pinned_copies_faster, gpu_copy_table(lambda p: 10.0, lambda n: 0.1, consumer="simulated")) == X


def test_pin_thread_bottleneck_needs_its_growth_and_its_level():
    busy = lambda n: 0.2 if n == 4 else 0.9  # the share at each num_workers
    assert decide(pin_thread_bottleneck, gpu_copy_table(lambda p: 40.0, busy, reps=5)) == H
    assert decide(pin_thread_bottleneck, gpu_copy_table(lambda p: 40.0, lambda n: 0.2 + n / 40, reps=5)) == F
    out = pin_thread_bottleneck(gpu_copy_table(lambda p: 40.0, busy))
    assert out.verdict == I and "5 give" in out.evidence  # a median's level needs 5 repetitions


def _ladder_gpu(speed=TUTORIAL, reps=5, consumer="gpu"):
    return ladder_table(speed, consumer=consumer, reps=reps, pin_effective=True).assign(non_blocking=True)


def host_blocked_table(blocked: dict, consumer="gpu", reps=3) -> pd.DataFrame:
    """Pinned gpu-feed cells at 4 and 16 workers with non_blocking and blocking copies: the host's time in the copy
    calls over the copies' time, blocked[non_blocking]. Throughput is flat in num_workers with non_blocking copies
    and grows with it with blocking ones, so a rule that mixed the blocking control into the feeding curves would
    show it."""
    out = []
    for nw, nb, r in itertools.product((4, 16), (True, False), range(reps)):
        cfg = {"workload": "jpeg", "model": "resnet50", "device": "auto", "num_workers": nw, "cores": 16}
        cfg |= {"pin_memory": True, "non_blocking": nb}
        metrics = {
            "samples_per_s": 100.0 if nb else 1000.0 * nw,
            "consumer": consumer,
            "accelerator_busy_fraction": 0.5,
            "h2d_host_blocked_fraction": blocked[nb] * jitter(r),
            "total_s": 10.0,
        }
        out.append(rec("gpu-feed", cfg, metrics, r))
    return table(out)


def test_non_blocking_copies_free_the_host_against_blocking_ones():
    assert decide(non_blocking_frees_host, host_blocked_table({True: 0.02, False: 1.0})) == H
    out = non_blocking_frees_host(host_blocked_table({True: 0.95, False: 1.0}))
    assert out.verdict == F and "w=16" in out.evidence
    assert decide(non_blocking_frees_host, host_blocked_table({True: 0.02, False: 1.0}, consumer="cpu")) == X
    assert decide(non_blocking_frees_host, host_blocked_table({True: 0.02, False: 1.0}, reps=2)) == N


def test_the_feeding_rules_leave_the_blocking_control_out():
    # were the blocking cells read, 4 workers would fall far short of the best (16 blocking workers)
    assert decide(few_workers_suffice, host_blocked_table({True: 0.02, False: 1.0})) == H


@pytest.mark.parametrize("rung,prev", [("+pin_memory", "+workers"), ("+prefetcher", "+persistent")])
def test_flat_ladder_steps(rung, prev):
    rule = ladder_step_about_one(rung, prev)
    assert decide(rule, _ladder_gpu()) == H  # the tutorial's 1.01x and 1.003x
    assert decide(rule, _ladder_gpu({**TUTORIAL, rung: 2 * TUTORIAL[prev]})) == F
    assert decide(rule, _ladder_gpu(consumer="cpu")) == X
    assert decide(rule, _ladder_gpu(reps=2)) == N


def test_new_thresholds_are_printed_from_their_constants():
    rules = {c.number: c.rule for c in CLAIMS if c.number in (2, 15, 17, 33, 40, 56, 57) and c.role == "seed"}
    rules |= {57: next(c.rule for c in CLAIMS if c.number == 57 and "first batch" in c.rule)}
    assert f"{WIN:g}x" in rules[2] and f"{CTX_RISE:g}x" in rules[15] and f"{IO_ENOUGH:g}x" in rules[17]
    assert f"{PINNED_H2D_MIN:g}x" in rules[33] and f"{1 - ABOUT_ONE:g}..{1 + ABOUT_ONE:g}x" in rules[40]
    assert f"{REMOTE_SHARE:g}x" in rules[56] and f"{FIRST_BATCH_MIN:g}x" in rules[57]


# --------------------------------------------------------------------------------------------------------
# #57: readable tracebacks with num_workers = 0


def traceback_table(held: dict[int, bool], reps=3) -> pd.DataFrame:
    """Failed tracebacks-study records: at each num_workers, whether the loop's traceback held the dataset's
    frame (held[nw]); a worker's frame is always quoted in the message."""
    out = []
    for nw, r in itertools.product(held, range(reps)):
        inner = "fault.py:88:__getitem__"
        frames = {"held": ["cell_process.py:60:cell_main"] + ([inner] if held[nw] else []), "quoted": [inner]}
        error = {"kind": "dataset_error", "message": "RuntimeError: fault injected", "frames": frames}
        cfg = {"workload": "fault", "fault": "raise", "num_workers": nw}
        out.append(rec("tracebacks", cfg, {}, r, status="failed", error=error))
    return table(out)


def test_readable_tracebacks_are_counted_from_the_frames_the_loop_holds():
    assert decide(readable_tracebacks, traceback_table({0: True, 2: False})) == H
    assert decide(readable_tracebacks, traceback_table({0: True, 2: True})) == F
    assert decide(readable_tracebacks, traceback_table({0: False, 2: False})) == F
    assert decide(readable_tracebacks, traceback_table({0: True, 2: False}, reps=2)) == N
    out = readable_tracebacks(traceback_table({0: True, 2: False}))
    assert (
        "w=2: the dataset's frame in the traceback in 0 of 3 repetitions, quoted in the message only in 3"
        in out.evidence
    )


def test_frames_of_a_real_exception_and_of_a_quoted_one():
    from loaderbench.measure.traceback_frames import frames_of

    def __getitem__():
        raise RuntimeError('worker said:\n  File "/x/fault.py", line 9, in __getitem__\n    boom')

    try:
        __getitem__()
    except RuntimeError as exc:
        frames = frames_of(exc)
    assert frames["held"][-1].endswith(":__getitem__") and frames["held"][-1].startswith("test_numbered_claims.py:")
    assert frames["quoted"] == ["fault.py:9:__getitem__"]


def test_the_curves_of_one_study_are_cut_once_for_all_its_claims(monkeypatch):
    """Every claim of a study reads the same rows: their curves are cut from them once per workloads, and again
    for other rows."""
    from loaderbench.analysis.rules import worker_costs

    cut = []
    real = worker_costs._curves
    monkeypatch.setattr(worker_costs, "_curves", lambda rows, w: cut.append(w) or real(rows, w))
    rows = curve_table(CURVES)
    first = [(label, sorted(by)) for label, _, _, by in worker_costs.curves(rows, ("sleep",))]
    again = [(label, sorted(by)) for label, _, _, by in worker_costs.curves(rows, ("sleep",))]
    assert first == again and first and cut == [("sleep",)]
    list(worker_costs.curves(rows, ("cpu", "jpeg")))
    list(worker_costs.curves(curve_table(CURVES), ("sleep",)))
    assert cut == [("sleep",), ("cpu", "jpeg"), ("sleep",)]


def test_a_check_that_a_curve_exists_cuts_one_curve_only():
    from loaderbench.analysis.rules import worker_costs

    rows = curve_table(CURVES)
    cut = worker_costs.curves(rows, ("sleep", "cpu", "jpeg"))
    first = next(cut)
    kept = worker_costs._CURVES[("sleep", "cpu", "jpeg")]
    assert kept.cut == [first]
    everything = list(worker_costs.curves(rows, ("sleep", "cpu", "jpeg")))
    assert len(everything) > 1 and everything[0] is first and kept.cut == everything

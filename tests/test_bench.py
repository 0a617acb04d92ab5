"""The arithmetic behind `make bench`, on synthetic inputs: the overhead ratios with their paired intervals.
Fast, no DataLoader, no wall-clock assertions."""

import math

import numpy as np
import pytest

from loaderbench.bench import analysis_scale as scale
from loaderbench.bench import common, overhead, time_to_answer
from loaderbench.bench import precision_per_second as precision
from loaderbench.stats.bootstrap import rate_ratio_ci, sum_ratio_ci

# --- overhead: ratios and their paired intervals --------------------------------------------------------------


def test_ratio_of_identical_arms_is_one():
    secs = [1.0, 2.0, 0.5, 1.5]
    r = rate_ratio_ci([10] * 4, secs, [10] * 4, secs)
    assert r.estimate == pytest.approx(1.0) and r.low == pytest.approx(1.0) and r.high == pytest.approx(1.0)


def test_ratio_is_total_over_total_never_a_mean_of_rates():
    # arm A: 10 units in 1 s and 30 units in 1 s -> 20/s; arm B: 10 in 2 s and 30 in 1 s -> 40/3 per s
    r = rate_ratio_ci([10, 30], [1.0, 1.0], [10, 30], [2.0, 1.0])
    assert r.estimate == pytest.approx(20.0 / (40.0 / 3.0))


def paired_rounds(true_ratio, n, load_sd, noise_sd, seed):
    """Rounds whose shared load varies a lot (lognormal, load_sd) and whose arms differ by true_ratio."""
    rng = np.random.default_rng(seed)
    load = np.exp(rng.normal(0.0, load_sd, n))
    den_s = load * np.exp(rng.normal(0.0, noise_sd, n))
    num_s = load / true_ratio * np.exp(rng.normal(0.0, noise_sd, n))
    units = np.full(n, 100.0)
    return units, num_s, units, den_s


def test_paired_interval_recovers_a_1_percent_cost_under_heavy_shared_noise():
    # the machine's load moves each round by +-30%, the arms' own noise is 0.3%: pairing cancels the load
    nu, ns, du, ds = paired_rounds(0.99, 40, load_sd=0.3, noise_sd=0.003, seed=1)
    r = rate_ratio_ci(nu, ns, du, ds, seed=3)
    assert r.low <= 0.99 <= r.high
    assert r.high < 1.0  # the 1% cost is resolved
    assert r.high - r.low < 0.01


def test_paired_interval_coverage_is_near_nominal():
    hits, sims = 0, 300
    for s in range(sims):
        nu, ns, du, ds = paired_rounds(0.97, 30, load_sd=0.2, noise_sd=0.02, seed=100 + s)
        r = rate_ratio_ci(nu, ns, du, ds, n_boot=1000, seed=s)
        hits += r.low <= 0.97 <= r.high
    assert 0.88 <= hits / sims <= 0.99  # percentile bootstrap, 30 rounds: a little under 95% is expected


def test_interval_narrows_with_more_rounds():
    widths = []
    for n in (10, 40, 160):
        nu, ns, du, ds = paired_rounds(0.99, n, load_sd=0.2, noise_sd=0.02, seed=5)
        r = rate_ratio_ci(nu, ns, du, ds)
        widths.append(r.high - r.low)
    assert widths[0] > widths[1] > widths[2]


def test_ratio_needs_paired_samples_of_equal_length():
    with pytest.raises(ValueError):
        rate_ratio_ci([1, 2], [1, 2], [1], [1])
    assert math.isnan(rate_ratio_ci([], [], [], []).estimate)


def drifting_run(harness_factor, probe_cost_s, rounds=600, window_s=0.01, drift_sd=0.25, seed=0):
    """Rounds of two 10 ms windows (bare, harness in a random order) on a machine whose speed drifts over tenths of
    a second (an AR(1) in log speed, sd `drift_sd`, correlation time 0.3 s) plus 3% noise per window; the probe
    samples every 0.2 s for 4 ms, and each sample adds `probe_cost_s` to the window it falls in. Returns the
    windows, the sample spans and the probe's true cost in seconds."""
    rng = np.random.default_rng(seed)
    phi = np.exp(-window_s / 0.3)
    log_speed, t, windows, spans, true_excess = 0.0, 0.0, [], [], 0.0
    next_sample = 0.05
    for r in range(rounds):
        order = ["bare", "harness"]
        rng.shuffle(order)
        for loop in order:
            log_speed = phi * log_speed + np.sqrt(1 - phi**2) * rng.normal(0.0, drift_sd)
            seconds = (
                window_s * np.exp(log_speed + rng.normal(0.0, 0.03)) / (harness_factor if loop == "harness" else 1)
            )
            if next_sample < t + seconds:  # a sample starts in this window: it slows it
                spans.append((next_sample, next_sample + 0.004))
                seconds += probe_cost_s
                true_excess += probe_cost_s
                next_sample += 0.2
            windows.append({"round": r, "loop": loop, "batches": 20, "t0": t, "seconds": seconds})
            t += seconds
    return windows, spans, true_excess


def test_overhead_ratios_recover_the_harness_and_the_probe_on_a_drifting_machine():
    w, spans, excess = drifting_run(harness_factor=0.99, probe_cost_s=0.002)
    total = sum(x["seconds"] for x in w)
    r = overhead.overhead_ratios(w, spans)
    probe_truth = 1 - excess / total
    for key, truth in (("harness_over_bare", 0.99), ("probe_on_over_off", probe_truth)):
        assert r[key]["low"] <= truth <= r[key]["high"], (key, r[key], truth)
    assert r["harness_over_bare"]["estimate"] == pytest.approx(0.99, abs=0.01)
    assert r["probe_on_over_off"]["estimate"] == pytest.approx(probe_truth, abs=0.01)
    assert r["suite_over_bare"]["estimate"] == pytest.approx(
        r["harness_over_bare"]["estimate"] * r["probe_on_over_off"]["estimate"]
    )
    assert r["harness_over_bare"]["n"] == 600 and r["probe_on_over_off"]["n"] == len(spans)
    # the drift is 25% per window, yet neighbouring windows share it: the interval is a few tenths of a percent wide
    assert r["harness_over_bare"]["high"] - r["harness_over_bare"]["low"] < 0.02


def test_a_probe_that_slows_nothing_costs_nothing():
    w, spans, _ = drifting_run(harness_factor=1.0, probe_cost_s=0.0, seed=3)
    r = overhead.overhead_ratios(w, spans)
    assert r["probe_on_over_off"]["low"] <= 1.0 <= r["probe_on_over_off"]["high"]
    no_probe = overhead.overhead_ratios(w, [])
    assert no_probe["probe_on_over_off"]["estimate"] == 1.0 and no_probe["probe_on_over_off"]["n"] == 0


def test_windows_too_long_for_the_probes_interval_give_no_probe_ratio_rather_than_a_free_probe():
    # 150 ms windows against a sample every 0.2 s: every window is touched, none is left to compare with
    w, spans, _ = drifting_run(1.0, 0.002, rounds=60, window_s=0.15)
    r = overhead.overhead_ratios(w, spans)
    assert math.isnan(r["probe_on_over_off"]["estimate"]) and math.isnan(r["suite_over_bare"]["estimate"])
    assert r["probe_on_over_off"]["method"] == "windows too long for the probe's interval"
    assert overhead.suite_goal(r["suite_over_bare"]) == "n/a"


def test_overhead_ratios_use_only_complete_rounds():
    w, spans, _ = drifting_run(1.0, 0.0, rounds=5)
    w = [x for x in w if not (x["round"] == 4 and x["loop"] == "bare")]  # round 4 lost a window
    assert overhead.overhead_ratios(w, spans)["suite_over_bare"]["n"] == 4
    assert overhead.overhead_ratios([x for x in w if x["loop"] == "bare"]) == {}


def test_the_speed_drift_tells_a_drifting_machine_from_window_noise():
    drifting, _, _ = drifting_run(1.0, 0.0, drift_sd=0.25, seed=1)
    steady, _, _ = drifting_run(1.0, 0.0, drift_sd=0.0, seed=1)
    d, s = overhead.speed_drift(drifting), overhead.speed_drift(steady)
    assert d["all_iqr"] > 3 * d["neighbour_iqr"]  # neighbours share the drift
    assert s["all_iqr"] < s["neighbour_iqr"]  # without drift, a difference of two windows spreads more than one


def test_arm_throughput_pools_windows():
    w = [
        {"round": 0, "loop": "bare", "batches": 10, "seconds": 1.0},
        {"round": 1, "loop": "bare", "batches": 30, "seconds": 1.0},
    ]
    assert overhead.arm_throughput(w, "bare") == pytest.approx(20.0)
    assert math.isnan(overhead.arm_throughput(w, "harness"))


def test_the_bare_loops_take_exactly_their_batches_as_a_training_loop_does():
    from loaderbench.bench.abab import bare_window

    for loop in (bare_window,):
        it = iter(range(100))
        loop(it, 7)
        assert next(it) == 7  # seven taken, the next one still there
        loop(it, 0)
        assert next(it) == 8


def test_the_loop_threads_cpu_per_batch_pools_each_loops_windows():
    w = [
        {"round": 0, "loop": "bare", "batches": 100, "seconds": 1.0, "cpu_s": 0.002},
        {"round": 1, "loop": "bare", "batches": 300, "seconds": 1.0, "cpu_s": 0.002},
        {"round": 0, "loop": "harness", "batches": 200, "seconds": 1.0, "cpu_s": 0.004},
    ]
    assert overhead.loop_cpu_per_batch(w) == {"bare": pytest.approx(10.0), "harness": pytest.approx(20.0)}


@pytest.mark.parametrize(
    ("estimate", "high", "goal"),
    [(0.985, 0.995, "met"), (0.975, 0.995, "missed"), (0.985, 0.988, "missed"), (float("nan"), 1.0, "n/a")],
)
def test_the_suite_goal_needs_the_estimate_at_098_and_the_interval_reaching_099(estimate, high, goal):
    assert overhead.suite_goal({"estimate": estimate, "low": 0.9, "high": high}) == goal


def test_the_rounds_for_the_goal_scale_the_interval_by_the_square_root_of_the_rounds():
    # an interval four times as wide as ±1% on 20 rounds: 16 times the rounds; one already that narrow needs no more
    wide = {"estimate": 1.0, "low": 1.01**-4, "high": 1.01**4}
    assert overhead.rounds_for_goal(wide, 20) == pytest.approx(320, abs=1)
    assert overhead.rounds_for_goal({"estimate": 1.0, "low": 0.999, "high": 1.001}, 20) == 20
    assert overhead.rounds_for_goal({"estimate": 1.0, "low": float("nan"), "high": 1.1}, 20) is None
    assert overhead.rounds_for_goal(None, 20) is None


class _SpinningProbe:
    """A probe whose every third sample walks (spins 20 ms of CPU, counted in full_samples) and the rest 1 ms."""

    def __init__(self):
        self.full_samples, self.procs_peak, self.n = 0, 1, 0

    def sample(self):
        import time

        walk = self.n % 3 == 0
        self.n += 1
        self.full_samples += walk
        until = time.thread_time() + (0.020 if walk else 0.001)
        while time.thread_time() < until:
            pass


def test_the_probe_ticker_counts_the_walks_and_what_they_cost_apart_from_the_cheap_samples():
    ticker = overhead._ProbeTicker(_SpinningProbe(), 0.0)
    ticker.switch(True)
    for _ in range(6):
        ticker.next_tick = 0.0
        ticker.tick()
    m = ticker.metrics()
    assert m["samples"] == 6 and m["walks"] == 2
    assert m["cpu_ms_per_walk"] >= 20 and m["cpu_ms_per_cheap_sample"] >= 1
    assert m["cpu_ms_per_walk"] > 5 * m["cpu_ms_per_cheap_sample"]  # CPU time: other tenants cannot add to it
    assert m["walks_share_of_probe_cpu"] == pytest.approx(
        m["walks"] * m["cpu_ms_per_walk"] / (m["samples"] * m["cpu_ms_per_sample"])
    )


def test_paired_difference_is_the_median_difference_with_an_interval():
    rng = np.random.default_rng(0)
    base = rng.normal(1000.0, 200.0, 41)  # ns per batch, shared by both arms of a round
    d = common.median_interval((base + 300.0 + rng.normal(0, 5, 41)) - base)
    assert d["estimate"] == pytest.approx(300.0, abs=5)
    assert d["low"] <= 300.0 <= d["high"] and d["high"] - d["low"] < 10


def test_sum_ratio_interval_with_a_fixed_cost():
    r = sum_ratio_ci([4.0, 4.0, 4.0], [1.0, 1.0, 1.0], den_offset=1.0)
    assert r.estimate == pytest.approx(3.0) and r.low == pytest.approx(3.0) and r.high == pytest.approx(3.0)


def test_seconds_for_precision_follows_one_over_sqrt_time():
    assert precision.seconds_for_precision(0.04, 10.0, 0.02) == pytest.approx(40.0)
    assert math.isnan(precision.seconds_for_precision(float("nan"), 10.0, 0.02))


# --- the time-to-answer study and the script it is compared with ----------------------------------------------


def test_tta_study_holds_exactly_the_chosen_cells_of_the_quick_study():
    import tomllib

    from loaderbench.study.study_file import parse_study

    text = time_to_answer.tta_study_text(time_to_answer.TTA_CELLS, repetitions=2)
    study = parse_study(tomllib.loads(text), where="tta", max_cores=2)
    got = sorted((c["workload"], c["num_workers"], c["cores"]) for c in study.cells)
    assert got == sorted(time_to_answer.TTA_CELLS)
    assert study.settings.repetitions == 2
    quick = tomllib.loads(time_to_answer.QUICK.read_text())
    assert study.settings.measure_batches == quick["study"]["measure_batches"]
    assert study.settings.warmup_batches == quick["study"]["warmup_batches"]
    assert all(time_to_answer.script_mismatch(c.config) == [] for c in study.cells)


def test_script_args_round_trip_through_the_script_parser():
    from loaderbench.bench.script import parse_args

    cell = common.make_cell("cpu", 2, 2, cpu_work=7)
    args = parse_args(time_to_answer.script_args(cell.config) + ["--repetition", "1"])
    assert (args.workload, args.workers, args.cores, args.cpu_work) == ("cpu", 2, 2, 7)
    assert args.batches == cell.config["measure_batches"] and args.warmup == cell.config["warmup_batches"]


def test_analysis_scale_says_not_available_without_the_module(monkeypatch):
    monkeypatch.setattr(scale.importlib.util, "find_spec", lambda name: None)
    assert scale.analysis_scale(10) == {"available": False, "records": 10}


@pytest.mark.slow
def test_overhead_experiment_runs_rounds_of_windows_in_a_real_cell_while_it_is_probed():
    # a smoke test of the protocol (fork, cellproc, handshake, probe cadence): structure only, no timings
    cell = common.make_cell("sleep", 0, 1, sleep_ms=0.0, study={"measure_batches": 20_000})
    plan = overhead.OverheadPlan(total_s=0.3, window_s=0.02, calibrate_s=0.05, min_rounds=2)
    out = overhead.overhead_experiment(cell, None, plan, probe_interval_s=0.01, timeout_s=120)
    assert "error" not in out, out.get("traceback")
    assert out["rounds"] >= 2 and len(out["windows"]) == 2 * out["rounds"]
    assert {w["loop"] for w in out["windows"]} == set(overhead.ARMS)
    # the probe sampled while the windows ran: its first sample starts before the last window ends
    first, last = min(w["t0"] for w in out["windows"]), max(w["t0"] + w["seconds"] for w in out["windows"])
    assert out["probe"]["samples"] >= 2 and out["probe_spans"][0][0] < last - first
    assert set(out["ratios"]) == {"harness_over_bare", "probe_on_over_off", "suite_over_bare"}
    assert all(w["seconds"] > 0 and w["batches"] >= 1 and w["cpu_s"] >= 0 for w in out["windows"])
    assert set(out["loop_cpu_us_per_batch"]) == {"bare", "harness"} and out["goal"] in ("met", "missed", "n/a")


def test_results_are_strict_json():
    import json

    text = json.dumps(
        common.json_safe({"a": float("nan"), "b": [1.0, float("inf")], "c": (1, {"d": 2.5})}), allow_nan=False
    )
    assert json.loads(text) == {"a": None, "b": [1.0, None], "c": [1, {"d": 2.5}]}


def test_the_doctor_hook_part_times_the_watched_iterator_against_the_bare_loop(monkeypatch):
    """The watched arm really goes through the doctor's timed iterator, every batch of its windows; the bare arm
    never does; each round gives one ratio of the two arms' times."""
    import importlib

    from loaderbench.bench import doctor_hooks

    watch_module = importlib.import_module("loaderbench.doctor.watch")  # the module, not the package's watch()

    calls = []
    original = watch_module.WatchedIterator.__next__

    def counted(self):
        calls.append(1)
        return original(self)

    monkeypatch.setattr(watch_module.WatchedIterator, "__next__", counted)
    monkeypatch.setattr(doctor_hooks, "LOOPS", (0,))
    rounds, batches = 3, 40
    out = doctor_hooks.hook_overhead(rounds, batches, cost_batches=2_000)
    (loop,) = out["loops"]
    cost = out["watch_cost"]
    # the CPU measure's two watched arms (one sampling the CPU clock densely), then the rounds' (warm-up, window,
    # the untimed tail)
    measured = 2 * cost["rounds"] * (doctor_hooks.WARMUP + cost["batches"])
    assert len(calls) == measured + rounds * (doctor_hooks.WARMUP + batches + 2)
    # the watched loop does everything the bare one does and more: in CPU time its cost per batch is above zero
    assert cost["cost_ns_per_batch"]["estimate"] > 0 and loop["cpu_share"] > 0
    # the workers' sampler's own CPU within the window is counted in the watch's share; its first sample (before the
    # window) and its last (after it) are counted apart
    assert 0 <= loop["sampler_share"] < loop["cpu_share"] and loop["sampler_edge_ms"] > 0
    # the dense arm read the CPU clock on more batches than the watch does by default, each read costing CPU time
    assert cost["sampled_share"]["sampled"] > cost["sampled_share"]["watched"] and cost["sample_ns"]["estimate"] > 0
    assert len(loop["ratios"]) == rounds and all(r > 0 and math.isfinite(r) for r in loop["ratios"])
    assert loop["ratio"]["low"] <= loop["ratio"]["estimate"] <= loop["ratio"]["high"]


def test_the_probes_cpu_text_names_its_walks_and_the_rest_only_where_there_are_both():
    walks = {"cpu_ms_per_sample": 6.0, "walks": 7, "cpu_ms_per_walk": 46.2, "cpu_ms_per_cheap_sample": 1.6}
    assert overhead.probe_cpu_text(walks) == "6.0 ms (7 walks, 46 ms each; the rest 1.6 ms)"
    every = {"cpu_ms_per_sample": 46.0, "walks": 2, "cpu_ms_per_walk": 46.0, "cpu_ms_per_cheap_sample": None}
    assert overhead.probe_cpu_text(every) == "46.0 ms (2 walks, 46 ms each)"
    assert overhead.probe_cpu_text({"cpu_ms_per_sample": 1.0, "cpu_ms_per_walk": None}) == "1.0 ms"
    assert overhead.probe_cpu_text({}) == "n/a"

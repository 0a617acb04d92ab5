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


def abab_windows(harness_factor, probe_factor, rounds=30, seed=0):
    """A synthetic 2x2 ABAB run: each arm's window seconds = base load x 1/effects x small noise."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(rounds):
        load = np.exp(rng.normal(0.0, 0.3))
        for loop in ("bare", "harness"):
            for probe in (False, True):
                f = (harness_factor if loop == "harness" else 1.0) * (probe_factor if probe else 1.0)
                out.append(
                    {
                        "round": r,
                        "loop": loop,
                        "probe": probe,
                        "batches": 50,
                        "seconds": 0.25 * load / f * np.exp(rng.normal(0.0, 0.002)),
                    }
                )
    return out


def test_overhead_ratios_recover_both_main_effects_and_their_product():
    w = abab_windows(harness_factor=0.995, probe_factor=0.95)
    r = overhead.overhead_ratios(w)
    assert r["harness_over_bare"]["estimate"] == pytest.approx(0.995, abs=0.002)
    assert r["probe_on_over_off"]["estimate"] == pytest.approx(0.95, abs=0.002)
    assert r["suite_over_bare"]["estimate"] == pytest.approx(0.995 * 0.95, abs=0.003)
    for key, truth in (("harness_over_bare", 0.995), ("probe_on_over_off", 0.95), ("suite_over_bare", 0.94525)):
        assert r[key]["low"] <= truth <= r[key]["high"], key
        assert r[key]["n"] == 30


def test_overhead_ratios_use_only_complete_rounds():
    w = abab_windows(1.0, 1.0, rounds=5)
    w = [x for x in w if not (x["round"] == 4 and x["loop"] == "bare" and x["probe"])]  # round 4 lost a window
    assert overhead.overhead_ratios(w)["suite_over_bare"]["n"] == 4
    assert overhead.overhead_ratios([x for x in w if x["loop"] == "bare"]) == {}


def test_arm_throughput_pools_windows():
    w = [
        {"round": 0, "loop": "bare", "probe": False, "batches": 10, "seconds": 1.0},
        {"round": 1, "loop": "bare", "probe": False, "batches": 30, "seconds": 1.0},
    ]
    assert overhead.arm_throughput(w, ("bare", False)) == pytest.approx(20.0)
    assert math.isnan(overhead.arm_throughput(w, ("harness", True)))


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
        {"round": 0, "loop": "bare", "probe": False, "batches": 100, "seconds": 1.0, "cpu_s": 0.002},
        {"round": 0, "loop": "bare", "probe": True, "batches": 300, "seconds": 1.0, "cpu_s": 0.002},
        {"round": 0, "loop": "harness", "probe": False, "batches": 200, "seconds": 1.0, "cpu_s": 0.004},
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
def test_overhead_experiment_runs_abab_windows_in_a_real_cell():
    # a smoke test of the protocol (fork, cellproc, handshake, probe switching): structure only, no timings
    cell = common.make_cell("sleep", 0, 1, sleep_ms=0.0, study={"measure_batches": 20_000})
    plan = overhead.OverheadPlan(total_s=0.3, window_s=0.02, calibrate_s=0.05, min_rounds=2)
    out = overhead.overhead_experiment(cell, None, plan, probe_interval_s=0.01, timeout_s=120)
    assert "error" not in out, out.get("traceback")
    assert out["rounds"] >= 2 and len(out["windows"]) == 4 * out["rounds"]
    assert {(w["loop"], w["probe"]) for w in out["windows"]} == set(overhead.ARMS)
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
    # the dense arm read the CPU clock on more batches than the watch does by default, each read costing CPU time
    assert cost["sampled_share"]["sampled"] > cost["sampled_share"]["watched"] and cost["sample_ns"]["estimate"] > 0
    assert len(loop["ratios"]) == rounds and all(r > 0 and math.isfinite(r) for r in loop["ratios"])
    assert loop["ratio"]["low"] <= loop["ratio"]["estimate"] <= loop["ratio"]["high"]

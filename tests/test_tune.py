"""`loaderbench tune`: the search on synthetic throughput surfaces (no DataLoader: a measure function is
injected), the space a study is split into, the run through the ordinary runner and store (a runner that
writes synthetic records), resuming, tune.json, the pasteable answer, the CLI's errors, and one real run."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from loaderbench.cli import main
from loaderbench.schema.record import Record
from loaderbench.schema.store import Store
from loaderbench.study.study_file import load_study, parse_study
from loaderbench.tune.answer_text import answer_line, dataloader_call, rules_line
from loaderbench.tune.evidence import Observation
from loaderbench.tune.options import TuneError, TuneOptions
from loaderbench.tune.outcome import NO_USABLE, ONE_CANDIDATE, SEPARATED, WITHIN_MARGIN
from loaderbench.tune.run import EXIT_ANSWERED, EXIT_NO_ANSWER, run_tune
from loaderbench.tune.search import geometric_subset, search
from loaderbench.tune.space import scenarios
from tests.conftest import REPO

W = [0, 1, 2, 3, 4, 6, 8]
RUNGS = (3,)
MIB = 2**20


def study_of(matrix: dict, repetitions: int = 3, name: str = "syn"):
    raw = {
        "study": {"name": name, "repetitions": repetitions},
        "matrix": {"workload": ["sleep"], "num_workers": W, "cores": [2], **matrix},
    }
    return parse_study(raw, where="synthetic", max_cores=64)


def by_workers(values: list[float]):
    return lambda c: values[W.index(c.num_workers)]


PEAKED = by_workers([300, 540, 780, 960, 1050, 900, 750])  # best at 4, the neighbours 9-14% below it
PLATEAU = by_workers([270, 270, 400, 405, 400, 395, 390])  # CPU-bound on 2 cores: flat from 2 workers
RISING = by_workers([450, 770, 1400, 1900, 2400, 3200, 3900])  # sleep-bound: more workers, more throughput


def prefetch_matters(c):  # prefetch_factor = 4 is 25% faster wherever there are workers
    return PLATEAU(c) * (1.25 if c["prefetch_factor"] == 4 else 1.0)


def memory_of(c) -> float:
    return (100 + 100 * c.num_workers) * MIB


def synthetic(f, noise: float, seed: int, fails=lambda c: False):
    """measure(candidate, repetition): f times seeded log-normal noise, memory growing with workers."""
    rng = np.random.default_rng(seed)

    def measure(c, rep):
        if fails(c):
            return Observation("failed", cell_s=1.0, error="worker_crash: synthetic")
        return Observation("ok", f(c) * math.exp(rng.normal(0, noise)), memory_of(c), 1.0)

    return measure


def tune_one(study, f, noise, seed, options=None, fails=lambda c: False):
    (sc,) = scenarios(study.cells)
    return sc, search(sc, synthetic(f, noise, seed, fails), options or TuneOptions(), RUNGS)


# --- the space ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "listed, subset",
    [
        ([0, 1, 2, 3, 4, 6, 8], [0, 1, 2, 4, 8]),
        ([2, 4, 6, 8], [2, 4, 8]),
        ([0, 4, 8, 12, 16, 24, 32, 48, 64], [0, 4, 8, 16, 32, 64]),
        ([3], [3]),
    ],
)
def test_geometric_subset(listed, subset):
    assert geometric_subset(listed) == subset


def test_quick_study_splits_into_scenarios_of_work_and_node():
    study = load_study(REPO / "loaderbench" / "studies" / "quick.toml", max_cores=2)
    found = scenarios(study.cells)
    assert sum(len(s.candidates) for s in found) == len(study.cells)
    labels = sorted(s.label for s in found)
    # workload x cores, and jpeg's decode-only reference cells on their own
    assert len(found) == 8 and all("workload=" in lab and "cores=" in lab for lab in labels)
    decode = [s for s in found if dict(s.context).get("jpeg_stage") == "decode"]
    assert len(decode) == 2 and all(len(s.candidates) == 1 for s in decode)
    sleep2 = next(s for s in found if s.label.startswith("workload=sleep cores=2"))
    assert sleep2.workers == (0, 1, 2, 3, 4, 6, 8) and list(sleep2.values) == ["num_workers"]


def test_an_axis_none_without_workers_does_not_split_the_num_workers_curve():
    study = study_of({"num_workers": [0, 2], "slow_worker_ms": [0, 50]})
    found = scenarios(study.cells)
    assert len(found) == 2  # one per straggler delay: both contain the (only) num_workers = 0 cell
    zero = [c for c in study.cells if c["num_workers"] == 0]
    assert len(zero) == 1 and all(zero[0].cell_id in {c.key for c in s.candidates} for s in found)


def test_find_reads_a_none_as_any_value():
    study = study_of({"num_workers": [0, 2], "prefetch_factor": [2, 4]})
    (sc,) = scenarios(study.cells)
    assert sc.find({"num_workers": 0, "prefetch_factor": 4})["num_workers"] == 0
    assert sc.find({"num_workers": 2, "prefetch_factor": 4})["prefetch_factor"] == 4
    assert sc.base == {"num_workers": 0, "prefetch_factor": 2}


# --- the search on synthetic surfaces -----------------------------------------------------------------------

SURFACES = {
    # name: (extra matrix, surface, noise of one repetition, seeded runs, fraction of them that must land within 5%)
    "known best": ({}, PEAKED, 0.03, 30, 1.0),
    "plateau": ({}, PLATEAU, 0.03, 30, 1.0),
    "rising": ({}, RISING, 0.03, 30, 1.0),
    "noisy plateau": ({}, PLATEAU, 0.08, 40, 0.95),
    "noisy rising": ({}, RISING, 0.08, 40, 0.95),
    "prefetch_factor matters": ({"prefetch_factor": [2, 4]}, prefetch_matters, 0.03, 30, 1.0),
    "three setting axes": (
        {"prefetch_factor": [2, 4], "persistent_workers": [False, True]},
        prefetch_matters,
        0.03,
        30,
        1.0,
    ),
}


@pytest.mark.parametrize("name", SURFACES)
def test_search_lands_within_5_percent_of_the_best_for_less_than_the_grid(name):
    matrix, f, noise, runs, need = SURFACES[name]
    study = study_of(matrix)
    grid = len(study.cells) * study.settings.repetitions
    hits, spent = 0, []
    for seed in range(runs):
        sc, out = tune_one(study, f, noise, seed)
        best = max(f(c) for c in sc.candidates)
        hits += f(out.answer.candidate) >= 0.95 * best
        spent.append(out.measured)
    assert hits >= need * runs, f"{name}: {hits} of {runs} seeded runs within 5% of the best"
    assert max(spent) < grid, f"{name}: spent up to {max(spent)} cell repetitions, the grid {grid}"


def test_a_setting_other_than_num_workers_is_found_when_it_matters():
    study = study_of({"prefetch_factor": [2, 4]})
    for seed in range(10):
        _, out = tune_one(study, prefetch_matters, 0.03, seed)
        assert out.answer.candidate["prefetch_factor"] == 4
        assert any(d.axis == "prefetch_factor" and d.kept == 4 for d in out.axes)


def test_a_memory_cap_that_excludes_the_best_gives_the_best_under_it():
    study = study_of({})
    cap_mb = 450  # 100 MiB + 100 MiB per worker: at most 3 workers
    options = TuneOptions(max_memory_mb=cap_mb)
    for seed in range(20):
        sc, out = tune_one(study, RISING, 0.03, seed, options)
        assert memory_of(out.answer.candidate) <= cap_mb * MIB
        feasible = max(RISING(c) for c in sc.candidates if memory_of(c) <= cap_mb * MIB)
        assert RISING(out.answer.candidate) >= 0.95 * feasible
        # the screen stops at the first num_workers over the cap: 8 workers are never measured
        assert all(e.candidate.num_workers <= 4 for e in out.evidence.values())


def test_search_is_deterministic_for_a_seed():
    study = study_of({"prefetch_factor": [2, 4]})
    a = tune_one(study, prefetch_matters, 0.08, 7)[1]
    b = tune_one(study, prefetch_matters, 0.08, 7)[1]
    assert a.steps == b.steps and a.answer.candidate.key == b.answer.candidate.key


def test_finalists_shown_within_the_margin_give_the_cheapest():
    study = study_of({})
    _, out = tune_one(study, PLATEAU, 0.0, 0, TuneOptions(finalists=2))
    assert out.stop == WITHIN_MARGIN
    assert out.answer.candidate.num_workers == 2  # 2, 3, 4, 6 and 8 workers are within 5% of each other


def test_a_finalist_shown_slower_by_the_margin_is_dropped():
    study = study_of({})
    _, out = tune_one(study, PEAKED, 0.0, 0, TuneOptions(finalists=2))
    assert out.stop == SEPARATED and out.answer.candidate.num_workers == 4
    assert out.answer.n == 3 and out.highest is out.answer
    assert all(c.verdict == "slower" for c in out.comparisons.values())


def test_the_linear_ceiling_keeps_workers_that_cannot_reach_the_best_out_of_the_search():
    study = study_of({})
    _, out = tune_one(study, RISING, 0.0, 0)
    # 0 workers give 450/s, so n < 3705 / (450 x 1.1) workers cannot come within 5% of 8 workers' 3,900
    assert out.answer.candidate.num_workers == 8 and out.stop == "out of reach"
    assert sorted(e.candidate.num_workers for e in out.evidence.values()) == [0, 8]
    assert out.measured == 4  # two screens, and the answer brought to 3 repetitions
    (note,) = [s for s in out.steps if s.note.startswith("not measured: n x the one-process rate")]
    assert note.candidate == "num_workers=2,3,4,6"
    (one,) = [s for s in out.steps if s.note.startswith("not measured: 0 workers does the same loading")]
    assert one.candidate == "num_workers=1"


def test_the_knee_is_found_from_the_ceiling_and_a_wide_plateau_is_probed():
    study = study_of({})
    _, out = tune_one(study, PLATEAU, 0.0, 0)
    measured = [s.candidate for s in out.steps if s.phase in ("screen", "refine") and s.repetition == 0]
    # ends, then the fewest workers that can reach the band (1 worker cannot: 270 x 1.1 < 0.95 x 390), then
    # the middle of the 2..8 plateau, which is too wide to take on trust, then the middles of 2..4 and 4..8 (in
    # workers + 1, 5/3 and 9/5: wider than 1.5)
    assert measured == [
        "num_workers=0",
        "num_workers=8",
        "num_workers=2",
        "num_workers=4",
        "num_workers=3",
        "num_workers=6",
    ]
    assert out.answer.candidate.num_workers == 3  # 405, the highest; finalists=2 gives the cheapest (below)


def test_a_lesser_in_band_value_is_climbed_from_too():
    # JPEG on 2 cores as one run of this machine read it: 4 and 6 workers screened low, so 2 and 8 look like
    # two peaks of a broken plateau. Climbing from the best (8) alone stops at 6; from 2 it finds 3.
    rates = {0: 515, 1: 400, 2: 633, 3: 750, 4: 575, 6: 499, 8: 644}
    study = study_of({})
    (sc,) = scenarios(study.cells)
    out = search(sc, synthetic(lambda c: rates[c.num_workers], 0.0, 0), TuneOptions(), RUNGS)
    assert out.answer.candidate.num_workers == 3
    assert any(
        s.candidate == "num_workers=3" and s.note.startswith("next to an in-band value (2 workers)") for s in out.steps
    )


def test_zero_workers_beating_one_and_an_oversubscribed_end_still_gets_a_worker_per_core_measured():
    # CPU-bound on 8 cores with a costly transfer: the main process beats 1 and 2 workers, 32 workers are far
    # past the cores, and the peak is at 8. Hill climbing from 0 would stop at 2 workers (1 is never measured:
    # 0 does its loading without the transfer); the probe at the core count finds the peak.
    listed = [0, 1, 2, 4, 8, 16, 32]
    rates = dict(zip(listed, [500, 400, 420, 1500, 2800, 900, 300]))
    study = study_of({"num_workers": listed, "cores": [8]})
    (sc,) = scenarios(study.cells)
    out = search(sc, synthetic(lambda c: rates[c.num_workers], 0.0, 0), TuneOptions(), RUNGS)
    assert out.answer.candidate.num_workers == 8
    probes = [s for s in out.steps if s.note.startswith("0 workers read best")]
    assert [s.candidate for s in probes] == ["num_workers=8"]
    assert 1 not in {e.candidate.num_workers for e in out.evidence.values()}
    # on one core there is no such probe: 0 workers stay the answer of a curve that only falls
    one = study_of({"num_workers": listed, "cores": [1]})
    (sc1,) = scenarios(one.cells)
    out1 = search(
        sc1, synthetic(lambda c: rates[c.num_workers] if c.num_workers < 2 else 350, 0.0, 0), TuneOptions(), RUNGS
    )
    assert out1.answer.candidate.num_workers == 0
    assert not [s for s in out1.steps if s.note.startswith("0 workers read best")]


def test_a_training_step_in_the_loop_screens_one_worker_too():
    # the main process also runs the step, so its rate does not bound one worker's: 1 worker is measured
    study = study_of({"step_ms": [5.0]})
    sc, out = tune_one(study, RISING, 0.0, 0)
    assert not sc.main_process_is_a_worker
    screened = [s.candidate for s in out.steps if s.phase == "screen"]
    assert screened == ["num_workers=0", "num_workers=1", "num_workers=8"]


def test_one_worker_is_never_measured_where_0_workers_stands_for_it():
    # JPEG on 1 core: 0 workers best, the far end oversubscribed. 1 worker does 0's loading plus the transfer
    # between processes, for a process more: the climb from 0 goes to 2 workers, and 1 is said to be left out
    listed = [0, 1, 2, 4, 8]
    rates = dict(zip(listed, [480, 380, 350, 330, 300]))
    study = study_of({"num_workers": listed, "cores": [1]})
    (sc,) = scenarios(study.cells)
    out = search(sc, synthetic(lambda c: rates[c.num_workers], 0.0, 0), TuneOptions(), RUNGS)
    assert out.answer.candidate.num_workers == 0
    measured = [s.candidate for s in out.steps if s.repetition == 0]
    assert measured == ["num_workers=0", "num_workers=8", "num_workers=2"]
    assert any(
        s.candidate == "num_workers=1" and s.note.startswith("not measured: 0 workers does the same") for s in out.steps
    )
    # with a training step in the loop the main process does more than a worker: 1 worker is screened
    stepped = study_of({"num_workers": listed, "cores": [1], "step_ms": [5.0]})
    (sc2,) = scenarios(stepped.cells)
    out2 = search(sc2, synthetic(lambda c: rates[c.num_workers], 0.0, 0), TuneOptions(), RUNGS)
    assert 1 in {e.candidate.num_workers for e in out2.evidence.values()}
    # without 0 workers listed, 1 worker is the one-process rate and the cheapest candidate: measured
    no_zero = study_of({"num_workers": [1, 2, 4, 8], "cores": [1]})
    (sc3,) = scenarios(no_zero.cells)
    out3 = search(sc3, synthetic(lambda c: rates[c.num_workers], 0.0, 0), TuneOptions(), RUNGS)
    assert out3.answer.candidate.num_workers == 1


def _busy(rates: dict[int, float], busy_at_0: float):
    """measure(candidate, repetition): the rate, and 0 workers keeping `busy_at_0` of the core busy."""
    return lambda c, rep: Observation(
        "ok", rates[c.num_workers], memory_of(c), 1.0, cpu_busy=busy_at_0 if c.num_workers == 0 else 1.0
    )


@pytest.mark.parametrize("busy, measured", [(0.99, [0]), (0.96, [0]), (0.94, [0, 2, 8]), (0.40, [0, 2, 8])])
def test_on_one_core_a_main_process_that_keeps_it_busy_leaves_workers_nothing_to_measure(busy, measured):
    # JPEG on 1 core: workers have the same one core's cycles and need at least the main process's CPU per
    # sample, so at 0 workers keeping 96% of it busy they give at most 1/0.96 of 0 workers' rate: within the
    # margin, for more processes. Nothing with workers is measured, not even the far end. At 94% busy (or an
    # I/O-bound 40%) they might beat it by more than the margin: the search goes on as before.
    listed = [0, 1, 2, 4, 8]
    rates = dict(zip(listed, [480, 380, 350, 330, 300]))
    study = study_of({"num_workers": listed, "cores": [1]})
    (sc,) = scenarios(study.cells)
    out = search(sc, _busy(rates, busy), TuneOptions(), RUNGS)
    assert out.answer.candidate.num_workers == 0 and out.answer.n == 3
    assert sorted(e.candidate.num_workers for e in out.evidence.values()) == measured
    skipped = [s for s in out.steps if s.note.startswith("not screened: 0 workers kept the one core")]
    assert len(skipped) == (measured == [0])
    assert out.busy_core == (busy if measured == [0] else None)


def test_the_busy_core_rule_needs_one_core_and_the_main_process_standing_for_a_worker():
    listed = [0, 1, 2, 4, 8]
    rates = dict(zip(listed, [480, 380, 700, 690, 650]))
    for matrix in (
        {"num_workers": listed, "cores": [2]},  # torch's threads may keep 2 cores busy at 0 workers
        {"num_workers": listed, "cores": [1], "step_ms": [5.0]},
    ):  # the main process runs the step too
        (sc,) = scenarios(study_of(matrix).cells)
        out = search(sc, _busy(rates, 1.0), TuneOptions(), RUNGS)
        assert out.busy_core is None and len(out.evidence) > 1


def test_a_busy_core_bounds_the_rules_of_thumb_it_kept_out():
    listed = [0, 1, 2, 4, 8]
    study = study_of({"num_workers": listed, "cores": [1]})
    (sc,) = scenarios(study.cells)
    out = search(sc, _busy(dict(zip(listed, [480, 380, 350, 330, 300])), 0.98), TuneOptions(), RUNGS)
    from loaderbench.tune.tune_json import scenario_result

    row = scenario_result(study, TuneOptions(), out, gpus=None)
    assert row["busy_core"] == 0.98
    cores_rule = next(r for r in row["rules_of_thumb"] if r["rule"] == "cores")
    assert cores_rule["num_workers"] == 1 and cores_rule["at_most"] == pytest.approx(480 / 0.98)
    assert cores_rule["bound"] == "its busy core"
    assert "workers = cores: 1 (at most +2%, its busy core)" in rules_line(row)
    from loaderbench.tune.answer_text import render

    text = render(
        {
            "options": {"margin": 0.05},
            "scenarios": [row],
            "records": "r",
            "cost": {**row["cost"], "measured_now": 3, "reused": 0},
        }
    )
    assert "one candidate (0 workers kept the one core 98% busy: nothing with workers can beat them by 5%)" in text
    # a scenario of the 0-workers cell alone has nothing with workers to rule out
    (alone,) = scenarios(study_of({"num_workers": [0], "cores": [1]}).cells)
    assert search(alone, _busy({0: 480}, 0.98), TuneOptions(), RUNGS).busy_core is None


def _scripted(values: dict[int, list[float]]):
    """measure(candidate, repetition): the listed value of that num_workers' repetition."""
    return lambda c, rep: Observation("ok", values[c.num_workers][rep], memory_of(c), 1.0)


@pytest.mark.parametrize(
    "first, second, answer, reps_of_0",
    [(1010.0, 1100.0, 0, 3), (1010.0, 900.0, 2, 2), (960.0, 1100.0, 2, 1)],
    ids=["keeps its promise and wins", "dropped after one more", "cannot beat it"],
)
def test_a_screen_that_may_have_read_low_gets_one_more_repetition_at_a_time(first, second, answer, reps_of_0):
    # 2 workers screen best and are confirmed at 960-1040 (a spread of about 4%). 0 workers screened at 1010,
    # which one such spread cannot tell from more than 5% above 2 workers' median (1050): it gets a second
    # repetition, and a third only if it still may. Screened at 960, it could beat 1000 by more than the
    # margin only by more than one spread: it is left at one repetition.
    study = study_of({"num_workers": [0, 2]})
    (sc,) = scenarios(study.cells)
    out = search(sc, _scripted({0: [first, second, 1100.0], 2: [1040.0, 960.0, 1000.0]}), TuneOptions(), RUNGS)
    assert out.evidence[sc.find({"num_workers": 0}).key].n == reps_of_0
    assert out.answer.candidate.num_workers == answer
    climbs = [s for s in out.steps if s.note.startswith("may beat the highest by more than the margin")]
    assert [s.candidate for s in climbs] == ["num_workers=0"] * (reps_of_0 - 1)


@pytest.mark.parametrize(
    "eight, answer",
    [([2789.0, 3700.0, 3690.0], 8), ([2789.0, 2800.0, 2790.0], 6)],
    ids=["read low once", "really lower"],
)
def test_a_low_reading_next_above_a_best_still_scaling_is_measured_again(eight, answer):
    # sleep-bound on one core as one run of this machine read it: 8 workers' screen read 25% low, below 6
    # workers, which read at their linear ceiling (6 x 0 workers' 475). Hill climbing alone stops there. A
    # loader still scaling should give more with more, so 8 workers are measured again, up to a median of
    # three; where they really give less, 6 stay the answer.
    study = study_of({"cores": [1]})
    (sc,) = scenarios(study.cells)
    values = {n: [475.0 * max(n, 1)] * 3 for n in W}
    values[6], values[8] = [2972.0, 2991.0, 2987.0], eight
    out = search(sc, _scripted(values), TuneOptions(), RUNGS)
    assert out.answer.candidate.num_workers == answer
    again = [s for s in out.steps if "linear ceiling" in s.note]
    assert again and {s.candidate for s in again} == {"num_workers=8"}
    assert out.evidence[sc.find({"num_workers": 8}).key].n == 3


def test_one_worker_reading_best_is_not_taken_for_a_loader_still_scaling():
    # CPU-bound on one core, flat: 1 worker read best, and its own value is the one-process rate, so it is
    # always "at its ceiling"; 2 workers' low screen is not measured again for that
    study = study_of({"cores": [1]})
    (sc,) = scenarios(study.cells)
    values = {n: [990.0, 1000.0, 995.0] for n in W}
    values[0], values[1], values[2] = [960.0, 1080.0, 1075.0], [1017.0, 999.0, 1012.0], [890.0, 997.0, 990.0]
    out = search(sc, _scripted(values), TuneOptions(), RUNGS)
    assert not [s for s in out.steps if "linear ceiling" in s.note]
    assert out.evidence[sc.find({"num_workers": 2}).key].n == 1


def test_a_cpu_bound_best_at_the_core_count_is_not_taken_for_a_loader_still_scaling():
    # cpu on 2 cores as one run read it: 2 workers at 2 x 0 workers' rate, because a CPU-bound loader scales
    # linearly up to the cores; 3 workers, past them, reading lower is what it should do
    study = study_of({})
    (sc,) = scenarios(study.cells)
    values = {n: [1900.0, 1950.0, 1920.0] for n in W}
    values[0], values[1], values[2], values[3] = [1179.0], [1050.0], [2237.0, 2121.0, 1809.0], [1967.0, 1826.0, 1829.0]
    out = search(sc, _scripted(values), TuneOptions(), RUNGS)
    assert not [s for s in out.steps if "linear ceiling" in s.note]
    assert [
        s.phase
        for s in out.steps
        if s.candidate == "num_workers=3" and s.repetition is not None and s.phase != "confirm"
    ] == ["refine"]


def test_late_candidates_get_one_more_repetition_one_at_a_time_the_highest_first():
    # 2 workers' screen read 30% high (a fast moment of a shared machine), so no other screen came within the
    # second look's band; confirmed, its median fell to 1,720. 4 and 8 workers' single screens may each beat
    # that by the margin: the one of highest median is weighed first, and once it has its repetitions the
    # other can no longer beat it by the margin and keeps its one.
    study = study_of({"num_workers": [0, 2, 4, 8]})
    (sc,) = scenarios(study.cells)
    values = {0: [1000.0], 2: [2500.0, 1700.0, 1720.0], 4: [1900.0, 1910.0, 1890.0], 8: [1880.0, 1800.0, 1790.0]}
    out = search(sc, _scripted(values), TuneOptions(), RUNGS)
    assert not [s for s in out.steps if "second repetition" in s.note]
    late = [s for s in out.steps if s.note.startswith("may beat the highest by more than the margin")]
    assert [s.candidate for s in late] == ["num_workers=4"] * 2 and "(2 may, " in late[0].note
    assert [out.evidence[sc.find({"num_workers": n}).key].n for n in (2, 4, 8)] == [3, 3, 1]
    assert out.answer.candidate.num_workers == 4


def test_the_better_half_of_the_screens_near_the_best_get_a_second_look_before_any_is_confirmed():
    # cpu on 2 cores as one run read it: a flat plateau whose single screens scatter by as much as its settings
    # differ. The five screens within 20% of the best (2, 3, 4, 6, 8 workers) are ranked and the better half
    # (6, 4, 2) get a second repetition; 4 workers lead on two and are confirmed.
    study = study_of({})
    (sc,) = scenarios(study.cells)
    values = {
        0: [1037.0],
        1: [1000.0],
        2: [1805.0, 1971.0, 2080.0],
        3: [1754.0],
        4: [1921.0, 1979.0, 1889.0],
        6: [1991.0, 1846.0, 1619.0],
        8: [1779.0, 1820.0, 2027.0],
    }
    out = search(sc, _scripted(values), TuneOptions(), RUNGS)
    second = [s.candidate for s in out.steps if "second repetition" in s.note]
    assert second == ["num_workers=6", "num_workers=4", "num_workers=2"]
    assert [out.evidence[sc.find({"num_workers": n}).key].n for n in (2, 3, 4, 6, 8)] == [2, 1, 3, 2, 1]
    assert out.answer.candidate.num_workers == 4
    # two screens near the best: the better half is the best alone, which the confirm step measures anyway
    pair = study_of({"num_workers": [0, 2]})
    (sc2,) = scenarios(pair.cells)
    out2 = search(sc2, _scripted({0: [1010.0, 1100.0, 1100.0], 2: [1040.0, 960.0, 1000.0]}), TuneOptions(), RUNGS)
    assert not [s for s in out2.steps if "second repetition" in s.note]


def test_a_scenario_of_one_cell_gets_that_cell_at_full_repetitions():
    study = study_of({"num_workers": [2]})
    _, out = tune_one(study, RISING, 0.03, 0)
    assert out.stop == ONE_CANDIDATE and out.answer.n == 3 and out.measured == 3


def test_a_setting_that_failed_is_never_the_answer():
    study = study_of({})
    _, out = tune_one(study, RISING, 0.03, 0, fails=lambda c: c.num_workers >= 6)
    assert out.answer.candidate.num_workers == 4


def test_every_candidate_failing_gives_no_answer():
    study = study_of({})
    _sc, out = tune_one(study, RISING, 0.03, 0, fails=lambda c: True)
    assert out.answer is None and out.stop == NO_USABLE
    assert all(e.n == 1 for e in out.evidence.values())  # nothing measured twice


def test_options_are_validated():
    with pytest.raises(TuneError, match="margin"):
        TuneOptions(margin=0.7)
    with pytest.raises(TuneError, match="repetitions"):
        TuneOptions(repetitions=2)
    with pytest.raises(TuneError, match="finalists"):
        TuneOptions(finalists=0)
    assert TuneOptions().rungs(3) == (3,) and TuneOptions(max_repetitions=5).rungs(3) == (3, 5)


# --- a whole run through the ordinary runner and store --------------------------------------------------------

STUDY_TOML = """
[study]
name = "{name}"
repetitions = 3
timeout_s = 120
[matrix]
workload = ["sleep"]
num_workers = [0, 1, 2, 3, 4, 6, 8]
cores = [{cores}]
batch_size = [16]
"""


class SyntheticRunner:
    """A TaskRunner that writes the record a cell would, with a throughput from the surface of the test."""

    surface = staticmethod(RISING)
    fail = False
    made = 0

    def __init__(self, dataset):
        type(self).made += 1

    def run(self, task, store, settings, launcher=None):
        c = task.cell
        digest = hashlib.sha256(f"{c.cell_id}/{task.repetition}".encode()).digest()
        noise = math.exp(0.03 * np.random.default_rng(int.from_bytes(digest[:8], "little")).normal())
        if self.fail:
            rec = Record.for_task(task, "failed", launcher, error={"kind": "worker_crash", "message": "synthetic"})
        else:
            value = self.surface(_Candidate(c)) * noise
            rec = Record.for_task(
                task,
                "ok",
                launcher,
                env={"gpus": []},
                metrics={
                    "samples_per_s": value,
                    "end_to_end_samples_per_s": 0.8 * value,
                    "memory_bytes": {"uss_peak": memory_of(_Candidate(c))},
                },
            )
        store.write(rec)
        return rec


class _Candidate:
    def __init__(self, cell):
        self.num_workers = cell["num_workers"]


@pytest.fixture
def tune_study(study_file):
    return load_study(study_file(STUDY_TOML.format(name="syn", cores=2)), max_cores=2)


def test_run_writes_ordinary_records_and_tune_json(tune_study, tmp_path, monkeypatch):
    monkeypatch.setattr(SyntheticRunner, "fail", False)
    results = tmp_path / "results"
    run = run_tune(tune_study, results, TuneOptions(), runner_factory=SyntheticRunner)
    assert run.exit_code == EXIT_ANSWERED and run.path == results / "syn-tune.json"
    saved = json.loads(run.path.read_text())
    assert saved == json.loads(json.dumps(run.result))
    records = [r for _, r in Store(results).records("syn-tune")]
    assert records and all(r.ok and r.study == "syn-tune" for r in records)
    assert {r.cell_id for r in records} <= {c.cell_id for c in tune_study.cells}  # the grid's own cells
    (sc,) = saved["scenarios"]
    a = sc["answer"]
    assert a["settings"]["num_workers"] == 8 and a["repetitions"] == 3
    assert a["interval"]["coverage"] == pytest.approx(0.75) and a["interval"]["low"] <= a["median"]
    assert sc["cost"]["measurements"] == len(records) < sc["cost"]["grid_measurements"] == 21
    assert sc["cost"]["cell_seconds"] >= 0 and saved["cost"]["measured_now"] == len(records)
    rules = {r["rule"]: r for r in sc["rules_of_thumb"]}
    assert rules["cores"]["num_workers"] == 2 and rules["lightning"]["num_workers"] == 1
    assert "4_per_gpu" not in rules  # the records saw no GPU
    explored = {e["settings"]["num_workers"] for e in sc["explored"]}
    for r in rules.values():
        assert r["measured"] == (r["num_workers"] in explored)
        if r["measured"]:
            assert r["source"] == "measured" and r["value"] > 0
        elif r["source"].startswith("estimated: interpolated"):  # between two measured num_workers
            assert r["value"] > 0
        else:  # never extrapolated
            assert r["source"].startswith("not estimated") and r["value"] is None
    assert [w["answer"] for w in sc["within_margin"]].count(True) == 1
    line = answer_line(sc)
    assert line.startswith("DataLoader(ds, batch_size=16, num_workers=8, prefetch_factor=2)  # ")
    assert "samples/s [" in line and "75% interval" in line


def test_a_rule_of_thumb_outside_the_matrix_is_interpolated_never_extrapolated(study_file, tmp_path, monkeypatch):
    monkeypatch.setattr(SyntheticRunner, "fail", False)
    text = STUDY_TOML.format(name="gaps", cores=2).replace("[0, 1, 2, 3, 4, 6, 8]", "[1, 4, 8]")
    study = load_study(study_file(text), max_cores=2)
    run = run_tune(study, tmp_path / "r", TuneOptions(), runner_factory=SyntheticRunner)
    rules = {r["rule"]: r for r in run.result["scenarios"][0]["rules_of_thumb"]}
    assert not rules["cores"]["in_matrix"] and not rules["cores"]["measured"]  # 2 workers: not listed
    # 4 workers were not measured (their ceiling, 4 x 770 x 1.1, is below the band of 8 workers' 3,900)
    assert rules["cores"]["source"] == "estimated: interpolated between num_workers 1 and 8"
    assert 770 < rules["cores"]["value"] < 2400
    assert rules["cores_minus_1"]["measured"] and rules["cores_minus_1"]["num_workers"] == 1
    text0 = STUDY_TOML.format(name="high", cores=2).replace("[0, 1, 2, 3, 4, 6, 8]", "[4, 8]")
    high = run_tune(
        load_study(study_file(text0, "high.toml"), max_cores=2),
        tmp_path / "r",
        TuneOptions(),
        runner_factory=SyntheticRunner,
    )
    low = {r["rule"]: r for r in high.result["scenarios"][0]["rules_of_thumb"]}["cores_minus_1"]
    assert low["value"] is None and low["source"] == "not estimated: outside the measured num_workers (4-8)"
    assert "not in the matrix" in high.text


def test_a_rule_of_thumb_is_never_interpolated_from_0_workers_but_bounded_by_the_linear_ceiling(
    study_file, tmp_path, monkeypatch
):
    # JPEG-like on 2 cores: 1 worker gives less than both 0 (no transfer between processes) and 2 workers;
    # between 0 and 2 a straight line would put it at about 615
    monkeypatch.setattr(SyntheticRunner, "fail", False)
    monkeypatch.setattr(SyntheticRunner, "surface", staticmethod(by_workers([500, 400, 730, 760, 690, 700, 620])))
    run = run_tune(
        load_study(study_file(STUDY_TOML.format(name="jpeg", cores=2)), max_cores=2),
        tmp_path / "r",
        TuneOptions(),
        runner_factory=SyntheticRunner,
    )
    (sc,) = run.result["scenarios"]
    explored = {e["settings"]["num_workers"]: e["median"] for e in sc["explored"]}
    assert 1 not in explored and {0, 2} <= set(explored)  # 1 x 500 x 1.1 cannot reach the band: not measured
    one = {r["rule"]: r for r in sc["rules_of_thumb"]}["cores_minus_1"]
    assert one["num_workers"] == 1 and not one["measured"] and one["value"] is None
    assert one["at_most"] == pytest.approx(explored[0])  # 1 x the one-process rate: the main process's at 0
    assert one["source"].startswith("not estimated: at most 1 x the one-process rate")
    assert one["ratio_at_most"] == pytest.approx(explored[0] / sc["answer"]["median"])
    assert "workers = cores - 1: 1 (at most -3" in run.text  # 500 / 760: at most -34%, give or take the noise
    # where the ceiling is no lower than the answer it says nothing: no bound, and still no line from 0 workers
    monkeypatch.setattr(SyntheticRunner, "surface", staticmethod(by_workers([500, 400, 730, 760, 690, 700, 620])))
    only0 = STUDY_TOML.format(name="only0", cores=2).replace("[0, 1, 2, 3, 4, 6, 8]", "[0, 8]")
    run = run_tune(
        load_study(study_file(only0, "only0.toml"), max_cores=2),
        tmp_path / "r",
        TuneOptions(),
        runner_factory=SyntheticRunner,
    )
    (sc,) = run.result["scenarios"]
    assert sc["answer"]["settings"]["num_workers"] == 8
    rules = {r["rule"]: r for r in sc["rules_of_thumb"]}
    assert rules["cores"]["source"] == "not estimated: outside the measured num_workers (8), 0 workers aside"
    assert "at_most" not in rules["2x_cores"] and rules["2x_cores"]["value"] is None  # 4 x 500 > 620
    zero = STUDY_TOML.format(name="zero", cores=2).replace("[0, 1, 2, 3, 4, 6, 8]", "[0]")
    run = run_tune(
        load_study(study_file(zero, "zero.toml"), max_cores=2),
        tmp_path / "r",
        TuneOptions(),
        runner_factory=SyntheticRunner,
    )
    rules = {r["rule"]: r for r in run.result["scenarios"][0]["rules_of_thumb"]}
    assert rules["cores"]["source"] == "not estimated: no num_workers of 1 or more measured"
    assert rules["cores_minus_1"]["source"] == "not estimated: no num_workers of 1 or more measured"


def test_a_second_run_resumes_from_the_records(tune_study, tmp_path, monkeypatch):
    monkeypatch.setattr(SyntheticRunner, "fail", False)
    results = tmp_path / "results"
    first = run_tune(tune_study, results, TuneOptions(), runner_factory=SyntheticRunner)
    made = SyntheticRunner.made
    again = run_tune(tune_study, results, TuneOptions(), runner_factory=SyntheticRunner)
    assert SyntheticRunner.made == made  # nothing to measure: the runner is not even set up
    assert again.result["cost"]["measured_now"] == 0
    assert again.result["cost"]["reused"] == first.result["cost"]["measurements"]
    assert again.result["scenarios"][0]["answer"] == first.result["scenarios"][0]["answer"]


def test_every_cell_failing_exits_1(tune_study, tmp_path, monkeypatch):
    monkeypatch.setattr(SyntheticRunner, "fail", True)
    run = run_tune(tune_study, tmp_path / "results", TuneOptions(), runner_factory=SyntheticRunner)
    assert run.exit_code == EXIT_NO_ANSWER
    (sc,) = run.result["scenarios"]
    assert sc["answer"] is None and "worker_crash: synthetic" in sc["errors"]
    assert "no answer" in run.text


def test_end_to_end_objective_reads_its_metric(tune_study, tmp_path, monkeypatch):
    monkeypatch.setattr(SyntheticRunner, "fail", False)
    run = run_tune(tune_study, tmp_path / "r", TuneOptions(objective="end_to_end"), runner_factory=SyntheticRunner)
    a = run.result["scenarios"][0]["answer"]
    assert a["metric"] == "end_to_end_samples_per_s" and a["median"] < 0.85 * RISING(_Candidate({"num_workers": 8}))


def test_dataloader_call_writes_only_what_a_script_needs():
    ctx = {"batch_size": 64}
    assert (
        dataloader_call({"num_workers": 0, "prefetch_factor": None}, ctx, ["num_workers"])
        == "DataLoader(ds, batch_size=64, num_workers=0)"
    )
    settings = {
        "num_workers": 4,
        "prefetch_factor": 4,
        "persistent_workers": True,
        "pin_memory": False,
        "start_method": "spawn",
    }
    assert dataloader_call(settings, ctx, ["num_workers", "persistent_workers"]) == (
        "DataLoader(ds, batch_size=64, num_workers=4, prefetch_factor=4, persistent_workers=True, "
        "multiprocessing_context='spawn')"
    )
    checkpointed = {**ctx, "snapshot_every_n_steps": 16}  # a checkpointable scenario is tuned as it is used
    assert dataloader_call({"num_workers": 2, "prefetch_factor": 2}, checkpointed, ["num_workers"]) == (
        "StatefulDataLoader(ds, batch_size=64, num_workers=2, prefetch_factor=2, snapshot_every_n_steps=16)"
    )


# --- the CLI -------------------------------------------------------------------------------------------------


def test_cli_bad_option_is_one_line_and_exit_2(study_file, tmp_path, capsys):
    path = study_file(STUDY_TOML.format(name="syn", cores=1))
    assert main(["tune", str(path), "--results", str(tmp_path), "--margin", "0.7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: tune: margin 0.7")
    assert main(["tune", str(tmp_path / "missing.toml")]) == 2


def test_submit_tune_dry_run_asks_for_one_job_with_the_node_cores(study_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("loaderbench.launch.slurm.shutil.which", lambda name, *a, **k: None)  # no Slurm here
    path = study_file(STUDY_TOML.format(name="syn", cores=2))
    rc = main(
        [
            "submit",
            str(path),
            "--cluster",
            str(REPO / "slurm" / "test.toml"),
            "--results",
            str(tmp_path / "r"),
            "--tune",
            "--dry-run",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "would submit: tune 'syn' on one node, 2 cores, 0 GPUs" in err
    assert main(["submit", str(path), "--cluster", str(REPO / "slurm" / "test.toml"), "--tune", "-k", "x"]) == 2


@pytest.mark.parametrize("tune", [[], ["--tune"]], ids=["grid", "tune"])
def test_a_dry_run_needs_no_slurm_here_and_a_submit_without_it_says_what_is_missing(
    study_file, tmp_path, capsys, monkeypatch, tune
):
    monkeypatch.setattr("loaderbench.launch.slurm.shutil.which", lambda name, *a, **k: None)
    path = study_file(STUDY_TOML.format(name="syn", cores=2))
    args = [
        "submit",
        str(path),
        "--cluster",
        str(REPO / "slurm" / "test.toml"),
        "--results",
        str(tmp_path / "r"),
        *tune,
    ]
    assert main([*args, "--dry-run"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "no srun on PATH" in err and "test.toml" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r" / "syn").exists() and not (tmp_path / "r" / "syn-tune").exists()  # nothing began


@pytest.mark.slow
def test_tune_measures_real_cells(study_file, tmp_path, capsys):
    path = study_file("""
[study]
name = "tune-real"
repetitions = 3
warmup_batches = 1
measure_batches = 6
timeout_s = 120
[matrix]
workload = ["sleep"]
num_workers = [0, 2]
cores = [1]
batch_size = [4]
sleep_ms = [20.0]
""")
    results = tmp_path / "results"
    rc = main(["tune", str(path), "--results", str(results), "-q"])
    out = capsys.readouterr().out
    assert rc == 0, out
    result = json.loads((results / "tune-real-tune.json").read_text())
    answer = result["scenarios"][0]["answer"]
    # physics fixes the answer: the main process sleeps 20 ms per sample in turn, two workers sleep side by side
    # and need almost no CPU, so even on one loaded core (a few ms late at each wake-up) 2 workers read about
    # twice 0 workers' rate, far outside the margin that would make the cheaper 0 workers the answer
    assert answer["settings"]["num_workers"] == 2, answer
    assert answer["repetitions"] == 3 and answer["median"] > 0
    assert "DataLoader(ds, batch_size=4, num_workers=2" in out
    records = list((results / "tune-real-tune").glob("*.json"))
    assert len(records) == result["cost"]["measurements"] <= 6

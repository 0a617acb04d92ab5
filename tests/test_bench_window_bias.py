"""The window-bias check of `make bench` (loaderbench/bench/window_bias.py): the bare loop's timing on fake loaders
and fake clocks, the summary's arithmetic and verdicts on synthetic runs. No wall-clock assertions."""

import math
import os

import pytest

from loaderbench.bench import window_bias as wb
from loaderbench.study.window import plan_window


class Ticking:
    """A fake loader and its clock: every batch handed out advances the clock by `dt` seconds."""

    def __init__(self, n: int, dt: float = 0.5):
        self.n, self.dt, self.now, self.handed = n, dt, 100.0, 0

    def clock(self) -> float:
        return self.now

    def __iter__(self):
        for i in range(self.n):
            self.now += self.dt
            self.handed += 1
            yield i


def test_bare_loop_times_exactly_the_window_batches():
    loader = Ticking(50, dt=0.5)
    r = wb.time_bare_loop(loader, warmup=4, batches=10, batch_size=32, clock=loader.clock)
    assert r["seconds"] == pytest.approx(10 * 0.5)  # batches 5..14 arrive inside the window
    assert r["samples_per_s"] == pytest.approx(10 * 32 / 5.0)
    assert r["warmup_s"] == pytest.approx(4 * 0.5)
    assert loader.handed == 14  # stops at the window's last batch: the rest of the epoch is never asked for


def test_bare_loop_refuses_a_loader_that_runs_out_inside_the_window():
    loader = Ticking(10)
    with pytest.raises(ValueError, match="ran out after 10"):
        wb.time_bare_loop(loader, warmup=4, batches=10, batch_size=32, clock=loader.clock)
    with pytest.raises(ValueError):
        wb.time_bare_loop([], warmup=0, batches=10, batch_size=32)


def test_bare_warmup_is_twice_the_pipeline_and_at_least_four():
    assert [wb.bare_warmup(n, 2) for n in (0, 1, 4, 8)] == [4, 4, 16, 32]


def test_the_cells_are_the_suites_own_and_the_plan_keeps_windows_pipeline_neutral():
    c = wb.bias_cell(8, 12).typed
    assert (c.workload, c.cpu_work, c.cores, c.batch_size, c.num_workers) == ("cpu", 15, 1, 32, 8)
    plan = plan_window(c)
    assert plan.measure >= 2 * 8 * c.prefetch_factor and plan.tail == 8 * c.prefetch_factor


def runs(bare: dict, short: dict, long_: dict, reps: int = 3, jitter: float = 0.0) -> list[dict]:
    """Synthetic runs: every arm's samples/s per worker count, each repetition scaled by 1 + jitter x (rep - 1),
    the same for every arm of a repetition (a machine that is slower in one round than another)."""
    out = []
    for rep in range(reps):
        k = 1 + jitter * (rep - 1)
        for n in wb.WORKERS:
            out.append({"num_workers": n, "arm": "bare", "repetition": rep, "samples_per_s": k * bare[n]})
            out.append({"num_workers": n, "arm": str(wb.WINDOWS[0]), "repetition": rep, "samples_per_s": k * short[n]})
            out.append({"num_workers": n, "arm": str(wb.WINDOWS[1]), "repetition": rep, "samples_per_s": k * long_[n]})
    return out


def test_summary_medians_ratios_and_met_goals():
    s = wb.summarize(
        runs({0: 500, 4: 480, 8: 470}, {0: 500, 4: 484, 8: 471}, {0: 500, 4: 481, 8: 472}, reps=6, jitter=0.1)
    )
    p = s["per_workers"]
    assert p[0]["bare_samples_per_s"] == pytest.approx(575)  # median over repetitions of 450, 500, ..., 700
    assert p[8]["lb12_over_bare"]["estimate"] == pytest.approx(471 / 470)
    assert p[8]["short_over_long"]["estimate"] == pytest.approx(471 / 472)
    # the machine's round-to-round drift is shared by every arm of a round: paired, the ratios do not scatter
    assert p[8]["short_over_long"]["low"] == pytest.approx(p[8]["short_over_long"]["high"])
    assert s["eight_over_zero"]["12"]["estimate"] == pytest.approx(471 / 500)
    assert s["eight_over_zero"]["bare"]["estimate"] == pytest.approx(470 / 500)
    assert s["eight_over_zero_over_bare"]["12"]["estimate"] == pytest.approx((471 / 500) / (470 / 500))
    assert [v["status"] for v in s["verdicts"]] == ["met", "met"]
    assert s["verdicts"][0]["claim"] == wb.CLAIM_WORKERS


def test_summary_misses_a_window_that_reads_fast_with_more_workers():
    # the 12-batch window of 8 workers reads 30% above 0 workers and 30% above the 120-batch window
    s = wb.summarize(runs({0: 500, 4: 500, 8: 500}, {0: 500, 4: 520, 8: 650}, {0: 500, 4: 500, 8: 500}, reps=6))
    assert [v["status"] for v in s["verdicts"]] == ["missed", "missed"]
    assert "1.300" in s["verdicts"][0]["detail"]


def test_a_goal_the_scatter_cannot_decide_is_undecided_with_the_repetitions_it_needs():
    r = runs({0: 500, 4: 500, 8: 500}, {0: 500, 4: 500, 8: 500}, {0: 500, 4: 500, 8: 500}, reps=6)
    for row in r:  # the short window scatters +-5% from repetition to repetition, independently of the rest
        if row["arm"] == "12":
            row["samples_per_s"] *= (0.95, 1.05, 0.97, 1.03, 0.99, 1.01)[row["repetition"]]
    v = wb.summarize(r)["verdicts"][1]
    assert v["status"] == "undecided" and "repetitions would decide it" in v["detail"]


def test_repetitions_to_decide_follow_the_square_root_law():
    iv = {"estimate": 1.0, "low": 0.96, "high": 1.04, "n": 4}
    assert wb.repetitions_to_decide(iv, 0.02) == 16  # half-width 4% -> 2%: four times the repetitions
    assert wb.repetitions_to_decide({**iv, "estimate": 1.03}, 0.02) is None  # the estimate itself lies outside


def test_too_few_repetitions_decide_nothing():
    # five repetitions: the median's distribution-free interval reaches at most 94%, short of the bench's 95%
    s = wb.summarize(runs({0: 500, 4: 500, 8: 500}, {0: 500, 4: 500, 8: 500}, {0: 500, 4: 500, 8: 500}, reps=5))
    assert [v["status"] for v in s["verdicts"]] == ["n/a", "n/a"]


def test_summary_judges_nothing_when_a_run_failed():
    r = runs({0: 500, 4: 500, 8: 500}, {0: 500, 4: 500, 8: 500}, {0: 500, 4: 500, 8: 500}, reps=6)
    for row in r:
        if row["num_workers"] == 8 and row["arm"] == "120":
            row["samples_per_s"] = None
    s = wb.summarize(r)
    assert math.isnan(s["per_workers"][8]["lb120_samples_per_s"])
    assert [v["status"] for v in s["verdicts"]] == ["n/a", "n/a"]  # 8 workers: no repetition left to judge


def test_step_profile_finds_a_cost_every_repetition_pays_and_not_one_repetitions_burst():
    def cell(rep: int, first_cost: float, burst: bool = False) -> dict:
        steps = [0.06] * 120
        for i in range(3):
            steps[i] *= first_cost
        if burst:
            steps[5] = 0.6  # other work on the machine, in the first batches of this repetition only
        return {"num_workers": 0, "arm": "120", "repetition": rep, "step_s": steps}

    clean = wb.step_profile([cell(rep, 1.0, burst=rep == 0) for rep in range(6)], 0, 12)
    assert clean["estimate"] == pytest.approx(1.0) and clean["confidence"] >= 0.95
    warm = wb.step_profile([cell(rep, 2.0) for rep in range(6)], 0, 12)
    assert warm["estimate"] == pytest.approx(15 / 12)  # three of twelve batches at twice the time


def test_measured_step_s_reads_the_window_from_the_per_batch_times():
    raw = {"done": [[0.1, 0.2, 0.35, 0.45, 0.6, 0.7]]}
    window = {"warmup_batches": 2, "measure_batches": 3}
    assert wb.measured_step_s(raw, window) == pytest.approx([0.15, 0.1, 0.15])


def test_bare_loop_runs_in_a_forked_child_pinned_to_one_cpu(monkeypatch):
    """A tiny CPU-bound cell with a worker, two measured batches: the loop runs in another process (forked: it
    sees this module's stand-ins), on one CPU and one torch thread, and so does its DataLoader worker."""
    import torch
    from torch.utils.data import get_worker_info

    from loaderbench.bench.common import make_cell

    real = wb.time_bare_loop

    def observed(loader, *args, **kwargs):  # runs in the child: what the loop and its worker see
        it = iter(loader)
        out = real(it, *args, **kwargs)
        return {
            **out,
            "pid": os.getpid(),
            "affinity": sorted(os.sched_getaffinity(0)),
            "threads": torch.get_num_threads(),
            "worker_affinity": [sorted(os.sched_getaffinity(w.pid)) for w in it._workers],
            "in_worker": get_worker_info() is not None,
        }

    monkeypatch.setattr(wb, "time_bare_loop", observed)
    config = make_cell("cpu", 1, 1, cpu_work=1).config
    r = wb.run_bare(config, batches=2, repetition=0, timeout_s=120)
    assert "error" not in r, r.get("traceback")
    assert r["measure_batches"] == 2 and r["warmup_batches"] == 4 and r["samples_per_s"] > 0
    assert r["pid"] != os.getpid() and not r["in_worker"]  # a child process, the loop in its main thread
    assert r["affinity"] == [r["cpu"]] and r["threads"] == 1
    assert r["worker_affinity"] == [[r["cpu"]]]  # the DataLoader worker inherits the one CPU

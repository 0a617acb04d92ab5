"""`loaderbench doctor --tune`: the settings searched are those that apply to the loader, the search on the
script's own dataset stays within its budget of trials, finds workers where the dataset sleeps, and the winner is
validated in the script's own loop before it is recommended."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from loaderbench.doctor import watch
from loaderbench.doctor.doctor_json import SCHEMA, VERSION, read
from loaderbench.doctor.settings import changes_line, read_settings
from loaderbench.doctor.tuning import LoopShape, TuneBudget, search_space, tune_loader
from loaderbench.errors import LoaderbenchError
from tests.test_doctor import REPO, _doctor
from tests.test_doctor_iterable import Split, Whole

SAMPLE_S = 0.005  # each sample sleeps this long: sleeps overlap across workers, whatever the cores


class Sleepy(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        time.sleep(SAMPLE_S)
        return torch.tensor([i])


def _workers(label: str) -> int:
    return int(label.split()[0].removeprefix("num_workers="))


# --- the space: only the axes that apply ------------------------------------------------------------------------


def test_a_map_style_dataset_varies_workers_prefetch_and_persistence():
    values, fixed = search_space(read_settings(DataLoader(Sleepy(), batch_size=4)), cores=2, accelerator=False)
    assert values["num_workers"] == [0, 1, 2, 3, 4]  # up to twice the cores
    assert values["persistent_workers"] == [False, True] and values["prefetch_factor"] == [2, 4]
    assert "pin_memory" not in values and "no accelerator" in fixed["pin_memory"]
    assert "start_method" not in values  # fork stays fork: spawn would import the script in every worker


def test_the_start_method_varies_only_towards_fork_and_pinning_only_with_an_accelerator():
    loader = DataLoader(Sleepy(), batch_size=4, num_workers=1, multiprocessing_context="spawn")
    values, _ = search_space(read_settings(loader), cores=8, accelerator=True)
    assert values["start_method"] == ["spawn", "fork"]
    assert values["pin_memory"] == [False, True]
    assert max(values["num_workers"]) == 16


def test_the_workers_range_reaches_what_a_loop_that_waits_on_io_needs_and_no_further_than_the_cores_allow():
    from loaderbench.doctor.tuning import workers_to_hide

    # a batch loads in 32 ms (5% of it on a CPU) and a step takes 10 ms: twice 3.2 workers, 7; the ladder's 8
    io = LoopShape(step_s=0.010, load_s=0.032, load_cpu_share=0.05)
    need, why = workers_to_hide(io, cores=2)
    assert need == 7 and "32 ms" in why
    values, _ = search_space(read_settings(DataLoader(Sleepy(), batch_size=4)), 2, False, hide=need)
    assert values["num_workers"] == [0, 1, 2, 3, 4, 6, 8]
    # loading half on a CPU: 4 workers keep 2 cores busy, however long the loading waits
    assert workers_to_hide(LoopShape(step_s=0.010, load_s=0.1, load_cpu_share=0.5), cores=2)[0] == 4
    # loading that never computes: at most 16 workers per core
    assert workers_to_hide(LoopShape(step_s=0.001, load_s=10.0, load_cpu_share=None), cores=2)[0] == 32
    assert workers_to_hide(LoopShape(step_s=0.010), cores=2) == (None, "the loop's loading time per batch is not known")
    # the range never shrinks below twice the cores
    values, _ = search_space(read_settings(DataLoader(Sleepy(), batch_size=4)), 2, False, hide=1)
    assert values["num_workers"] == [0, 1, 2, 3, 4]


def test_the_loops_shape_reads_one_batchs_loading_from_the_waits_or_from_the_workers_period():
    steps = {"step_p50_s": 0.010, "wait_p50_s": 0.030, "step_cpu_share": 0.2, "wait_cpu_share": 0.05}
    # no workers: the main process loads a batch during next()
    alone = LoopShape.of_report({"steps": steps, "settings": {"num_workers": 0}, "workers": {}})
    assert alone == LoopShape(0.010, 0.2, 0.030, 0.05)
    # 2 workers, data-bound: each delivers a batch every 2 periods of 40 ms; together they keep 0.5 cores busy
    two = LoopShape.of_report({"steps": steps, "settings": {"num_workers": 2}, "workers": {"workers_cpu_cores": 0.5}})
    assert two.load_s == pytest.approx(0.080) and two.load_cpu_share == pytest.approx(0.25)


def test_a_replica_step_spends_its_cpu_share_on_this_thread_and_lasts_the_step_at_least():
    replica = LoopShape(step_s=0.05, step_cpu_share=0.4)
    wall, cpu = time.perf_counter(), time.thread_time()
    replica.step()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    assert cpu >= 0.4 * 0.05 and wall >= 0.05


def test_a_trial_pays_the_workers_start_at_each_epoch_unless_they_persist():
    """Workers whose start takes 1 s: over an epoch of 8 batches the loop pays it again with workers started anew
    at every epoch, and not with persistent ones; the trial rates a whole epoch, so it sees that."""
    from loaderbench.doctor.tuning import LoaderTrials

    loader = DataLoader(Sleepy(), batch_size=8, worker_init_fn=_slow_start)  # 8 batches per epoch
    trials = LoaderTrials(loader, ["num_workers", "persistent_workers"], TuneBudget(120, 4), LoopShape(0.002), 8)
    anew = trials.trial({"num_workers": 2, "persistent_workers": False})
    kept = trials.trial({"num_workers": 2, "persistent_workers": True})
    assert anew.status == kept.status == "ok"
    assert kept.value > anew.value


def _slow_start(_worker_id: int) -> None:
    time.sleep(1.0)


class ThreadedLoader(DataLoader):
    """A DataLoader that takes `worker_method`, as a torch with thread workers does (this one runs processes)."""

    def __init__(self, *args, worker_method: str = "process", **kwargs):
        self.worker_method = worker_method
        super().__init__(*args, **kwargs)


def test_thread_workers_are_searched_only_where_the_dataloader_offers_them(monkeypatch):
    from loaderbench.doctor import tuning
    from loaderbench.doctor.abtest import variant_loader
    from loaderbench.study.loader_rules import dataloader_has_threads

    settings = read_settings(DataLoader(Sleepy(), batch_size=4))
    # two readings of the installed torch, its source and its signature, agree
    assert tuning.thread_workers_offered() == dataloader_has_threads()
    values, fixed = search_space(settings, cores=2, accelerator=False, threads=False)
    assert "worker_method" not in values and "no thread workers" in fixed["worker_method"]

    monkeypatch.setattr(torch.utils.data, "DataLoader", ThreadedLoader)
    assert tuning.thread_workers_offered()
    values, fixed = search_space(settings, cores=2, accelerator=False, threads=True)
    assert values["worker_method"] == ["process", "thread"] and "worker_method" not in fixed
    # a thread-worker variant: the argument reaches DataLoader, and no start method goes with it
    loader = DataLoader(Sleepy(), batch_size=4, num_workers=1, multiprocessing_context="fork")
    variant = variant_loader(loader, {"num_workers": 2, "worker_method": "thread"})
    assert isinstance(variant, ThreadedLoader) and variant.worker_method == "thread"
    assert variant.multiprocessing_context is None
    assert "worker_method='thread'" in changes_line({"num_workers": 2, "worker_method": "thread"})


def test_an_iterable_dataset_that_does_not_split_is_not_tuned_over_num_workers():
    whole = read_settings(DataLoader(Whole(), batch_size=4))
    values, fixed = search_space(whole, cores=2, accelerator=False)
    assert values == {"num_workers": [0]} and "does not split" in fixed["num_workers"]
    result = tune_loader(DataLoader(Whole(), batch_size=4), whole, 2, LoopShape(0.001), TuneBudget(30, 10))
    assert result["stop"] == "nothing to search" and result["trials"] == [] and result["changes"] == {}
    # with workers already, only what keeps the stream as it is: prefetch, never the number of workers
    loader = DataLoader(Whole(), batch_size=4, num_workers=2)
    result = tune_loader(loader, read_settings(loader), 2, LoopShape(0.001), TuneBudget(30, 4))
    assert result["space"]["num_workers"] == [2] and "persistent_workers" not in result["space"]
    assert result["trials"] and {_workers(t["setting"]) for t in result["trials"]} == {2}
    assert "num_workers" not in result["changes"]


def test_an_iterable_dataset_that_splits_is_tuned_over_num_workers():
    values, fixed = search_space(read_settings(DataLoader(Split(), batch_size=4)), cores=2, accelerator=False)
    assert values["num_workers"] == [0, 1, 2, 3, 4] and "num_workers" not in fixed
    assert "persistent_workers" not in values


# --- the search on the dataset object -----------------------------------------------------------------------------


class LongSleepy(Sleepy):
    """64 batches an epoch: workers started anew pay their start once an epoch, and on a machine busy with other
    work (a fork and a worker's start take hundreds of ms there) that start must not outweigh the sleeps."""

    def __len__(self) -> int:
        return 256


def test_the_search_finds_workers_for_a_sleeping_dataset_within_its_trials():
    loader = DataLoader(LongSleepy(), batch_size=4)
    result = tune_loader(loader, read_settings(loader), 2, LoopShape(0.002), TuneBudget(seconds=120, trials=16))
    assert 0 < len(result["trials"]) <= 16
    assert result["changes"]["num_workers"] > 0  # four sleeps at a time load faster than one
    rates = {_workers(t["setting"]): t["steps_per_s"] for t in result["trials"] if t["phase"] == "screen"}
    # a trial rates a whole epoch of 64 batches: workers started anew pay their start in it, persistent ones not
    with_workers = [t["steps_per_s"] for t in result["trials"] if _workers(t["setting"]) > 0 and t["steps_per_s"]]
    assert max(with_workers) > rates[0]


def test_the_budget_counts_trials():
    loader = DataLoader(Sleepy(), batch_size=4)
    result = tune_loader(loader, read_settings(loader), 2, LoopShape(0.002), TuneBudget(seconds=120, trials=3))
    assert len(result["trials"]) == 3 and result["stop"] == "budget spent (3 trials)"
    assert result["best"]["repetitions"] == 1  # the best of what was measured, not confirmed


def test_the_budget_counts_seconds_too(monkeypatch):
    """On a clock that advances one second per read, a budget of 20 s ends the search after 20 reads."""
    import loaderbench.doctor.tuning as tuning

    ticks = itertools.count()
    monkeypatch.setattr(tuning, "clock", lambda: float(next(ticks)))
    loader = DataLoader(Sleepy(), batch_size=4)
    result = tune_loader(loader, read_settings(loader), 2, LoopShape(0.002), TuneBudget(seconds=20, trials=24))
    assert result["stop"] == "budget spent (20 s)" and 1 <= len(result["trials"]) < 20


def test_a_loop_that_does_not_wait_for_data_is_not_searched():
    # a list: each batch is ready at once. Steps of 200 ms: the loop preempted inside next() by the other work of
    # a busy machine (the test suite's own, tens of ms at a time) stays far below the 5% bound, as it did not with
    # steps of 20 and 50 ms
    loader = DataLoader(list(range(100)), batch_size=4)
    w = watch(loader, steps=20, warmup=2, headspace=0, echo=False, tune=True)
    for _ in w:
        time.sleep(0.2)
    (lo,) = w.report()["processes"][0]["loaders"]
    assert lo["verdict"] == "not data-bound"
    assert lo["tune"]["stop"] == "not searched" and "trials" not in lo["tune"]
    assert lo["in_loop"] is None and lo["recommendation"] is None and lo["paste"] is None
    assert lo["tune"]["note"] == "the loop is not data-bound: leave the loader"


def test_tune_and_validate_together_is_bad_input():
    with pytest.raises(LoaderbenchError, match="either tune=True or validate"):
        watch(DataLoader(list(range(8))), tune=True, validate={"num_workers": 2})


def test_a_setting_that_fails_is_never_the_answer(monkeypatch):
    """Every setting with workers fails to start (as a dataset that cannot be pickled fails under spawn)."""
    import loaderbench.doctor.tuning as tuning

    real = tuning.variant_loader

    def variant(loader, changes):
        if changes.get("num_workers", loader.num_workers):
            raise RuntimeError("cannot start workers here")
        return real(loader, changes)

    monkeypatch.setattr(tuning, "variant_loader", variant)
    loader = DataLoader(Sleepy(), batch_size=4)
    result = tune_loader(loader, read_settings(loader), 2, LoopShape(0.002), TuneBudget(seconds=120, trials=8))
    assert any(t["steps_per_s"] is None for t in result["trials"])
    assert result["changes"] == {}  # loading in the main process is what works
    # from workers kept alive, back to none: the line to paste drops what DataLoader refuses without workers
    loader = DataLoader(Sleepy(), batch_size=4, num_workers=2, persistent_workers=True)
    result = tune_loader(loader, read_settings(loader), 2, LoopShape(0.002), TuneBudget(seconds=120, trials=8))
    assert result["changes"] == {"num_workers": 0, "prefetch_factor": None, "persistent_workers": False}
    line = changes_line(result["changes"])
    assert line == "DataLoader(..., num_workers=0, prefetch_factor=None, persistent_workers=False)"
    DataLoader(Sleepy(), batch_size=4, **result["changes"])  # what it says can be pasted


@pytest.mark.parametrize(
    "budget, option",
    [(dict(seconds=0), "--budget-s"), (dict(trials=0), "--budget-trials"), (dict(seconds=float("nan")), "--budget-s")],
)
def test_a_bad_budget_is_one_clear_error(budget, option):
    with pytest.raises(LoaderbenchError, match=f"^{option} .*allowed"):
        TuneBudget(**budget)


def test_the_line_to_paste_names_only_the_changes():
    line = changes_line({"persistent_workers": True, "num_workers": 6, "start_method": "fork"})
    assert line == "DataLoader(..., num_workers=6, persistent_workers=True, multiprocessing_context='fork')"


# --- a whole script: search, then the loop's own check ------------------------------------------------------------

SLEEPY_SCRIPT = f"""
import time
import torch
from torch.utils.data import DataLoader, Dataset

class Sleepy(Dataset):
    def __len__(self):
        return 256  # epochs long enough that the workers' start at each one is a small part of a round
    def __getitem__(self, i):
        time.sleep({SAMPLE_S})
        return torch.tensor([i])

if __name__ == "__main__":
    loader = DataLoader(Sleepy(), batch_size=4)
    steps = 0
    for epoch in range(4):
        for batch in loader:
            time.sleep(0.002)
            steps += 1
    print("script done", steps)
"""


@pytest.mark.slow
def test_tune_finds_workers_and_the_loop_runs_faster_with_them(tmp_path):
    r = _doctor(
        tmp_path,
        SLEEPY_SCRIPT,
        *("--steps", "10", "--warmup", "2", "--no-headspace", "--rounds", "6", "--round-steps", "16"),
        *("--tune", "--budget-trials", "12"),
    )
    assert r.returncode == 0 and "script done" in r.stdout, r.stderr[-3000:]
    doc = read(tmp_path / "out" / "doctor.json")
    assert doc["schema"] == SCHEMA and doc["schema_version"] == VERSION == 7 and doc["plan"]["tune"] is True
    (lo,) = doc["processes"][0]["loaders"]
    tune, in_loop = lo["tune"], lo["in_loop"]
    assert len(tune["trials"]) <= 12 and tune["changes"]["num_workers"] > 0
    assert in_loop["changes"] == tune["changes"]  # the search's winner is what the loop checked
    assert in_loop["low"] > 1  # the loop's steps overlap with sleeps in the workers
    assert lo["paste"] == changes_line(tune["changes"]) and "paste it" in lo["recommendation"]
    assert f"to paste: {lo['paste']}" in r.stderr
    assert "Search (--tune)" in (tmp_path / "out" / "doctor.html").read_text()


def test_tune_with_try_or_a_bad_budget_is_bad_input(tmp_path):
    for extra in (["--tune", "--try", "num_workers=2"], ["--tune", "--budget-s", "0"]):
        r = subprocess.run(
            [sys.executable, "-m", "loaderbench", "doctor", "--out", str(tmp_path), *extra, "--", "python", "x.py"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
        )
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert r.stderr.strip().startswith("error: ") and ("--try" in r.stderr or "--budget-s" in r.stderr)

"""Physics that cannot fail by noise: bounds that contention can only push further from the threshold.

- Sleep-bound: samples cannot arrive faster than the sleeps allow in one process, and 4 workers sleeping
  in parallel need almost no CPU, so even a loaded single core lets them beat the one-process bound.
- CPU-bound on c cores: however many workers, throughput cannot exceed c cores' worth of the work, measured
  as samples per CPU-second of one process doing all of it (contention only lowers wall-clock throughput).
  Checked on the steady-state window itself, with 12-batch windows: a window that opened on a full prefetch
  pipeline and closed on a drained one read 30% above the core with 8 workers.
"""

import statistics

import pytest

from loaderbench.launch.local import run_local
from loaderbench.schema.store import Store
from loaderbench.study.study_file import parse_study

pytestmark = pytest.mark.slow


def run(tmp_path, matrix: dict, **study):
    raw = {
        "study": {"name": "phys", "repetitions": 1, "warmup_batches": 2, "measure_batches": 8, **study},
        "matrix": matrix,
    }
    s = parse_study(raw, where="test")
    store = Store(tmp_path)
    run_local(s, store)
    recs = [r.to_json() for _, r in store.records("phys")]
    assert all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    return {r["config"]["num_workers"]: r for r in recs}


def run_reps(tmp_path, matrix: dict, repetitions: int, **study) -> dict[tuple[int, int], list[dict]]:
    """Records by (num_workers, cores), every repetition."""
    raw = {"study": {"name": "phys", "repetitions": repetitions, "warmup_batches": 2, **study}, "matrix": matrix}
    store = Store(tmp_path)
    run_local(parse_study(raw, where="test"), store)
    out: dict[tuple[int, int], list[dict]] = {}
    for r in (rec.to_json() for _, rec in store.records("phys")):
        assert r["status"] == "ok", r.get("error")
        out.setdefault((r["config"]["num_workers"], r["config"]["cores"]), []).append(r)
    return out


def cpu_per_sample(m: dict) -> float:
    """CPU-seconds of the whole cell (main + workers) per sample it consumed."""
    samples = m["end_to_end_samples_per_s"] * m["total_s"]
    return (m["cpu_s"]["main"] + m["cpu_s"]["workers"]) / samples


TOLERANCE = 1.10  # what the steady window may read above the physical ceiling (scheduling noise of one window)


def test_cpu_bound_steady_throughput_never_beats_the_cores(tmp_path):
    """12-batch windows (the old window's worst case). The cheapest CPU cost per sample any cell paid sets the
    per-core rate, samples per CPU-second (contention only inflates CPU time per sample, so taking the least of
    every cell makes the bound looser, never tighter). With 8 workers on one core the steady rate stays under one
    core's worth; with 4 workers on 2 cores under two cores' worth."""
    recs = run_reps(
        tmp_path,
        {"workload": "cpu", "cpu_work": 10, "batch_size": 4, "num_workers": [0, 4, 8], "cores": [1, 2]},
        repetitions=3,
        measure_batches=12,
    )
    per_core = 1.0 / min(cpu_per_sample(r["metrics"]) for rs in recs.values() for r in rs)
    for (workers, cores), rs in recs.items():
        assert all(len(r["env"]["cpus_allowed"]) == cores for r in rs)
        steady = statistics.median(r["metrics"]["samples_per_s"] for r in rs)
        assert steady <= TOLERANCE * cores * per_core, (workers, cores, steady, per_core)


def test_sleep_bound_scales_past_one_core(tmp_path):
    recs = run(tmp_path, {"workload": "sleep", "sleep_ms": 20.0, "batch_size": 4, "num_workers": [0, 4], "cores": 1})
    serial = recs[0]["metrics"]["samples_per_s"]
    parallel = recs[4]["metrics"]["samples_per_s"]
    assert serial <= 1000 / 20  # one process cannot beat its own sleeps
    assert parallel > 2 * serial
    assert recs[4]["env"]["cpus_allowed"] == recs[0]["env"]["cpus_allowed"][:1]


def test_cpu_bound_on_one_core_does_not_scale(tmp_path):
    recs = run(tmp_path, {"workload": "cpu", "cpu_work": 10, "batch_size": 4, "num_workers": [0, 4], "cores": 1})
    base, four = recs[0]["metrics"], recs[4]["metrics"]
    assert len(recs[4]["env"]["cpus_allowed"]) == 1
    # one core's worth of this work, in samples/s; the smaller per-sample cost of the two runs, so that
    # contention (which can only inflate CPU time per sample) makes the bound looser, never tighter
    ceiling = 1.0 / min(cpu_per_sample(base), cpu_per_sample(four))
    assert four["end_to_end_samples_per_s"] < 1.25 * ceiling
    # and the four workers together never had more than the one core. Their CPU time is read once they have exited,
    # after the loop's clock stopped: the batches still in flight then (num_workers x prefetch_factor) were
    # computed outside total_s, so they are allowed on top, at the cheapest measured cost per sample
    in_flight_s = 4 * 2 * 4 * min(cpu_per_sample(base), cpu_per_sample(four))
    assert four["cpu_s"]["main"] + four["cpu_s"]["workers"] <= 1.1 * four["total_s"] + in_flight_s + 0.05


def test_with_no_work_in_memory_zero_workers_beat_two_on_two_cores(tmp_path):
    """Nothing to do per sample: 0 workers only collate in the main process, while 2 workers add a shared-memory
    batch, pickling and a queue per batch, all received by the same main process. Contention slows the side with
    three processes more than the one with one, so the margin can only widen."""
    recs = run_reps(
        tmp_path,
        {"workload": "inmem", "work_us": 0.0, "sample_bytes": 16, "batch_size": 32, "num_workers": [0, 2], "cores": 2},
        repetitions=3,
        measure_batches=200,
    )
    zero, two = (statistics.median(r["metrics"]["samples_per_s"] for r in recs[(n, 2)]) for n in (0, 2))
    assert zero > 3 * two, (zero, two)


# --- thread workers (loader = "nodes", worker_method = "thread") ---------------------------------------------


GIL_BOUND = 1.5  # cores: one, and room for what the pipeline's threads do without the GIL; no GIL would give about 2


def test_thread_workers_never_keep_more_than_one_core_busy_on_pure_python_work(tmp_path):
    """Pure-Python work holds the GIL: however many thread workers, and however many cores, the cell keeps at most
    one core busy, and so does at most one core's worth of the work (its rate is the cores it keeps busy over its
    CPU cost per sample, and that cost is never below the work's own). A shared host's other work only lowers the
    cores a cell keeps busy. Read as the process tree's CPU over the window the machine watch spans, which brackets
    the pipeline's start and stop (the rusage in `cpu_s` also counts the pipeline's start, and read 1.36 cores on
    one pinned core). An earlier form compared the rate with samples per CPU-second of separate plain cells, and
    failed under a loaded CI run: the host's speed moved between cells, and a thread cell on one pinned core read
    1.6 of it."""
    raw = {
        "study": {"name": "gil", "repetitions": 1, "warmup_batches": 2, "measure_batches": 48},
        "matrix": {
            "workload": "cpu",
            "cpu_work": 10,
            "batch_size": 4,
            "loader": "nodes",
            "worker_method": "thread",
            "num_workers": [0, 4],
            "cores": [1, 2],
        },
    }
    store = Store(tmp_path)
    run_local(parse_study(raw, where="test"), store)
    recs = [rec.to_json() for _, rec in store.records("gil")]
    assert all(r["status"] == "ok" for r in recs), [r.get("error") for r in recs]
    busy = {
        (r["config"]["num_workers"], r["config"]["cores"]): r["metrics"]["machine"]["cell_cpu_s"]
        / r["metrics"]["machine"]["window_s"]
        for r in recs
    }
    assert set(busy) == {(0, 1), (0, 2), (4, 1), (4, 2)}
    assert all(cores < GIL_BOUND for cores in busy.values()), busy


@pytest.mark.parametrize("method", ["thread", "process"])
def test_sleep_bound_thread_workers_beat_the_main_process_on_one_loaded_core(tmp_path, method):
    """4 workers that sleep need almost no CPU, so even with a busy loop on the same core they beat the main
    process, which cannot beat its own sleeps; threads as processes."""
    import os
    import subprocess
    import sys

    core = sorted(os.sched_getaffinity(0))[:1]  # the cell pins its first allowed CPU
    hog = subprocess.Popen(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {core}); exec('while True: pass')"]
    )
    try:
        recs = run(
            tmp_path,
            {
                "workload": "sleep",
                "sleep_ms": 20.0,
                "batch_size": 4,
                "loader": "nodes",
                "worker_method": method,
                "num_workers": [0, 4],
                "cores": 1,
            },
        )
    finally:
        hog.kill()
        hog.wait()
    serial = recs[0]["metrics"]["samples_per_s"]
    parallel = recs[4]["metrics"]["samples_per_s"]
    assert serial <= 1000 / 20  # one process cannot beat its own sleeps
    assert parallel > 2 * serial
    assert recs[4]["config"]["worker_method"] == method

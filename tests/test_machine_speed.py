"""The machine's speed beside every repetition (loaderbench.measure.machine_speed): the reference, the kernel's
counts, and real cells, alone and beside a CPU hog pinned on their core."""

import os
import signal
import subprocess
import sys
import time

import pytest

from loaderbench.launch.local import run_local
from loaderbench.measure import machine_speed as ms
from loaderbench.schema.store import Store
from loaderbench.study.study_file import parse_study


def test_the_reference_jpeg_is_the_same_bytes_every_time_and_decodes():
    first = ms.reference_jpeg()
    ms.reference_jpeg.cache_clear()
    assert ms.reference_jpeg() == first
    from io import BytesIO

    from PIL import Image

    with Image.open(BytesIO(first)) as im:
        assert im.format == "JPEG" and im.size == (ms.JPEG_SIDE, ms.JPEG_SIDE)


def test_the_reference_times_each_core_and_gives_the_thread_its_cores_back():
    cpus = sorted(os.sched_getaffinity(0))
    run = ms.run_reference(cpus)
    assert run["cpus"] == cpus[: ms.REFERENCE_MAX_CORES]
    assert len(run["python_per_core"]) == len(run["jpeg_per_core"]) == len(run["cpus"])
    assert run["python_per_s"] > 0 and run["jpeg_per_s"] > 0 and run["seconds"] > 0
    # a reference unit cannot take less than its iterations at 10 ns each, nor a decode of 65,536 pixels under 20 us
    assert run["python_per_s"] < 1 / (ms.PY_ITERATIONS * 10e-9)
    assert run["jpeg_per_s"] < 1 / 20e-6
    assert sorted(os.sched_getaffinity(0)) == cpus
    # timed on one core only, the thread still gets back every CPU it had (not just the core timed)
    ms.run_reference(cpus[:1])
    assert sorted(os.sched_getaffinity(0)) == cpus


def test_the_kernel_view_subtracts_the_cells_own_time():
    # one core, 2 s at 100 ticks/s: 150 ticks busy (user 100, system 30, irq 10, softirq 10), 10 stolen, 40 idle
    t0 = {0: [0] * 10}
    t1 = {0: [100, 0, 30, 40, 0, 10, 10, 10, 0, 0]}
    view = ms._kernel_view(t0, t1, cell_cpu_s=1.0 * 100 / ms.CLK_TCK, window_s=2.0, cores=1)
    assert view["steal_fraction"] == pytest.approx(10 / 200)
    assert view["others_cpu_s"] == pytest.approx(50 / ms.CLK_TCK)
    assert view["others_share"] == pytest.approx(50 / ms.CLK_TCK / 2.0)
    assert ms._kernel_view(None, t1, 1.0, 2.0, 1) == {
        "steal_fraction": None,
        "others_cpu_s": None,
        "others_share": None,
    }


def test_the_trees_cpu_counts_a_reaped_child_once():
    """What the tree's CPU grew by is the reaped child's CPU as the kernel reports it to its parent (times(2)),
    plus what this process spent meanwhile: not twice the child's, and not none of it."""
    tick = 1 / ms.CLK_TCK
    t0 = os.times()
    before = ms.tree_cpu_s(os.getpid())
    # the child works until it has used 0.3 s of CPU: far more than the ticks either count may round away
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 0.3: pass"])
    child.wait()
    spent = ms.tree_cpu_s(os.getpid()) - before
    t1 = os.times()
    child_s = (t1.children_user + t1.children_system) - (t0.children_user + t0.children_system)
    own_s = (t1.user + t1.system) - (t0.user + t0.system)
    assert child_s >= 0.3 - tick, (child_s, t0, t1)
    assert child_s - 2 * tick <= spent <= child_s + own_s + 2 * tick, (spent, child_s, own_s)


def _cell_study(name: str, **study) -> dict:
    return {
        "study": {"name": name, "repetitions": 1, "warmup_batches": 2, "measure_batches": 30, **study},
        "matrix": {"workload": "cpu", "cpu_work": 10, "batch_size": 8, "num_workers": 0, "cores": 1},
    }


@pytest.mark.slow
def test_a_real_cell_records_the_machine_beside_its_window(tmp_path):
    store = Store(tmp_path)
    run_local(parse_study(_cell_study("ms"), where="test"), store)
    ((_, rec),) = list(store.records("ms"))
    assert rec.ok, rec.error
    m = rec.metric("machine")
    assert m["before"]["cpus"] == m["after"]["cpus"] == rec.env["cpus_allowed"][:1]
    assert m["python_per_s"] > 0 and m["jpeg_per_s"] > 0
    assert m["cost_s"] == pytest.approx(m["before"]["seconds"] + m["after"]["seconds"])
    assert 0 <= m["steal_fraction"] <= 1 and 0 <= m["others_share"] <= 1
    assert m["cpu_mhz"] is None or m["cpu_mhz"] > 0
    # the window holds the loop: the cell's CPU is most of it on one core, never more than the core could give
    assert 0 < m["cell_cpu_s"] <= 1.1 * m["window_s"] + 0.05
    assert m["window_s"] >= rec.metric("total_s")
    assert isinstance(m["disturbed"], bool) and m["margins"] == {"speed": 0.25, "others": 0.10}


def _hog(cpu: int) -> subprocess.Popen:
    code = f"import os\nos.sched_setaffinity(0, [{cpu}])\nwhile True: pass"
    hog = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    time.sleep(0.3)  # pinned and spinning before the cell starts
    return hog


@pytest.mark.slow
def test_a_cpu_hog_on_the_cells_core_shows_as_others_share_and_is_measured_again(tmp_path):
    """Physics: a busy loop pinned on the one core of a CPU-bound cell takes about half of it (the scheduler shares a
    core fairly between two runnable processes), so others' share is far above the 10% margin; the repetition is
    disturbed and measured again within the budget (here one repetition: one more attempt, whatever the hog does),
    and the disturbed attempt's throughput and machine speed are kept beside the new one."""
    core = sorted(os.sched_getaffinity(0))[0]
    hog = _hog(core)
    try:
        store = Store(tmp_path)
        summary = run_local(parse_study(_cell_study("hog", remeasure_budget=1.0), where="test"), store)
    finally:
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()
    ((_, rec),) = list(store.records("hog"))
    assert rec.ok, rec.error
    m = rec.metric("machine")
    assert m["others_share"] > 0.3, m
    assert rec.disturbed and any("other processes took" in why for why in m["disturbed_reasons"])
    assert summary.measured == 2 and summary.disturbed == 2 and rec.attempt == 2
    ((earlier,),) = [rec.previous_attempts]
    assert earlier["status"] == "ok" and earlier["metrics"]["samples_per_s"] > 0
    assert earlier["metrics"]["machine"]["disturbed"]


_CELL = """
import json, os, sys
os.environ["LOADERBENCH_CELL"] = str(os.getpid())  # as the runner's forked cell marks itself
from loaderbench.measure.machine_speed import adopted_cpu_s, tree_cpu_s
before, tree0 = adopted_cpu_s(os.getpid()), tree_cpu_s(os.getpid())
r, w = os.pipe()
os.set_inheritable(w, True)
if os.fork() == 0:  # daemonise, as torch_shm_manager does: the grandchild is adopted by the subreaper above
    if os.fork() == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)  # a daemon lets go of the cell's output
        os.dup2(devnull, 1), os.dup2(devnull, 2)
        spin = "import os, time\\nwhile time.process_time() < 0.3: pass\\n"
        spin += f"os.write({w}, str(os.getpid()).encode())\\ntime.sleep(60)"
        os.execv(sys.executable, [sys.executable, "-c", spin])
    os._exit(0)
os.wait()
daemon = int(os.read(r, 32))
after, tree1 = adopted_cpu_s(os.getpid()), tree_cpu_s(os.getpid())
print(json.dumps({"before": before, "after": after, "tree_s": tree1 - tree0, "daemon": daemon}))
"""

_RUNNER = """
import ctypes, json, os, signal, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, as the runner
out = json.loads(subprocess.run([sys.executable, sys.argv[1]], capture_output=True, text=True, check=True).stdout)
os.kill(out["daemon"], signal.SIGKILL)
os.waitpid(out["daemon"], 0)
print(json.dumps(out))
"""


def test_a_program_the_cell_started_that_left_its_tree_counts_as_the_cells_not_as_others(tmp_path):
    """A daemonised helper of the cell (torch_shm_manager under file_system sharing double-forks, so the runner
    adopts it) spends CPU on the cell's cores: it is the cell's work, so it must not count as other processes.
    Here it spins for 0.3 s of CPU: the cell's own tree misses that time, the adopted programs' CPU holds it."""
    import json

    cell, runner = tmp_path / "cell.py", tmp_path / "runner.py"
    cell.write_text(_CELL)
    runner.write_text(_RUNNER)
    proc = subprocess.run([sys.executable, str(runner), str(cell)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    daemon = str(out["daemon"])
    tick = 1 / ms.CLK_TCK
    assert daemon not in out["before"] and out["after"][daemon] >= 0.3 - tick, out
    assert out["tree_s"] < 0.3 - tick, out  # the cell's tree alone does not see the daemon's work

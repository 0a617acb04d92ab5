"""Faults lose nothing: each fault a cell can meet ends as one classified record, the run goes on with the
next cell, and no process or /dev/shm entry of the cell is left behind; an interrupted run keeps what it
finished and resumes without duplicates.

Faults are injected through the normal study path with the `fault` workload (a harness self-test,
loaderbench/workloads/fault.py). Every run happens in a subprocess, inside a private mount namespace with its
own tmpfs on /dev/shm where `unshare` allows it (root), so leak checks see exactly what the run left and the
machine's /dev/shm is never touched. Every process of a run carries a tag in its environment, so leftovers
are found wherever they were re-parented. Nothing here waits on timing luck: a worker that must be killed
from outside blocks until the test has killed it, and the only time limit that matters is a hang's own
timeout_s.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import typing
import uuid
from pathlib import Path

import pytest

from loaderbench.analysis.rules.worker_costs import DATASET_FRAME
from tests.conftest import REPO

pytestmark = pytest.mark.slow

GUARD_S = 120  # a run that takes this long is broken (no test relies on it to pass)

# Runs a command in a private /dev/shm (when asked), then waits until no process carrying the tag is left
# (reaping orphans: it is a subreaper), and reports the leftovers and what /dev/shm holds afterwards.
WRAPPER = r"""
import ctypes, json, os, signal, subprocess, sys, time
args = json.loads(sys.argv[1])
tag = args["tag"]
# The run gets SIGINT's default disposition, as a run in a terminal has it for Ctrl-C: a test suite started as a
# background job of a non-interactive shell (`make test &`, some CI agents) inherits SIGINT ignored, and an
# ignored SIGINT stays ignored through exec, so the run would never see the test's Ctrl-C.
signal.signal(signal.SIGINT, signal.SIG_DFL)
if args["shm_size"]:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + args["shm_size"], "tmpfs", "/dev/shm"], check=True)
ctypes.CDLL(None).prctl(36, ctypes.c_ulong(1), 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
env = dict(os.environ, LOADERBENCH_TEST_TAG=tag, **args["env"])
shm_before = sorted(os.listdir("/dev/shm"))
child = subprocess.Popen(args["cmd"], env=env, cwd=args["cwd"], stdout=open(args["log"], "w"), stderr=subprocess.STDOUT)
open(args["pidfile"] + ".tmp", "w").write(str(child.pid))
os.replace(args["pidfile"] + ".tmp", args["pidfile"])
rc = child.wait()

def tagged():
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if ("LOADERBENCH_TEST_TAG=" + tag).encode() in open(f"/proc/{pid}/environ", "rb").read().split(b"\0"):
                state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    out.append([int(pid), open(f"/proc/{pid}/comm").read().strip()])
        except OSError:
            pass
    return out

deadline = time.monotonic() + args["wait_s"]
left = tagged()
while left and time.monotonic() < deadline:
    time.sleep(0.1)
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    left = tagged()
json.dump({"rc": rc, "leftovers": left, "shm_before": shm_before, "shm_after": sorted(os.listdir("/dev/shm"))},
          open(args["out"], "w"))
"""


def _can_isolate_shm() -> bool:
    try:
        out = subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                "mount -t tmpfs -o size=1M tmpfs /dev/shm && test -w /dev/shm",
            ],
            capture_output=True,
            timeout=60,
        )
        return out.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


ISOLATED = _can_isolate_shm()


class Run:
    """`python -m loaderbench run STUDY` in a subprocess (optionally in a private /dev/shm)."""

    def __init__(self, tmp: Path, study: Path, results: Path, shm_size: str | None = "64M", env: dict | None = None):
        self.tag = uuid.uuid4().hex
        self.tmp, self.study, self.results = tmp, study, results
        n = len(list(tmp.glob("run-*.json")))
        self.out, self.log, self.pidfile = tmp / f"run-{n}.json", tmp / f"run-{n}.log", tmp / f"run-{n}.pid"
        args = {
            "tag": self.tag,
            "shm_size": shm_size if ISOLATED else None,
            "env": env or {},
            "cwd": str(REPO),
            "cmd": [sys.executable, "-m", "loaderbench", "run", str(study), "--results", str(results)],
            "log": str(self.log),
            "pidfile": str(self.pidfile),
            "out": str(self.out),
            "wait_s": 30,
        }
        prefix = ["unshare", "--mount", "--propagation", "private"] if ISOLATED else []
        self.proc = subprocess.Popen(prefix + [sys.executable, "-c", WRAPPER, json.dumps(args)], cwd=REPO)

    @property
    def runner_pid(self) -> int:
        deadline = time.monotonic() + GUARD_S
        while not self.pidfile.exists():
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)
        return int(self.pidfile.read_text())

    def find(self, comm: str) -> int:
        """Wait for a process of this run named `comm` (e.g. a worker blocked in a `wait_kill` fault)."""
        deadline = time.monotonic() + GUARD_S
        while time.monotonic() < deadline:
            for pid, name in tagged_processes(self.tag):
                if name == comm:
                    return pid
            assert self.proc.poll() is None, f"the run ended before a {comm!r} process appeared:\n{self.output()}"
            time.sleep(0.05)
        raise AssertionError(f"no {comm!r} process within {GUARD_S} s:\n{self.output()}")

    def wait(self) -> dict:
        try:
            self.proc.wait(timeout=GUARD_S * 3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the run did not end:\n{self.output()}") from None
        assert self.proc.returncode == 0, f"the wrapper failed:\n{self.output()}"
        return json.loads(self.out.read_text())

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def tagged_processes(tag: str) -> list[tuple[int, str]]:
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if f"LOADERBENCH_TEST_TAG={tag}".encode() not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{pid}/comm") as fh:
                out.append((int(pid), fh.read().strip()))
        except OSError:
            continue
    return out


def study_text(name: str, matrix: str, timeout_s: float = 60, seed: int = 0, extra: str = "") -> str:
    return (
        f'[study]\nname = "{name}"\nrepetitions = 1\nwarmup_batches = 1\nmeasure_batches = 4\n'
        # cells run once each, in plan order: none is measured again, however busy the machine is
        f"timeout_s = {timeout_s}\nseed = {seed}\nremeasure_budget = 0\n\n[matrix]\n{matrix}\n{extra}"
    )


def write_study(tmp: Path, name: str, matrix: str, order_ok=None, **kw) -> tuple[Path, list]:
    """Write a study; with `order_ok(cells in run order)`, pick the first seed whose run order satisfies it."""
    from loaderbench.schema.store import Store
    from loaderbench.study.plan import pending_tasks
    from loaderbench.study.study_file import load_study

    path = tmp / f"{name}.toml"
    for seed in range(200):
        path.write_text(study_text(name, matrix, seed=seed, **kw))
        study = load_study(path)
        order = [t.cell for t in pending_tasks(study, Store(tmp / "no-results"))]
        if order_ok is None or order_ok(order):
            return path, order
    raise AssertionError("no seed gives the wanted order")


def records(results: Path, study: str) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((results / study).glob("*.json"))}


def by_fault(recs: dict[str, dict]) -> dict:
    return {
        (
            r["config"]["workload"],
            r["config"].get("fault"),
            r["config"]["num_workers"],
            r["config"].get("sharing_strategy"),
        ): r
        for r in recs.values()
    }


def assert_clean(report: dict, recs: dict[str, dict], tag: str) -> None:
    """No process of the run is alive, none of the pids any cell had is alive with the run's tag, and /dev/shm
    holds what it held before the run."""
    assert report["leftovers"] == [], f"processes left behind: {report['leftovers']}"
    alive = {pid for pid, _ in tagged_processes(tag)}
    for rec in recs.values():  # each cell, right after it ended (before the next one started) ...
        assert rec["cleanup"]["processes_left"] == [], rec["cleanup"]
        if ISOLATED:
            assert rec["cleanup"]["shm_new_left"] == [], rec["cleanup"]
        seen = set(rec["cleanup"]["processes_seen"])  # ... and at the end of the run
        assert not seen & alive, f"{rec['cell_id']}: processes {seen & alive} still alive"
    if ISOLATED:
        assert report["shm_after"] == report["shm_before"], f"/dev/shm entries left: {report['shm_after']}"
    else:  # shared /dev/shm: only what carries one of the cells' pids can be told apart from other users'
        pids = {p for rec in recs.values() for p in rec["cleanup"]["processes_seen"]}
        ours = [
            n
            for n in set(report["shm_after"]) - set(report["shm_before"])
            if n.startswith("torch_") and n.split("_")[1].isdigit() and int(n.split("_")[1]) in pids
        ]
        assert not ours, f"/dev/shm entries of the cells left: {ours}"


def assert_order_kept(recs: dict[str, dict], order: list) -> None:
    """The run went through the cells in plan order, one after the other, each recorded."""
    by_id = {r["cell_id"]: r for r in recs.values()}
    assert [c.cell_id for c in order] == sorted(by_id, key=lambda cid: by_id[cid]["started_at"])
    for a, b in itertools.pairwise(order):
        assert by_id[a.cell_id]["finished_at"] <= by_id[b.cell_id]["started_at"]


# --- 1, 2, 6: faults inside workers, one run, healthy cell last --------------------------

WORKER_FAULTS = """workload = "fault"
fault = ["raise", "segfault", "wait_kill", "oom", "none"]
fault_at = 5
num_workers = 2
batch_size = 2
sharing_strategy = "file_system"
memory_limit_mb = [256, 65536]  # only the oom cell gets the tight one

[[exclude]]
fault = "oom"
memory_limit_mb = 65536

[[exclude]]
fault = ["raise", "segfault", "wait_kill", "none"]
memory_limit_mb = 256
"""


def test_worker_faults_are_recorded_and_the_run_goes_on(tmp_path):
    healthy_last = lambda order: order[-1]["fault"] == "none"
    study, order = write_study(tmp_path, "faults", WORKER_FAULTS, order_ok=healthy_last)
    results = tmp_path / "results"
    run = Run(tmp_path, study, results)
    victim = run.find("lb-wait-kill")  # blocked until killed: an external SIGKILL, mid-epoch, no timing luck
    os.kill(victim, signal.SIGKILL)
    report = run.wait()
    assert report["rc"] == 1, run.output()  # every cell ran; some failed, as injected
    recs = records(results, "faults")
    assert len(recs) == len(order) == 5
    got = {r["config"]["fault"]: r for r in recs.values()}

    def check(fault, status, kind, *words):
        rec = got[fault]
        assert rec["status"] == status, (fault, rec.get("error"))
        assert rec["error"]["kind"] == kind, (fault, rec["error"])
        for w in words:
            assert w in rec["error"]["message"], (fault, rec["error"]["message"])

    check("raise", "failed", "worker_error", "DataLoader worker", "RuntimeError: fault injected: sample 5 raised")
    # a worker's exception reaches the loop as text: its dataset frame is quoted in the message, not held
    frames = got["raise"]["error"]["frames"]
    assert not any(DATASET_FRAME.match(f) for f in frames["held"]), frames
    assert any(DATASET_FRAME.match(f) for f in frames["quoted"]), frames
    check("segfault", "failed", "worker_crashed", "DataLoader worker", "SIGSEGV", "num_workers = 0")
    check("wait_kill", "failed", "worker_killed", f"(pid {victim})", "signal 9 (SIGKILL")
    check("oom", "failed", "out_of_memory", "memory_limit_mb")
    assert got["oom"]["env"]["limits"]["memory_via"] in ("cgroup-v1", "cgroup-v2", "rlimit_as")
    assert got["none"]["status"] == "ok" and got["none"]["metrics"]["samples_per_s"] > 0
    assert_order_kept(recs, order)
    assert_clean(report, recs, run.tag)


# --- 2 (in the cell), 4, 5, 6 (RLIMIT_AS fallback): file_descriptor sharing, ulimit -n 64, no cgroup ------

CELL_FAULTS = """workload = ["fault", "sleep"]
fault = ["segfault", "raise", "oom", "abort", "exit", "kill_self", "none"]
fault_at = 5
num_workers = [0, 2]
batch_size = 2
sleep_ms = 0.0
sample_kb = 1.0
tensors_per_sample = 64
sharing_strategy = "file_descriptor"
ulimit_nofile = 64
memory_limit_mb = 128

[[exclude]]
workload = "fault"
fault = ["segfault", "raise", "none"]
num_workers = 2

[[exclude]]
workload = "fault"
fault = ["abort", "exit", "kill_self"]
num_workers = 0
"""

# A worker that never returns: only timeout_s ends it. In a study of its own, run beside the one above so that
# waiting for it costs little wall time, with a timeout_s that bounds a hang only: one short enough to keep the
# test quick would decide the verdict of slow-but-healthy cells on a busy machine (a worker-fault cell took 4.4 s
# at load 11 on 2 cores, beside a 10 s timeout). The trivial cell after it shows that the run goes on.
HANG_TIMEOUT_S = 30
HANG = """workload = "fault"
fault = ["hang", "none"]
fault_at = 5
num_workers = [0, 2]
batch_size = 2

[[exclude]]
fault = "hang"
num_workers = 0

[[exclude]]
fault = "none"
num_workers = 2
"""


def test_cell_faults_fd_exhaustion_and_rlimit_memory(tmp_path):
    last_ok = lambda order: order[-1]["workload"] == "fault" and order[-1]["fault"] == "none"
    study, order = write_study(tmp_path, "cellfaults", CELL_FAULTS, order_ok=last_ok, timeout_s=GUARD_S)
    (tmp_path / "hang").mkdir()
    hang_first = lambda order: [c["fault"] for c in order] == ["hang", "none"]
    hang_study, hang_order = write_study(tmp_path / "hang", "hang", HANG, order_ok=hang_first, timeout_s=HANG_TIMEOUT_S)
    results = tmp_path / "results"
    hang_run = Run(tmp_path / "hang", hang_study, results)  # side by side: the hang costs no extra wall time
    run = Run(tmp_path, study, results, env={"LOADERBENCH_CGROUP": "off"})
    report = run.wait()
    assert report["rc"] == 1, run.output()  # every cell ran; some failed, as injected
    recs = records(results, "cellfaults")
    assert len(recs) == len(order) == 10
    got = by_fault(recs)

    def check(key, kind, *words):
        rec = got[key]
        assert rec["status"] == "failed" and rec["error"]["kind"] == kind, (key, rec.get("error"))
        for w in words:
            assert w in rec["error"]["message"], (key, rec["error"]["message"])

    # without workers nothing is shared: no sharing strategy (None)
    check(("fault", "segfault", 0, None), "cell_crashed", "SIGSEGV", "num_workers = 0")
    check(("fault", "raise", 0, None), "dataset_error", "fault injected: sample 5 raised")
    # without workers the loop's own traceback holds the dataset's frame
    assert any(DATASET_FRAME.match(f) for f in got[("fault", "raise", 0, None)]["error"]["frames"]["held"])
    check(("fault", "oom", 0, None), "out_of_memory", "out of memory")
    check(("fault", "oom", 2, "file_descriptor"), "out_of_memory", "DataLoader worker")
    check(
        ("sleep", None, 2, "file_descriptor"),
        "too_many_open_files",
        "too many open files under file_descriptor sharing",
        "ulimit",
        "file_system",
    )
    check(("fault", "abort", 2, "file_descriptor"), "worker_crashed", "DataLoader worker", "SIGABRT")
    check(("fault", "exit", 2, "file_descriptor"), "worker_crashed", "DataLoader worker", "exit code 3")
    check(("fault", "kill_self", 2, "file_descriptor"), "worker_killed", "DataLoader worker", "SIGKILL")
    for key in (("fault", "oom", 0, None), ("fault", "oom", 2, "file_descriptor")):
        assert got[key]["env"]["limits"]["memory_via"] == "rlimit_as"
    assert got[("sleep", None, 0, None)]["status"] == "ok"  # same ulimit, no workers: fine
    assert got[("fault", "none", 0, None)]["status"] == "ok"
    assert_order_kept(recs, order)
    assert_clean(report, recs, run.tag)

    hang_report = hang_run.wait()
    assert hang_report["rc"] == 1, hang_run.output()  # every cell ran; the hang timed out
    hang_recs = records(results, "hang")
    assert len(hang_recs) == len(hang_order) == 2
    keys = (("fault", "hang", 2, "file_descriptor"), ("fault", "none", 0, None))
    hang, after = (by_fault(hang_recs)[key] for key in keys)
    assert hang["status"] == "timeout" and hang["error"]["kind"] == "timeout", hang.get("error")
    assert f"timeout_s = {HANG_TIMEOUT_S}" in hang["error"]["message"]
    assert after["status"] == "ok", after.get("error")
    assert_order_kept(hang_recs, hang_order)
    assert_clean(hang_report, hang_recs, hang_run.tag)


# --- 3: /dev/shm too small ------------------------------------------------------------------------------

SHM_FAULTS = """workload = ["sleep", "fault"]
fault = "none"
sleep_ms = 0.0
sample_kb = 512.0
num_workers = 2
batch_size = 4
sharing_strategy = ["file_descriptor", "file_system"]

[[exclude]]
workload = "fault"
sharing_strategy = "file_descriptor"
"""


@pytest.mark.skipif(not ISOLATED, reason="needs `unshare --mount` (root) for a private, small /dev/shm")
def test_shm_exhausted_in_a_1m_tmpfs(tmp_path):
    study, order = write_study(tmp_path, "shm", SHM_FAULTS, order_ok=lambda o: o[-1]["workload"] == "fault")
    results = tmp_path / "results"
    run = Run(tmp_path, study, results, shm_size="1M")
    report = run.wait()
    assert report["rc"] == 1, run.output()  # every cell ran; some failed, as injected
    recs = records(results, "shm")
    got = by_fault(recs)
    for strategy in ("file_descriptor", "file_system"):
        rec = got[("sleep", None, 2, strategy)]
        assert rec["status"] == "failed" and rec["error"]["kind"] == "shm_exhausted", rec.get("error")
        assert "/dev/shm exhausted" in rec["error"]["message"] and "--shm-size" in rec["error"]["message"]
    assert got[("fault", "none", 2, "file_system")]["status"] == "ok"
    assert_order_kept(recs, order)
    assert_clean(report, recs, run.tag)  # torch leaves its half-made segments here: the runner removes them


# --- 7: the whole run interrupted ---------------------------------------------------------------------------

INTERRUPT = """workload = "fault"
fault = ["none", "wait_kill"]
fault_at = [5, 6]
num_workers = 1
batch_size = 2

[[exclude]]
fault = "wait_kill"
fault_at = 6
"""


def _interrupt_order(order) -> bool:
    return [c["fault"] for c in order] == ["none", "wait_kill", "none"]


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_run_keeps_records_and_resumes(tmp_path, how):
    study, order = write_study(tmp_path, "intr", INTERRUPT, order_ok=_interrupt_order)
    results = tmp_path / "results"
    run = Run(tmp_path, study, results)
    run.find("lb-wait-kill")  # the run is now inside its second cell, for as long as the test wants
    os.kill(run.runner_pid, getattr(signal, how))
    report = run.wait()
    first = records(results, "intr")
    assert [r["config"]["fault"] for r in first.values()] == ["none"], "only the finished cell has a record"
    assert first[f"{order[0].cell_id}-r0.json"]["status"] == "ok"
    if how != "SIGKILL":
        assert report["rc"] == 130, run.output()
        assert "interrupted" in run.output() and "run the same command again" in run.output()
    assert_clean(report, first, run.tag)  # with SIGKILL, the cell process and its worker died with the runner

    # a runner killed while writing leaves at most a temp file: it is no record
    stale = results / "intr" / f".{order[1].cell_id}-r0.json.x1y2.tmp"
    stale.write_text('{"schema": "loaderbench.record/2", "status": "ok", "cell_')
    if how != "SIGKILL":
        from loaderbench.schema.store import Store
        from loaderbench.study.plan import counts
        from loaderbench.study.study_file import load_study

        assert counts(load_study(study), Store(results)) == {"ok": 1, "failed": 0, "timeout": 0, "missing": 2}
        return
    plan = subprocess.run(
        [sys.executable, "-m", "loaderbench", "plan", str(study), "--results", str(results)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
    )
    assert "ok: 1, failed: 0, timeout: 0, missing: 2" in plan.stdout, plan.stdout + plan.stderr

    # resume: the finished cell is not measured again, the others are, once each
    kept = (results / "intr" / f"{order[0].cell_id}-r0.json").read_bytes()
    again = Run(tmp_path, study, results)
    os.kill(again.find("lb-wait-kill"), signal.SIGKILL)
    report2 = again.wait()
    assert report2["rc"] == 1, again.output()  # every cell ran; the killed one failed
    assert "(1 were already done)" in again.output()
    recs = records(results, "intr")
    assert (results / "intr" / f"{order[0].cell_id}-r0.json").read_bytes() == kept
    assert sorted(recs) == sorted(f"{c.cell_id}-r0.json" for c in order)  # one record per cell, no duplicates
    assert [recs[f"{c.cell_id}-r0.json"]["status"] for c in order] == ["ok", "failed", "ok"]
    assert all(r["attempt"] == 1 for r in recs.values())
    assert recs[f"{order[1].cell_id}-r0.json"]["error"]["kind"] == "worker_killed"
    assert_clean(report2, recs, again.tag)


# --- classification, without running anything ----------------------------------------------------------------


def _chained(outer: str, inner: str) -> RuntimeError:
    try:
        try:
            raise RuntimeError(inner)
        except RuntimeError as e:
            raise RuntimeError(outer) from e
    except RuntimeError as e:
        return e


def test_classification_reads_the_whole_exception_chain():
    from loaderbench.measure.failures import classify_exception

    e = _chained(
        "DataLoader worker (pid(s) 41) exited unexpectedly",
        "DataLoader worker (pid 41) is killed by signal: Segmentation fault. ",
    )
    c = classify_exception(e)
    assert c["kind"] == "worker_crashed" and "SIGSEGV" in c["message"] and "pid 41" in c["message"]
    e = _chained(
        "DataLoader worker (pid(s) 7) exited unexpectedly", "DataLoader worker (pid 7) is killed by signal: Killed. "
    )
    assert classify_exception(e)["kind"] == "worker_killed"
    e = _chained(
        "DataLoader worker (pid(s) 7) exited unexpectedly",
        "DataLoader worker (pid 7) exited unexpectedly with exit code 3. Details are lost due to multiprocessing.",
    )
    c = classify_exception(e)
    assert c["kind"] == "worker_crashed" and "exit code 3" in c["message"]


def test_classification_of_resource_errors():
    from loaderbench.measure.failures import classify_exception

    shm = RuntimeError(
        "Caught RuntimeError in DataLoader worker process 1.\nOriginal Traceback (most recent call "
        'last):\n  File "x.py", line 1\nRuntimeError: unable to allocate shared memory(shm) for file '
        "</torch_1_2_3>: No space left on device (28)"
    )
    c = classify_exception(shm, "file_system")
    assert c["kind"] == "shm_exhausted" and "worker 1" in c["message"] and "No space left" in c["message"]
    fds = RuntimeError("received 0 items of ancdata")
    c = classify_exception(fds, "file_descriptor")
    assert c["kind"] == "too_many_open_files" and "file_system" in c["message"]
    mem = RuntimeError(
        "Caught MemoryError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\nMemoryError"
    )
    assert classify_exception(mem)["kind"] == "out_of_memory"
    assert classify_exception(ValueError("plain"))["kind"] == "error"


# what a worker forked after its parent initialized CUDA raised on an H200 node (torch 2.11, torchvision 0.26), when
# its dataset decoded on the GPU (results/reference/h200/gpu-decode), and what torch's own check says
NVJPEG_IN_FORKED_WORKER = (
    "Caught AcceleratorError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
    '  File "loaderbench/workloads/jpeg.py", line 43, in decode\n'
    "    return decode_jpeg(read_file(path), mode=ImageReadMode.RGB, device=_device(decoder))\n"
    "torch.AcceleratorError: CUDA error: initialization error\n"
    "Search for `cudaErrorInitializationError' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
    "group__CUDART__TYPES.html for more information.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
)
TORCH_IN_FORKED_WORKER = (
    "Caught RuntimeError in DataLoader worker process 1.\nOriginal Traceback (most recent call last):\n"
    "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use "
    "the 'spawn' start method\n"
)


def test_cuda_in_a_forked_worker_is_classified_with_the_start_methods_to_use():
    from loaderbench.measure.failures import classify_exception

    for text, worker in ((NVJPEG_IN_FORKED_WORKER, "worker 0"), (TORCH_IN_FORKED_WORKER, "worker 1")):
        c = classify_exception(RuntimeError(text))
        assert c["kind"] == "cuda_after_fork", c
        assert worker in c["message"] and '"spawn"' in c["message"] and '"forkserver"' in c["message"]
        assert "initialization error" in c["message"] or "re-initialize" in c["message"]
    # the same CUDA error in the cell process is not a fork's
    assert classify_exception(RuntimeError("CUDA error: initialization error"))["kind"] == "error"


def test_gpu_out_of_memory_is_told_from_the_hosts():
    from loaderbench.measure.failures import classify_exception

    class OutOfMemoryError(RuntimeError):  # torch.cuda.OutOfMemoryError, by name: no CUDA needed here
        pass

    gpu = OutOfMemoryError("CUDA out of memory. Tried to allocate 1.53 GiB. GPU 0 has a total capacity of 139.80 GiB")
    c = classify_exception(gpu)
    assert c["kind"] == "gpu_out_of_memory" and "batch_size" in c["message"] and "1.53 GiB" in c["message"]
    host = RuntimeError("Caught MemoryError in DataLoader worker process 0.\nOriginal Traceback:\nMemoryError")
    assert classify_exception(host)["kind"] == "out_of_memory"


def test_every_kind_is_documented():
    """docs/troubleshooting.md's table of fault kinds names exactly the kinds a record can carry, each with what
    happened and what to do."""
    import re

    from loaderbench.measure.failures import KINDS

    text = (REPO / "docs" / "troubleshooting.md").read_text()
    table = text.split("## Fault kinds", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in table.splitlines() if re.match(r"^\| `\w+` \|", ln)]
    documented = [re.match(r"^\| `(\w+)` \|", ln)[1] for ln in rows]
    assert sorted(documented) == sorted(KINDS), set(documented) ^ set(KINDS)
    assert len(documented) == len(set(documented))
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split(" | ")]
        assert len(cells) == 3 and all(len(c) > 10 for c in cells[1:]), ln


ESCAPE = r"""
import json, sys, tempfile
import loaderbench.measure.cell_process as C
from loaderbench.schema.cell import Task
from loaderbench.measure.runner import run_task
from loaderbench.schema.store import Store
from loaderbench.study.study_file import parse_study

cell = parse_study({"study": {"name": "d"}, "matrix": {"workload": "fault"}}, where="x").cells[0]

def killed(config, rep, prepared, path, *_):  # torch's SIGCHLD handler raising after cell_main's own except block
    raise RuntimeError("DataLoader worker (pid 5) is killed by signal: Killed. ")

def written_then_raised(config, rep, prepared, path, *_):
    with open(path, "w") as fh:
        json.dump({"status": "failed", "error": {"kind": "worker_error", "message": "the original"}}, fh)
    raise RuntimeError("DataLoader worker (pid 5) is killed by signal: Killed. ")

def torn(config, rep, prepared, path, *_):
    with open(path, "w") as fh:
        fh.write('{"status": "ok", "metr')
    raise OSError(24, "Too many open files")

out = []
for f in (killed, written_then_raised, torn):
    C.cell_main = f
    rec = run_task(Task("d", cell, 0), Store(tempfile.mkdtemp()), {}, timeout_s=60).to_json()
    out.append([rec["status"], rec["error"]["kind"], rec["error"]["message"]])
print(json.dumps(out))
"""


def test_an_exception_escaping_the_cell_body_is_still_recorded():
    """Exceptions that escape cell_main (torch's SIGCHLD handler re-raising for a dead worker at any moment, or
    no file descriptor left to write the result with) still become a classified record, and a result the cell
    had already written completely is kept."""
    out = subprocess.run([sys.executable, "-c", ESCAPE], cwd=REPO, capture_output=True, text=True, timeout=GUARD_S)
    assert out.returncode == 0, out.stderr
    (s1, k1, m1), (s2, k2, m2), (s3, k3, _m3) = json.loads(out.stdout.strip().splitlines()[-1])
    assert (s1, k1) == ("failed", "worker_killed") and "signal 9" in m1
    assert (s2, k2, m2) == ("failed", "worker_error", "the original")
    assert (s3, k3) == ("failed", "too_many_open_files")


def test_a_symptom_is_traced_to_the_worker_that_died():
    """With file_descriptor sharing a dead worker often shows up in the cell as ConnectionResetError (fetching
    the descriptors it had sent): the worker's own death is what gets recorded."""
    import types

    from loaderbench.measure.failures import classify_exception

    dead = subprocess.Popen([sys.executable, "-c", "import os; os.abort()"])
    os.waitid(os.P_PID, dead.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped: as a worker is when the cell looks

    class Iterator:  # what the DataLoader iterator looks like to the classifier
        _workers: typing.ClassVar = [
            types.SimpleNamespace(pid=os.getpid(), exitcode=None),
            types.SimpleNamespace(pid=dead.pid),
        ]

        def next(self):
            raise ConnectionResetError(104, "Connection reset by peer")

    try:
        Iterator().next()
    except ConnectionResetError as exc:
        c = classify_exception(exc, "file_descriptor")
    dead.wait()
    assert c["kind"] == "worker_crashed", c
    assert f"DataLoader worker 1 (pid {dead.pid})" in c["message"] and "SIGABRT" in c["message"]
    assert "ConnectionResetError" in c["message"]


SLOW_RUNNER = r"""
import json, os, select, tempfile
import loaderbench.measure.runner as R
from loaderbench.schema.cell import Task
from loaderbench.measure.runner import run_task
from loaderbench.schema.store import Store
from loaderbench.study.study_file import parse_study

cell = parse_study({"study": {"name": "d", "warmup_batches": 1, "measure_batches": 1},
                    "matrix": {"workload": "sleep", "sleep_ms": 0.0, "batch_size": 1}}, where="x").cells[0]
start = R.start_sentinel

def descheduled(pgid, *args):  # the runner loses the CPU right after the fork, as on a busy machine: it resumes
    fd = os.pidfd_open(pgid)   # once the cell has ended, or has shown that it waits (then nothing ends it)
    select.select([fd], [], [], 5)
    os.close(fd)
    return start(pgid, *args)

R.start_sentinel = descheduled
rec = run_task(Task("d", cell, 0), Store(tempfile.mkdtemp()), {}, timeout_s=120).to_json()
m = rec["metrics"]
print(json.dumps([rec["status"], m["probe"]["samples"], m["memory_bytes"]["pss_peak"], m["open_fds_peak"]]))
"""


def test_the_probe_sees_a_cell_that_ends_before_the_runner_looks():
    """A cell shorter than the runner's way from fork to its first sample (forking the sentinel, waiting for the
    CPU) still has its memory and fds measured: it starts only once the probe has seen it alive."""
    out = subprocess.run([sys.executable, "-c", SLOW_RUNNER], cwd=REPO, capture_output=True, text=True, timeout=GUARD_S)
    assert out.returncode == 0, out.stderr
    status, samples, pss, fds = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == "ok" and samples >= 1 and pss > 0 and fds > 0, (status, samples, pss, fds)


ADOPTED = r"""
import json, os, signal, subprocess, sys, tempfile, time
import psutil
import loaderbench.measure.cell_process as C
from loaderbench.schema.cell import Task
from loaderbench.measure.runner import run_task
from loaderbench.schema.store import Store
from loaderbench.study.study_file import parse_study

tmp = tempfile.mkdtemp()
DAEMON = '''
import os, sys, time
def daemon(pidfile, program=False):  # leaves its parent and its process group: the nearest subreaper adopts it
    pid = os.fork()
    if pid == 0:
        os.setsid()
        child = os.fork()
        if child == 0:
            if program:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)"])
            time.sleep(120)
            os._exit(0)
        open(pidfile + ".tmp", "w").write(str(child))
        os.replace(pidfile + ".tmp", pidfile)
        os._exit(0)
    os.waitpid(pid, 0)
'''
exec(DAEMON)
WAIT_AND_LEAVE_A_DAEMON = DAEMON + '''
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
daemon(sys.argv[2])
'''
cell = parse_study({"study": {"name": "d"}, "matrix": {"workload": "sleep"}}, where="x").cells[0]


def alive(pidfile):
    pid = int(open(pidfile).read())
    try:
        up = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        os.kill(pid, signal.SIGKILL)
    except (psutil.NoSuchProcess, ProcessLookupError):
        return False
    try:
        os.waitpid(pid, 0)  # ours to reap: this process is the runner, a subreaper
    except ChildProcessError:
        pass
    return up


def run(name, program, bystander):
    ours, theirs, go = (os.path.join(tmp, name + "-" + n) for n in ("ours", "theirs", "go"))
    other = None
    if bystander:  # started before the cell, it leaves a daemon behind while the cell runs (as slurmd does)
        other = subprocess.Popen([sys.executable, "-c", WAIT_AND_LEAVE_A_DAEMON, go, theirs])

    def body(config, rep, prepared, path, *_):  # the cell leaves a daemon of its own, then lets the other go
        daemon(ours, program)
        open(go, "w").close()
        if other is not None:
            other.wait()
        with open(path, "w") as fh:
            json.dump({"status": "failed", "error": {"kind": "error", "message": "left a daemon"}}, fh)
        return 0

    C.cell_main = body
    rec = run_task(Task("d", cell, 0), Store(tmp), {}, timeout_s=60)
    if other is not None:
        other.wait()
    killed = rec.cleanup["processes_killed"]
    return {"ours": alive(ours), "theirs": alive(theirs) if bystander else None, "killed": killed}


print(json.dumps([run("embedded", True, True), run("alone", False, False)]))
"""


def test_the_runner_kills_the_orphans_of_its_cell_and_no_others():
    """A runner is a child subreaper: orphans anywhere below it become its children. Alone (the CLI, a Slurm
    task), every orphan it adopts during a cell is the cell's, and it kills them all. Embedded in a process that
    has other children (a test worker that also started a Slurm cluster, whose slurmd leaves every slurmstepd
    to it), it kills only the programs its cell started (they carry the cell's mark) and leaves the others'
    alone: a killed slurmstepd leaves its job RUNNING in Slurm for good."""
    out = subprocess.run([sys.executable, "-c", ADOPTED], cwd=REPO, capture_output=True, text=True, timeout=GUARD_S)
    assert out.returncode == 0, out.stderr
    embedded, alone = json.loads(out.stdout.strip().splitlines()[-1])
    assert embedded == {"ours": False, "theirs": True, "killed": 1}, embedded
    assert alone == {"ours": False, "theirs": None, "killed": 1}, alone

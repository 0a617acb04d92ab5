"""Run one cell repetition in a fresh process and turn what happened into exactly one record.

The runner imports torch and the workloads once; each cell repetition is a process forked from it
(a zygote, as Android and pyperf-like runners do), so a cell pays no interpreter start-up or torch
import, yet starts with clean process-global state. The runner never touches CUDA or starts a
DataLoader itself, and holds no threads when it forks.

Whatever happens to a cell, it ends as one record (ok, failed or timeout with a classified error) and
leaves nothing behind:
- the cell runs in its own process group (and, with `memory_limit_mb`, its own memory cgroup); after it
  ends, the runner kills what is left of it (workers, a forkserver), gives cleanup helpers (the
  multiprocessing resource tracker, torch_shm_manager) a moment to unlink what they track, kills them
  too if they linger, reaps them (the runner is a child subreaper, so the cell's orphans become its
  children, not init's), and removes /dev/shm entries the cell left (probes.sweep_shm). A runner embedded
  in a process that has other children (a test worker that also started a Slurm cluster, whose slurmd
  re-parents every slurmstepd) adopts their orphans too: there, an orphan is the cell's only when it carries
  the cell's mark (probes.CELL_MARK, in the environment of every program the cell starts: torch_shm_manager,
  a forkserver, spawned workers), and the others are left alone;
- if the runner itself dies (SIGKILL, a machine going down), the cell dies with it: the cell process has
  PR_SET_PDEATHSIG = SIGKILL, and a small sentinel process, forked from the runner and blocked on a pipe
  only the runner writes to, kills the cell's whole process group (workers included, whatever started
  them) when that pipe breaks, then cleans up /dev/shm and the cgroup;
- Ctrl-C or SIGTERM (KeyboardInterrupt here) tears the cell down the same way and writes no record: the
  cell is not done, and the next run measures it again.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack

from loaderbench.errors import LoaderbenchError
from loaderbench.measure import window_mark
from loaderbench.measure.failures import classify_exit, out_of_memory
from loaderbench.measure.limits import limits_in_force, oom_victims
from loaderbench.measure.private_shm_cell import enter_in_cell, into_record, open_in_runner
from loaderbench.measure.probes import (
    CELL_MARK,
    SHM_PREFIXES,
    TreeProbe,
    cell_processes,
    is_cleanup_helper,
    off_cell_cpus,
    shm_snapshot,
    sweep_shm,
)
from loaderbench.measure.sentinel import start_sentinel, stop_sentinel
from loaderbench.processes import ResultChannel, kill_group
from loaderbench.schema.cell import CellConfig, Task
from loaderbench.schema.record import Record, now
from loaderbench.schema.store import Store

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
HELPER_GRACE_S = 5.0  # how long cleanup helpers may take to finish on their own before they are killed
CELL_GO = b"g"  # the runner has sampled the cell once: it may start
# torch.cuda.is_available() asked through the CUDA runtime marks this process so that every cell forked from it
# fails at its first CUDA call; through NVML it does not. For code that embeds the runner (the tests, a notebook).
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def _prctl(option: int, arg: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_SUBREAPER = False


def _become_subreaper() -> None:
    """Orphans of a cell (workers of a dead cell process, a daemonised torch_shm_manager) become this
    process's children, so they can be found, killed and reaped here, even in a container whose init reaps
    nothing."""
    global _SUBREAPER
    if not _SUBREAPER and sys.platform.startswith("linux"):
        _SUBREAPER = _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _pidfd_wait(pid: int, timeout: float, pidfd: int | None) -> bool:
    """Wait up to `timeout` s for the child to exit; True when it has."""
    if pidfd is not None:
        r, _, _ = select.select([pidfd], [], [], timeout)
        return bool(r)
    time.sleep(timeout)
    return os.waitpid(pid, os.WNOHANG)[0] != 0


# --- the cell side of the fork ---------------------------------------------------------------------------


def _cell_start(runner_pid: int, cgroup) -> bool:
    """First thing in the forked cell: die with the runner, own process group, join the memory cgroup.
    Returns whether it is inside the cgroup."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != runner_pid:  # the runner died before the line above
        os._exit(75)
    os.setpgid(0, 0)
    os.environ[CELL_MARK] = str(os.getpid())  # inherited by all it starts: how the runner knows its orphans
    if cgroup is None:
        return False
    try:
        cgroup.join(os.getpid())
        return True
    except OSError:  # the cell falls back to RLIMIT_AS (loaderbench.measure.limits.apply_cell_limits)
        return False


def _record_escaped(exc: BaseException, channel: ResultChannel, cell: CellConfig) -> int:
    """An exception escaped cell_main: typically torch's SIGCHLD handler, which raises again (anywhere, even
    while the result is being written) for a worker that died, or no file descriptor left to open the result
    with. Silence the handler and write the classified error straight to the inherited result channel, unless
    cell_main's own result is already complete there."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if channel.read() is not None:
            return 0
        import traceback

        from loaderbench.measure.failures import classify_exception

        channel.overwrite(
            {
                "status": "failed",
                "error": classify_exception(exc, cell.sharing_strategy),
                "traceback": "".join(traceback.format_exception(exc))[-4000:],
            }
        )
        return 0
    except BaseException:  # noqa: BLE001 - the runner records a crashed cell
        return 70


# --- tearing a cell down -----------------------------------------------------------------------------------


def _reap(exclude: set[int]) -> None:
    """Reap zombie children adopted from the cell (this process is a subreaper)."""
    import psutil

    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for c in children:
        if c.pid in exclude:
            continue
        try:
            if c.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(c.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError, OSError):
            pass


def _teardown(
    pgid: int, cgroup, exclude: set[int], seen: set[int], alone: bool = True, wait_shm_manager: bool = False
) -> tuple[int, int, list[int]]:
    """Kill and reap every process left of the cell; returns how many had to be killed (leftovers, then
    torch_shm_manager daemons, which are stopped rather than waited for unless `wait_shm_manager`) and any that
    survived. `alone`: this process had no children but the cell's when it forked the cell, so every orphan it
    adopts is the cell's.

    Workers (and anything else) first; cleanup helpers get HELPER_GRACE_S to finish on their own once the
    processes they watch are gone, since killing them early leaks what they would have unlinked.
    """
    import psutil

    killed = stopped = 0
    helper_deadline = None
    give_up = time.monotonic() + 60  # a process stuck in the kernel (D state) cannot be waited for forever
    procs: list = []
    while time.monotonic() < give_up:
        extra = cgroup.pids() if cgroup is not None else []
        procs = cell_processes(pgid, extra, adopted_from=os.getpid(), exclude=exclude, unmarked=alone)
        _reap(exclude)
        if not procs:
            break
        seen.update(p.pid for p in procs)
        others = [p for p in procs if not is_cleanup_helper(p, shm_manager=wait_shm_manager)]
        if others:
            for p in others:
                try:
                    daemon = p.name().startswith("torch_shm_manag")  # lingers 2 s after its clients by design
                    p.kill()
                    stopped += daemon
                    killed += not daemon
                except psutil.Error:
                    pass
            psutil.wait_procs(others, timeout=2)
            continue
        if helper_deadline is None:
            helper_deadline = time.monotonic() + HELPER_GRACE_S
        if time.monotonic() < helper_deadline:
            psutil.wait_procs(procs, timeout=0.05)
            continue
        for p in procs:
            try:
                p.kill()
                killed += 1
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=2)
    _reap(exclude)
    return killed, stopped, sorted(p.pid for p in procs if p.is_running())


def _children() -> set[int]:
    import psutil

    try:
        return {c.pid for c in psutil.Process().children()}
    except psutil.Error:
        return set()


class _CellProcess:
    """One forked cell repetition, from fork to teardown. `finish()` tears it down once, whatever happened
    (the runner's ExitStack calls it on the way out of an interrupted run too)."""

    def __init__(self, task: Task, prepared, channel: ResultChannel, cgroup, memory_interval_s: float):
        from loaderbench.measure.cell_process import cell_main

        cell = task.cell.typed
        self.cores = cell.cores  # the cell takes the first of this thread's CPUs (cell_process.pin_cores)
        self.cgroup = cgroup
        self.shm_before = shm_snapshot()
        before_children = _children()
        runner_pid = os.getpid()
        go_r, self._go_w = os.pipe()  # the cell starts once the probe has seen it (see watch)
        # the cell's last window has ended (loaderbench.measure.window_mark); the runner's answer
        mark_r, mark_w = os.pipe()
        answer_r, answer_w = os.pipe()
        self._mark_r: int | None = mark_r
        self._answer_w: int | None = answer_w
        shm_r, shm_w = os.pipe() if cell.shm_size_mb else (None, None)  # the cell's /dev/shm is mounted
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the cell process
            code = 70
            try:
                os.close(self._go_w)
                os.close(mark_r)
                os.close(answer_w)
                window_mark.install(mark_w, answer_r)
                in_cgroup = _cell_start(runner_pid, cgroup)
                if shm_w is not None:
                    enter_in_cell(cell, channel, shm_r, shm_w)
                if os.read(go_r, 1) != CELL_GO:  # the runner died before releasing the cell
                    os._exit(75)
                os.close(go_r)
                code = cell_main(cell, task.repetition, prepared, channel.path, in_cgroup)
            except BaseException as exc:  # noqa: BLE001 - what cell_main could not record itself
                code = _record_escaped(exc, channel, cell)
            finally:
                os._exit(code)
        self.pid = pid
        os.close(go_r)
        os.close(mark_w)
        os.close(answer_r)
        if shm_w is not None:
            os.close(shm_w)  # only the cell writes it: the runner reads an end of file if the cell dies first
        try:
            os.setpgid(pid, pid)  # also done by the child; whichever runs first wins the race harmlessly
        except (ProcessLookupError, PermissionError):
            pass
        self.sentinel_pid, self.sentinel_w = start_sentinel(pid, cgroup, self.shm_before)
        self.exclude = before_children | {self.sentinel_pid}
        self.shm = open_in_runner(pid, shm_r) if shm_r is not None else None  # opened here: not the sentinel's
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None
        reader = {"shm_reader": self.shm.used} if self.shm is not None else {}
        self.probe = TreeProbe(pid, memory_interval_s=memory_interval_s, **reader)
        self.status: int | None = None  # exit status, once reaped
        self.timed_out = False
        self.alive_at_timeout = 0
        self._cleanup: dict | None = None

    def watch(self, timeout_s: float, probe_interval_s: float) -> None:
        """Probe the cell's process tree until it exits or its time is up (then kill its group); reap it."""
        deadline = time.monotonic() + timeout_s
        # the probe samples off the cell's cores where there are others; its CPUs come back before the next fork
        own = os.sched_getaffinity(0)
        off = off_cell_cpus(self.cores)
        if off:
            os.sched_setaffinity(0, off)
            self.probe.off_cell_cpus = off
        try:
            # A cell shorter than the runner's way here (forking the sentinel, being scheduled on a busy machine)
            # would be over before the first sample, and its record would say it used no memory and no fds: the
            # cell waits until the probe has sampled it once, alive.
            self.probe.sample()
            self._release()
            while True:
                self.probe.sample()
                if self._wait(probe_interval_s):
                    break
                if time.monotonic() > deadline:
                    self.timed_out = True
                    self.alive_at_timeout = len(cell_processes(self.pid, self.cgroup.pids() if self.cgroup else []))
                    kill_group(self.pid)
                    break
        finally:
            if off:
                os.sched_setaffinity(0, own)
        _, raw_status = os.waitpid(self.pid, 0)
        self.status = os.waitstatus_to_exitcode(raw_status)

    def _wait(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the cell to exit (True) or mark the end of its last window: then walk its
        tree and answer."""
        if self._mark_r is None:
            return _pidfd_wait(self.pid, timeout, self.pidfd)
        waits = [self._mark_r] if self.pidfd is None else [self._mark_r, self.pidfd]
        ready, _, _ = select.select(waits, [], [], timeout)
        if self._mark_r in ready:
            if os.read(self._mark_r, 64) and self._answer_w is not None:
                self.probe.sample(walk=True)
                try:
                    os.write(self._answer_w, window_mark.ANSWER)
                except OSError:  # the cell is gone: its exit shows at the next wait
                    pass
            else:  # every writer is gone
                self._close_marks()
        if self.pidfd is not None:
            return self.pidfd in ready
        return os.waitpid(self.pid, os.WNOHANG)[0] != 0

    def _close_marks(self) -> None:
        for fd in (self._mark_r, self._answer_w):
            if fd is not None:
                os.close(fd)
        self._mark_r = self._answer_w = None

    def _release(self, start: bool = True) -> None:
        """Let the cell start, or (start=False: the run was interrupted first) tell it to exit. Once. A cell that
        is already gone failed to start and is recorded as it ended."""
        if self._go_w is None:
            return
        try:
            if start:
                os.write(self._go_w, CELL_GO)
        except OSError:
            pass
        os.close(self._go_w)
        self._go_w = None

    def finish(self) -> dict:
        """Kill and reap what is left of the cell, sweep /dev/shm, drop the cgroup; what was cleaned up."""
        if self._cleanup is not None:
            return self._cleanup
        self._release(start=False)
        if self.status is None:  # interrupted while it ran
            kill_group(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
        seen = {self.pid} | set(self.probe.seen)  # the teardown adds what it finds
        cleanup = _finish(
            self.pid, self.cgroup, self.exclude, seen, self.shm_before, self.sentinel_pid, self.sentinel_w, self.shm
        )
        if self.pidfd is not None:
            os.close(self.pidfd)
        self._close_marks()
        self._cleanup = {"processes_seen": sorted(seen), **cleanup}
        return self._cleanup


def run_task(
    task: Task,
    store: Store,
    host_env: dict,
    prepared=None,
    timeout_s: float = 300.0,
    probe_interval_s: float = 0.2,
    launcher: dict | None = None,
    memory_interval_s: float = 2.0,
    judge: Callable[[Record], None] | None = None,
) -> Record:
    """Measure one cell repetition and write its record; returns the record. `judge` may mark the record (whether
    the machine disturbed it: loaderbench.study.remeasure) before it is written.

    KeyboardInterrupt/SystemExit while measuring kill the cell and write nothing (the cell is not done).
    """
    from loaderbench.measure.limits import MemoryCgroup

    _refuse_cuda_in_runner()
    cell = task.cell.typed
    _become_subreaper()
    started_at = now()
    mem_limit = cell.memory_limit_mb
    with ExitStack() as stack:
        cgroup = MemoryCgroup.create(int(mem_limit)) if mem_limit else None
        channel = stack.enter_context(ResultChannel())
        process = _CellProcess(task, prepared, channel, cgroup, memory_interval_s)
        stack.callback(process.finish)
        process.watch(timeout_s, probe_interval_s)
        result = channel.read()
        oom_kills = cgroup.oom_kills() if cgroup is not None else 0
        mem_peak = cgroup.peak_bytes() if cgroup is not None else None
        cleanup = process.finish()
    record = _record(task, process, result, timeout_s, launcher, started_at, oom_suspect=oom_kills > 0)
    if oom_kills > 0 and record.status != "ok":
        victims = oom_victims(record.error, process.status)
        record.error = out_of_memory(mem_limit, f"cgroup-{cgroup.version}", victims, record.error)
        record.status = "failed"
    if "shm_private" in cleanup:
        into_record(record, cell, cleanup["shm_private"], result)
    record.env = {**host_env, **(result or {}).get("cell_env", {})}
    limits = limits_in_force(cell, cgroup, mem_peak, oom_kills)
    if limits:
        record.env["limits"] = limits
    record.cleanup = cleanup
    if judge is not None:
        judge(record)
    store.write(record)
    return record


def _refuse_cuda_in_runner() -> None:
    """A process that has initialized CUDA cannot hand it to a forked child: every cell forked from it would fail
    at its first CUDA call (its fingerprint, a model step). Say so once, before forking."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise LoaderbenchError(
            "CUDA is initialized in the process that forks the cells, so no cell could use it: "
            "measure from a process that has not touched CUDA (python -m loaderbench run STUDY)"
        )


def _record(
    task: Task,
    cell: _CellProcess,
    result: dict | None,
    timeout_s: float,
    launcher: dict | None,
    started_at: str,
    oom_suspect: bool,
) -> Record:
    """What the cell's result (or its absence) says, as a record: ok with metrics, or a classified error."""
    if result is None or cell.timed_out:
        detail = None
        if cell.timed_out:
            n = cell.alive_at_timeout
            detail = f"{n} process{'es' if n != 1 else ''} of the cell were still alive"
        error = classify_exit(
            cell.status if cell.status is not None else -9,
            cell.timed_out,
            timeout_s,
            oom_suspect=oom_suspect,
            detail=detail,
        )
        return Record.for_task(
            task,
            "timeout" if cell.timed_out else "failed",
            launcher,
            started_at,
            error=error,
            metrics=_probe_only(cell.probe),
        )
    if result.get("status") != "ok":
        error = result.get("error") or {"kind": "error", "message": "the cell failed without saying why"}
        return Record.for_task(
            task,
            "failed",
            launcher,
            started_at,
            error=error,
            traceback=result.get("traceback"),
            metrics=_probe_only(cell.probe),
        )
    metrics = result["metrics"]
    pm = cell.probe.metrics()
    metrics["cpu_s"]["workers"] = max(metrics["cpu_s"]["workers"], pm["probe"]["workers_cpu_s_sampled"])
    metrics.update(pm)
    return Record.for_task(
        task,
        "ok",
        launcher,
        started_at,
        metrics=metrics,
        raw=_relative(result["raw"]),
        warnings=result.get("warnings") or None,
    )


def _finish(
    pid: int, cgroup, exclude: set[int], seen: set[int], shm_before: set[str], sentinel_pid, sentinel_w, shm=None
):
    """Everything after the cell process has ended: kill/reap the rest, sweep /dev/shm, drop the cgroup. A cell
    with its own /dev/shm (`shm`): torch_shm_manager is left to finish on its own, as a helper, so what remains
    in that /dev/shm is what the cell's processes left there themselves; it is counted, then removed."""
    done = False
    private = None
    try:
        killed, stopped, left = _teardown(
            pid, cgroup, exclude, seen, alone=exclude <= {sentinel_pid}, wait_shm_manager=shm is not None
        )
        if shm is not None:
            private = shm.clear()
        shm_removed = sweep_shm(shm_before, seen)
        if cgroup is not None:
            cgroup.remove()
        done = True
    finally:
        stop_sentinel(sentinel_pid, sentinel_w, done)
    shm_left = sorted(n for n in shm_snapshot() - shm_before if n.startswith(SHM_PREFIXES))
    out = {
        "processes_killed": killed,
        "shm_managers_stopped": stopped,
        "processes_left": left,
        "shm_removed": shm_removed,
        "shm_new_left": shm_left,
    }
    if private is not None:
        out["shm_private"] = private
    return out


def _probe_only(probe: TreeProbe) -> dict:
    pm = probe.metrics()
    pm.pop("memory_timeline", None)
    return pm


def _relative(raw: dict) -> dict:
    t0 = raw["t_iter"][0]
    rel = lambda xs: [round(x - t0, 6) for x in xs]
    return {"t_iter": rel(raw["t_iter"]), "got": [rel(g) for g in raw["got"]], "done": [rel(d) for d in raw["done"]]}

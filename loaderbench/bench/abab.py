"""The cell side of the overhead experiment: a measuring loop with `loaderbench.measure.loop.run_loop`'s signature that
`loaderbench.measure.cell_process.measure_cell(cell, repetition, prepared, loop=...)` runs inside a real cell process.

It consumes one long epoch: the cell's warm-up (`loaderbench.study.window.plan_window`), a calibration, then rounds of
two short windows of equal batch count in a shuffled order, the bare `for` loop and `run_loop`, back to back, while
the parent probes the cell on the runner's cadence (it starts and stops the probe through a pipe). When done it
fills `out` (windows with their start times, rounds, calibration, time to warm) and raises `Finished` to leave
`measure_cell`.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from loaderbench.schema.cell import CellConfig


class Finished(Exception):
    """Raised by the ABAB driver to leave measure_cell once its windows are done."""


class _Reuse:
    """A 'loader' whose iter() is an iterator already running: lets run_loop measure one window of it."""

    def __init__(self, it):
        self.it = it

    def __iter__(self):
        return self.it


@dataclass
class OverheadPlan:
    total_s: float = 16.0  # measuring time, all windows together
    # each window: about this long (batch count from the rate of the round before), at least two prefetch
    # pipelines. Short, so that the two windows of a round share the machine's speed at that moment: on a cloud VM
    # that speed drifts over tenths of a second to seconds (`make bench` part 1 prints by how much), and windows a
    # quarter of a second long read that drift more than the harness's cost.
    window_s: float = 0.01
    calibrate_s: float = 0.5
    min_rounds: int = 20
    seed: int = 0


ORDER = ("bare", "harness")


def bare_window(it, k: int) -> None:
    """`k` batches of `it` as a training loop takes them: `for batch in ...`, each batch held until the next
    arrives. (Not `for _ in zip(range(k), it)`: zip recycles its result tuple when nothing else holds it, so it
    keeps another batch alive and changes when the workers' shared memory is let go; in a fast loader with workers
    it read several percent faster than the loop it stands for.)"""
    n = 0
    if k < 1:
        return
    for batch in it:  # noqa: B007 - the loop is what is measured
        n += 1
        if n >= k:
            break


def abab_driver(cell: CellConfig, plan: OverheadPlan, ctl_w: int, ack_r: int, out: dict) -> Callable:
    """The measuring loop the cell process runs instead of loaderbench.measure.loop.run_loop (same signature).

    After the warm-up and a calibration it tells the parent to start probing ("1", acknowledged), then runs rounds
    of two windows of equal batch count, the bare loop and `run_loop`, in a shuffled order, back to back, each
    window's start and end on the system-wide monotonic clock (`time.perf_counter`), which the parent's probe
    samples are timed on too; then "0" stops the probe."""
    import loaderbench.measure.loop as harness
    from loaderbench.study.window import WindowPlan, pipeline_batches, plan_window

    real_run_loop, summarize_loop = harness.run_loop, harness.summarize_loop

    def handshake(probe: bool) -> None:
        os.write(ctl_w, b"1" if probe else b"0")
        if os.read(ack_r, 1) != b"k":
            raise RuntimeError("the runner side went away")

    def driver(loader, epochs, batches, step, on_epoch_end=None, **_):
        clock = time.perf_counter
        warmup = plan_window(cell).warmup
        t_iter = clock()
        it = iter(loader)
        for _ in range(warmup):
            next(it)
        out["time_to_warm_s"] = clock() - t_iter
        n, t0 = 0, clock()
        while n < 2 or clock() - t0 < plan.calibrate_s:
            next(it)
            n += 1
        rate = calibrated = n / (clock() - t0)
        left = batches - warmup - n
        # a window at least twice the prefetch pipeline, or whether the pipeline happened to be full or empty
        # at a boundary would weigh on a window's time (loaderbench/study/window.py)
        k_min = max(1, 2 * pipeline_batches(cell.num_workers, cell.prefetch_factor))
        rng = random.Random(plan.seed)
        windows, reuse, times = [], _Reuse(it), None
        measured_s, r, ks = 0.0, 0, []
        handshake(True)
        # rounds until total_s of windows (at least min_rounds); each round's window length comes from the rate
        # of the round before (one calibration at a busy moment must not make every window tiny or huge); both
        # windows of a round have the same batch count
        while (measured_s < plan.total_s or r < plan.min_rounds) and left >= 2 * k_min:
            k = min(max(k_min, round(rate * plan.window_s)), left // 2)
            order = list(ORDER)
            rng.shuffle(order)
            round_s = 0.0
            for loop in order:
                c0 = time.thread_time()
                t0 = clock()
                if loop == "bare":
                    bare_window(it, k)
                else:
                    times = real_run_loop(reuse, 1, k, step)
                t1 = clock()
                # the loop thread's CPU in the window: what the loop itself does per batch, beside the wall time
                windows.append(
                    {
                        "round": r,
                        "loop": loop,
                        "batches": k,
                        "t0": t0,
                        "seconds": t1 - t0,
                        "cpu_s": time.thread_time() - c0,
                    }
                )
                round_s += t1 - t0
            left -= 2 * k
            measured_s += round_s
            rate = 2 * k / round_s if round_s > 0 else rate
            ks.append(k)
            r += 1
        handshake(False)
        out.update(calibrated_batches_per_s=calibrated, rounds=r, window_batches=ks, measured_s=measured_s)
        if times is not None:  # what summarizing a window costs, once, outside every window
            s0 = clock()
            summarize_loop(times, WindowPlan("epoch", 0, len(times.got[0]), 0, len(times.got[0])), cell.batch_size)
            out["summarize_loop_s"] = clock() - s0
        if on_epoch_end is not None:
            on_epoch_end()
        out["windows"] = windows
        del it, reuse, times  # workers shut down here, as they do at the end of run_loop
        raise Finished

    return driver


def abab_cell(config: dict, prepared, plan: OverheadPlan, ctl_w: int, ack_r: int) -> dict:
    """The body of the forked cell process: the real measure_cell, driven by the ABAB loop."""
    from loaderbench.measure.cell_process import measure_cell

    out: dict = {}
    cell = CellConfig.of(config)
    try:
        measure_cell(cell, 0, prepared, loop=abab_driver(cell, plan, ctl_w, ack_r, out))
        out["error"] = "measure_cell returned without running the ABAB driver"
    except Finished:
        pass
    except Exception as exc:  # noqa: BLE001 - reported with what was measured before it
        import traceback

        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-3000:]
    return out

"""The diagnosis of one loader in words, with its numbers, and the warnings that apply."""

from __future__ import annotations

#: Below this data-wait fraction (its interval's upper end) the loop is not data-bound.
NOT_BOUND = 0.05
#: Workers (and the main process) using this share of the allowed cores keep them busy.
CPU_BUSY = 0.85
#: /dev/shm this full is close to full.
SHM_FULL = 0.8
#: Worker USS growing by this share (and at least GROWTH_MIN bytes) over the run: copy-on-write.
GROWTH_SHARE, GROWTH_MIN = 0.2, 64 * 2**20
#: A first batch this slow under spawn or forkserver: each worker re-imports the script's modules.
SLOW_FIRST_S = 2.0


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _cores(x: float) -> str:
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def diagnose(settings: dict, steps: dict, workers: dict, head: dict | None) -> tuple[str, str, list[str]]:
    """``(verdict, sentence, warnings)``; verdict is one of "not data-bound", "borderline" (the data-wait interval
    holds NOT_BOUND), "data-bound", "data-bound and CPU-bound", "unknown"."""
    frac = steps.get("data_wait_fraction")
    warnings = _warnings(settings, steps, workers)
    if not frac or frac.get("estimate") is None:
        return "unknown", "too few steps were measured to say how much of each step waits for data", warnings
    f, lo, hi = frac["estimate"], frac.get("low"), frac.get("high")
    interval = f" [{_pct(lo)}-{_pct(hi)}]" if lo is not None and hi is not None else ""
    waits = f"{_pct(f)}{interval} of each step waits for data"
    gain = ""
    if head and head.get("speedup"):
        gain = f"; with loading free, steps would run {head['speedup']:.2g}x faster"
        if head.get("low") is not None:
            gain += f" [{head['low']:.2g}-{head['high']:.2g}x]"
    if (hi if hi is not None else f) < NOT_BOUND:
        return "not data-bound", f"not data-bound: {waits}{gain}; leave the loader", warnings
    if lo is not None and lo < NOT_BOUND:
        return (
            "borderline",
            f"borderline: {waits}{gain}; the interval holds the {_pct(NOT_BOUND)} bound, and no loader setting can "
            f"win more than {_pct(hi if hi is not None else f)} of the step; measure more steps (--steps) to tell",
            warnings,
        )
    cores = float(workers.get("cores_allowed") or 0)
    used = float(workers.get("workers_cpu_cores") or 0.0) + float(workers.get("main_cpu_cores") or 0.0)
    n = settings.get("num_workers") or 0
    if cores and used >= CPU_BUSY * cores:
        return (
            "data-bound and CPU-bound",
            f"data-bound and CPU-bound: {waits}{gain}; the loader and the loop keep {_cores(used)} of "
            f"{_cores(cores)} cores busy; more workers cannot help; make each sample cheaper or move decoding "
            "to the GPU",
            warnings,
        )
    if n == 0:
        advice = f"loading runs in the main process (num_workers=0), using {_cores(used)} of {_cores(cores)} cores: "
        advice += "workers would load the next batches during the step"
    else:
        wcpu = float(workers.get("workers_cpu_cores") or 0.0)
        advice = f"{n} workers use {_cores(wcpu)} of {_cores(cores)} cores: more workers or prefetch will help"
    return "data-bound", f"data-bound: {waits}{gain}; {advice}", warnings


#: an IterableDataset whose __iter__ never asks which worker runs it
UNSPLIT = (
    "the IterableDataset's __iter__ never calls torch.utils.data.get_worker_info(), so every worker yields the "
    "whole stream"
)


def _warnings(settings: dict, steps: dict, workers: dict) -> list[str]:
    out = []
    total, peak = workers.get("shm_total"), workers.get("shm_peak")
    if total and peak is not None and peak >= SHM_FULL * total:
        out.append(
            f"/dev/shm is close to full: {peak / 2**20:.0f} of {total / 2**20:.0f} MiB at its peak; workers hand "
            "batches over in it, and a full /dev/shm kills them (Bus error)"
        )
    for pid, w in (workers.get("workers") or {}).items():
        growth, start = w.get("uss_growth") or 0, w.get("uss_start") or 0
        if growth >= GROWTH_MIN and growth >= GROWTH_SHARE * max(start, 1):
            out.append(
                f"worker {pid}'s private memory (USS) grew by {growth / 2**20:.0f} MiB over the run "
                f"(from {start / 2**20:.0f} MiB): copy-on-write of the dataset's Python objects; keep them in "
                "numpy arrays or tensors"
            )
            break
    method, first = settings.get("start_method"), steps.get("first_batch_s")
    if method in ("spawn", "forkserver") and first is not None and first >= SLOW_FIRST_S:
        keep = "" if settings.get("persistent_workers") else "; persistent_workers=True pays it once"
        out.append(
            f"the first batch took {first:.1f} s: with start method {method}, every worker imports the script's "
            f"modules again{keep}"
        )
    cores, n = workers.get("cores_allowed"), settings.get("num_workers") or 0
    if n and settings.get("splits_among_workers") is False:
        out.append(f"{UNSPLIT}: the loop sees each sample {n} times")
    if cores and n > cores:
        out.append(
            f"{n} workers on {_cores(float(cores))} cores the process may use: the workers and the training "
            "loop take turns on them"
        )
    return out


def validated_text(result: dict | None, settings: dict) -> str | None:
    """What the in-loop A B A B rounds found, in words with the line to paste (None: nothing was tried)."""
    from loaderbench.doctor.settings import loader_line

    if not result:
        return None
    if result.get("ratio") is None:
        return result.get("note")
    changes = result["changes"]
    line = loader_line(settings, changes)
    ratio = f"{result['ratio']:.2f}x [{result['low']:.2f}-{result['high']:.2f}x]"
    rounds = f"{result['rounds']} A B round pairs in the script's own loop"
    if result["low"] > 1:
        split = settings.get("splits_among_workers") is False and changes.get("num_workers", 0) > 1
        return f"in {rounds}, {line} ran {ratio} the steps per second of the current loader: paste it" + (
            f" once it splits its stream ({UNSPLIT}, so these batches held repeats)" if split else ""
        )
    if result["high"] < 1:
        return f"in {rounds}, {line} was slower ({ratio} the steps per second): keep the current loader"
    return f"in {rounds}, {line} did not beat the current loader ({ratio} the steps per second): keep it"


def tune_text(result: dict, settings: dict) -> str:
    """What `--tune`'s search did and found, in words (the loop's own check follows it)."""
    from loaderbench.doctor.settings import loader_line

    if result.get("stop") in ("not searched", "nothing to search"):
        return f"tune: nothing searched: {result.get('note')}"
    trials = len(result.get("trials") or [])
    head = f"tune: {trials} trials in {result.get('spent_s', 0):.1f} s ({result.get('stop')})"
    best = result.get("best")
    if not best:
        return f"{head}: {result.get('note') or 'no usable trial'}"
    changes = result.get("changes") or {}
    found = loader_line(settings, changes) if changes else "the current setting"
    then = "; now checked in the script's own loop" if changes else ""
    return f"{head}: the fastest in a replica of the loop was {found} ({best['steps_per_s']:.3g} steps/s){then}"


def paste_line(result: dict | None) -> str | None:
    """The `DataLoader(..., changes)` line to paste: only for a change the loop's own rounds showed faster."""
    from loaderbench.doctor.settings import changes_line

    if not result or result.get("low") is None or result["low"] <= 1:
        return None
    return changes_line(result["changes"])

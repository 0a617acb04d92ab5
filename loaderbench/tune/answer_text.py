"""The answer in words a person can paste: per scenario, a `DataLoader(...)` line with the throughput, its
interval and coverage, and the other settings within the margin; then the rules of thumb and the cost.

Reads only tune.json's dict (loaderbench.tune.tune_json), so an answer can be shown again without measuring.
"""

from __future__ import annotations

from typing import Any

from loaderbench.stats.intervals import pct

#: settings passed to torch.utils.data.DataLoader, in the order they are written
_LOADER_KWARGS = ("num_workers", "prefetch_factor", "persistent_workers", "pin_memory", "start_method", "in_order")
# `loader` and `worker_method` are written as the loader itself (`dataloader_call`, `nodes_call`)
#: settings that are not DataLoader arguments: how a training script sets them
_ELSEWHERE = {
    "sharing_strategy": "torch.multiprocessing.set_sharing_strategy({v!r})",
    "batched": "batched={v}: a dataset with __getitems__",
    "forkserver_preload": "forkserver_preload={v}: torch.multiprocessing.set_forkserver_preload([...])",
    "non_blocking": "non_blocking={v} in .to(device)",
    "prefetcher": "prefetcher={v}: copy the next batch on a side CUDA stream",
}
_DEFAULTS = {
    "persistent_workers": False,
    "pin_memory": False,
    "in_order": True,
    "start_method": "fork",
    "sharing_strategy": "file_descriptor",
    "batched": False,
    "forkserver_preload": False,
    "non_blocking": True,
    "prefetcher": False,
}


def number(x: float | None) -> str:
    """1,234 for large values, three significant digits for small ones."""
    if x is None:
        return "?"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _bool(v: Any) -> str:
    return str(v) if isinstance(v, bool) else repr(v)


def nodes_call(settings: dict[str, Any], context: dict[str, Any]) -> str:
    """The torchdata.nodes pipeline the `nodes` loader builds (loaderbench.measure.nodes_loader), in one line."""
    workers = settings.get("num_workers", 0)
    mapper = f"ParallelMapper(fetch_batch, num_workers={workers}"
    if workers:
        mapper += f", method={settings.get('worker_method', 'process')!r}"
        if settings.get("start_method", "fork") != "fork" and settings.get("worker_method") != "thread":
            mapper += f", multiprocessing_context={settings['start_method']!r}"
        if settings.get("in_order") is False:
            mapper += ", in_order=False"
    parts = [f"Batcher(SamplerWrapper(sampler), batch_size={context.get('batch_size', 32)})", mapper + ")"]
    if settings.get("pin_memory"):
        parts.append("PinMemory")
    if workers:
        parts.append(f"Prefetcher(prefetch_factor={settings.get('prefetch_factor', 2)})")
    return "torchdata.nodes: " + " -> ".join(parts) + " -> Loader"


def dataloader_call(settings: dict[str, Any], context: dict[str, Any], tuned: list[str]) -> str:
    """e.g. `DataLoader(ds, batch_size=32, num_workers=4, prefetch_factor=2)`: the tuned settings and any
    setting away from DataLoader's default; worker-only arguments only with workers. A `nodes` loader's
    answer is its torchdata.nodes pipeline instead (`nodes_call`); a scenario with snapshot_every_n_steps >= 1
    reads `StatefulDataLoader(...)`, torchdata's checkpointable loader."""
    if settings.get("loader") == "nodes":
        return nodes_call(settings, context)
    args = [f"batch_size={context.get('batch_size', 32)}"]
    workers = settings.get("num_workers", 0)
    if workers and settings.get("worker_method") == "thread":
        args.append("worker_method='thread'")
    for axis in _LOADER_KWARGS:
        if axis not in settings or (axis != "num_workers" and not workers):
            continue
        v = settings[axis]
        if axis not in ("num_workers", "prefetch_factor") and axis not in tuned and v == _DEFAULTS.get(axis):
            continue
        name = "multiprocessing_context" if axis == "start_method" else axis
        args.append(f"{name}={_bool(v)}")
    snapshots = context.get("snapshot_every_n_steps")
    if snapshots:  # the scenario's checkpointable loader: torchdata's drop-in, tuned as it is used
        return f"StatefulDataLoader(ds, {', '.join(args)}, snapshot_every_n_steps={snapshots})"
    return f"DataLoader(ds, {', '.join(args)})"


def _elsewhere(settings: dict[str, Any], tuned: list[str]) -> list[str]:
    return [
        tmpl.format(v=settings[a])
        for a, tmpl in _ELSEWHERE.items()
        if a in settings and (a in tuned or settings[a] != _DEFAULTS.get(a))
    ]


def _delta(row: dict[str, Any], label_axes: list[str]) -> str:
    s = row["settings"]
    what = " ".join(f"{a}={s[a]}" for a in label_axes if a in s)
    ratio = row.get("ratio")
    change = f"{100 * (ratio - 1):+.0f}%" if ratio is not None else "?"
    norm = row.get("ratio_normalized")
    change += f", {100 * (norm - 1):+.0f}% normalized" if norm is not None else ""
    reps = "" if row["repetitions"] >= 3 else f", {row['repetitions']} rep"
    return f"{what} ({change}{reps})"


def answer_line(sc: dict[str, Any]) -> str:
    """The pasteable line of one scenario (tune.json's scenarios[i])."""
    a = sc["answer"]
    if a is None:
        return "# no answer: every setting measured failed or went over the memory cap"
    tuned = sc["tuned_axes"] or ["num_workers"]
    iv = a["interval"]
    unit = "samples/s" if a["metric"] == "samples_per_s" else "samples/s end to end"
    if iv["low"] is not None:
        interval = f" [{number(iv['low'])}-{number(iv['high'])}], {pct(iv['coverage'])} interval"
    else:
        interval = f" (no interval: {iv['method']})"
    others = [r for r in sc.get("within_margin", []) if not r["answer"]]
    within = (
        (
            "; within the margin: "
            + ", ".join(_delta(r, tuned) for r in others[:4])
            + (f" and {len(others) - 4} more" if len(others) > 4 else "")
        )
        if others
        else ""
    )
    norm = a.get("median_normalized")
    speed = f" ({number(norm)} samples per reference unit at the machine's own speed)" if norm is not None else ""
    line = (
        f"{dataloader_call(a['settings'], sc['context'], tuned)}  # {number(a['median'])} {unit}{interval}{speed}"
        f"{within}"
    )
    extra = _elsewhere(a["settings"], tuned)
    return line + ("\n#   with " + "; ".join(extra) if extra else "")


def threads_line(sc: dict[str, Any]) -> str | None:
    """Why thread workers, where the answer has them: the best process setting within the margin and the memory
    threads save against it (the search prefers, within the margin, fewer workers and then less memory), or that
    they beat every process setting by more than the margin."""
    a = sc["answer"]
    if a is None or a["settings"].get("worker_method") != "thread":
        return None
    rows = [r for r in sc.get("within_margin", []) if r["settings"].get("worker_method") == "process"]
    if not rows:
        return "# thread workers: faster than every process setting measured, by more than the margin"
    p = max(rows, key=lambda r: r["median"] or 0)
    what = " ".join(f"{k}={v}" for k, v in p["settings"].items() if k in ("num_workers", "worker_method"))
    line = f"# thread workers: the same throughput as process workers within the margin ({what}: {number(p['median'])})"
    mine, theirs = a.get("memory_uss_bytes"), p.get("memory_uss_bytes")
    if mine is not None and theirs is not None and mine < theirs:
        line += f", with {number((theirs - mine) / 2**20)} MiB less memory (USS of the cell)"
    return line


def rules_line(sc: dict[str, Any]) -> str | None:
    parts = []
    for r in sc.get("rules_of_thumb", []):
        ratio = r.get("ratio_to_answer")
        if ratio is None and r.get("ratio_at_most") is not None:
            what = f"at most {100 * (r['ratio_at_most'] - 1):+.0f}%, {r.get('bound', 'its linear ceiling')}" + (
                "" if r["in_matrix"] else ", not in the matrix"
            )
        elif ratio is None:
            what = "not in the matrix" if not r["in_matrix"] else "not measured"
        elif r["measured"]:
            what = f"{100 * (ratio - 1):+.0f}%" + (f", {r['repetitions']} rep" if r["repetitions"] < 3 else "")
        else:
            what = f"{100 * (ratio - 1):+.0f}%, interpolated" + ("" if r["in_matrix"] else ", not in the matrix")
        parts.append(f"{r['label']}: {r['num_workers']} ({what})")
    return "# rules of thumb: " + "; ".join(parts) if parts else None


def _cost(c: dict[str, Any]) -> str:
    est = c.get("grid_cell_seconds_estimate")
    grid = f" of about {est:,.0f} for the grid" if est else ""
    return f"{c['measurements']} of {c['grid_measurements']} cell repetitions, {c['cell_seconds']:,.0f} cell-s{grid}"


def render(result: dict[str, Any], path: str | None = None) -> str:
    """Every scenario's answer, then the whole run's cost (and where tune.json is, when `path` is given)."""
    lines = []
    margin = f"{100 * result['options']['margin']:g}%"
    for sc in result["scenarios"]:
        busy = sc.get("busy_core")
        stop = sc["stop"] + (
            f" (0 workers kept the one core {busy:.0%} busy: nothing with workers can beat them by {margin})"
            if busy is not None
            else ""
        )
        lines.append(f"# {sc['label']}: {stop}; {_cost(sc['cost'])}")
        lines.append(answer_line(sc).replace("within the margin", f"within {margin}"))
        for extra in (threads_line(sc), rules_line(sc) if sc["answer"] is not None else None):
            if extra:
                lines.append(extra)
        lines.append("")
    c = result["cost"]
    frac = c.get("fraction_of_grid_cell_seconds")
    tail = f" ({100 * frac:.0f}% of the grid's estimate)" if frac is not None else ""
    lines.append(
        f"spent {_cost(c)}{tail}; {c['measured_now']} measured now, {c['reused']} read from records "
        f"under {result['records']}"
    )
    if path:
        lines.append(f"details: {path}")
    return "\n".join(lines)

"""A DataLoader's settings, read from the object itself (nothing is asked of the user)."""

from __future__ import annotations

from typing import Any


def _name(obj: Any) -> str | None:
    if obj is None:
        return None
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _start_method(loader: Any) -> str | None:
    ctx = getattr(loader, "multiprocessing_context", None)
    if ctx is not None:
        get = getattr(ctx, "get_start_method", None)
        return get() if callable(get) else str(ctx)
    if not getattr(loader, "num_workers", 0):
        return None
    import multiprocessing

    return multiprocessing.get_start_method(allow_none=False)


def splits_among_workers(dataset: Any) -> bool | None:
    """Whether an IterableDataset's ``__iter__`` asks which worker runs it (``get_worker_info``), as one that
    splits its stream among the workers must; None where its source cannot be read (a compiled or wrapped
    dataset: it may split in a way not seen here)."""
    import inspect

    try:
        source = inspect.getsource(type(dataset).__iter__)
    except (OSError, TypeError):
        return None
    return "get_worker_info" in source


def read_settings(loader: Any) -> dict:
    """What the loader was built with: dataset type, sampler, batch size, workers, start method, prefetch,
    pinning, persistence, and the sharing strategy of this process."""
    import torch

    dataset = getattr(loader, "dataset", None)
    is_iterable = isinstance(dataset, torch.utils.data.IterableDataset)
    batch_sampler = getattr(loader, "batch_sampler", None)
    sampler = getattr(loader, "sampler", None)
    try:
        length = len(dataset) if dataset is not None and not is_iterable else None  # type: ignore[arg-type]
    except TypeError:
        length = None
    num_workers = int(getattr(loader, "num_workers", 0) or 0)
    prefetch = getattr(loader, "prefetch_factor", None)
    return {
        "loader_type": _name(loader),
        "dataset_type": _name(dataset),
        "iterable_dataset": is_iterable,
        "splits_among_workers": splits_among_workers(dataset) if is_iterable else None,
        "dataset_len": length,
        "sampler": _name(sampler),
        "batch_sampler": _name(batch_sampler),
        "batch_size": getattr(loader, "batch_size", None),
        "drop_last": getattr(loader, "drop_last", None),
        "num_workers": num_workers,
        "worker_method": getattr(loader, "worker_method", None) if num_workers else None,
        "start_method": _start_method(loader),
        "prefetch_factor": prefetch if num_workers else None,
        "pin_memory": bool(getattr(loader, "pin_memory", False)),
        "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
        "in_order": getattr(loader, "in_order", None),
        "sharing_strategy": torch.multiprocessing.get_sharing_strategy(),
        "collate_fn": getattr(getattr(loader, "collate_fn", None), "__qualname__", None),
    }


#: The DataLoader arguments a pasteable line names, in the order DataLoader takes them.
LINE_KEYS = ("batch_size", "num_workers", "worker_method", "pin_memory", "prefetch_factor", "persistent_workers")


def loader_line(settings: dict, changes: dict | None = None) -> str:
    """``DataLoader(dataset, batch_size=.., num_workers=.., ...)`` with ``changes`` applied, to paste."""
    s = {**settings, **(changes or {})}
    parts = ["dataset"]
    for key in LINE_KEYS:
        value = s.get(key)
        if value is None or (key == "prefetch_factor" and not s.get("num_workers")):
            continue
        if key in ("persistent_workers", "worker_method") and not s.get("num_workers"):
            continue
        parts.append(f"{key}={value!r}")
    if changes and changes.get("start_method"):
        parts.append(f"multiprocessing_context={changes['start_method']!r}")
    return f"DataLoader({', '.join(parts)})"


def changes_line(changes: dict) -> str:
    """``DataLoader(..., num_workers=6, persistent_workers=True)``: the arguments to change in the script's own
    DataLoader call, in the order DataLoader takes them."""
    order = [*LINE_KEYS, "start_method"]
    parts = ["..."]
    for key in sorted(changes, key=lambda k: order.index(k) if k in order else len(order)):
        name = "multiprocessing_context" if key == "start_method" else key
        parts.append(f"{name}={changes[key]!r}")
    return f"DataLoader({', '.join(parts)})"

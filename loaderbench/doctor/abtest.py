"""A setting validated in the script's own loop: the loop's iterator swapped between the script's loader (A) and
one built from the same dataset with the changes (B) in alternating rounds, A B A B, so that the real step,
device and optimizer are in every measurement. The end-to-end step-rate ratio B/A comes with a bootstrap
interval over the round pairs. The loop sees every batch it asks for; in B's rounds they come from B."""

from __future__ import annotations

from typing import Any

from loaderbench.doctor.hooks import unwatched_iter
from loaderbench.errors import LoaderbenchError

#: What `--try` may change, and the type of each value.
CHANGEABLE = {
    "num_workers": int,
    "prefetch_factor": int,
    "persistent_workers": bool,
    "pin_memory": bool,
    "start_method": str,
}
START_METHODS = ("fork", "spawn", "forkserver")


def _value(key: str, text: str) -> Any:
    kind = CHANGEABLE[key]
    if kind is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise LoaderbenchError(f"--try {key}={text}: expected true or false")
    if kind is int:
        try:
            n = int(text)
        except ValueError:
            raise LoaderbenchError(f"--try {key}={text}: expected a whole number") from None
        if n < (0 if key == "num_workers" else 1):
            raise LoaderbenchError(f"--try {key}={text}: too small")
        return n
    if key == "start_method" and text not in START_METHODS:
        raise LoaderbenchError(f"--try start_method={text}: allowed values are {', '.join(START_METHODS)}")
    return text


def parse_changes(items: list[str]) -> dict:
    """``["num_workers=4", "persistent_workers=true"]`` (or comma-separated) -> a dict of checked changes."""
    out: dict = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            key, sep, text = part.partition("=")
            if not sep or key not in CHANGEABLE:
                raise LoaderbenchError(f"--try {part!r}: expected KEY=VALUE with KEY one of {', '.join(CHANGEABLE)}")
            out[key] = _value(key, text)
    if not out:
        raise LoaderbenchError("--try: no setting to change")
    return out


def candidate(settings: dict, verdict: str, cores: float) -> dict | None:
    """The change to try when none was given: more workers (kept alive across epochs) where the loop waits for
    data (or may: borderline) and the cores are not busy; None where no loader setting can help."""
    if verdict not in ("data-bound", "borderline"):
        return None
    n = int(settings.get("num_workers") or 0)
    target = max(n + 1, 2 * n, int(cores))
    changes: dict = {"num_workers": target}
    if not settings.get("iterable_dataset"):
        changes["persistent_workers"] = True
    return changes


def variant_loader(loader: Any, changes: dict) -> Any:
    """A DataLoader over the same dataset, sampler kind, batching and collate as ``loader``, with ``changes``."""
    import torch
    from torch.utils.data import DataLoader, RandomSampler, SequentialSampler

    workers = int(changes.get("num_workers", loader.num_workers))
    kwargs: dict = {
        "num_workers": workers,
        "collate_fn": loader.collate_fn,
        "pin_memory": changes.get("pin_memory", loader.pin_memory),
        "timeout": loader.timeout,
        "worker_init_fn": loader.worker_init_fn,
    }
    if workers:
        kwargs["prefetch_factor"] = changes.get("prefetch_factor", loader.prefetch_factor or 2)
        kwargs["persistent_workers"] = changes.get("persistent_workers", loader.persistent_workers)
        worker_method = changes.get("worker_method", getattr(loader, "worker_method", None))
        if worker_method is not None:
            kwargs["worker_method"] = worker_method
        method = changes.get("start_method")
        if worker_method == "thread":
            pass  # threads start no process: no start method applies
        elif method:
            kwargs["multiprocessing_context"] = method
        elif loader.num_workers:
            kwargs["multiprocessing_context"] = loader.multiprocessing_context
    if isinstance(loader.dataset, torch.utils.data.IterableDataset):
        return DataLoader(loader.dataset, batch_size=loader.batch_size, drop_last=loader.drop_last, **kwargs)
    if loader.batch_size is None or type(loader.batch_sampler) is not torch.utils.data.BatchSampler:
        return DataLoader(loader.dataset, batch_sampler=loader.batch_sampler, **kwargs)
    sampler = loader.sampler
    shuffle = isinstance(sampler, RandomSampler)
    keep_sampler = not isinstance(sampler, RandomSampler | SequentialSampler)
    return DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        drop_last=loader.drop_last,
        shuffle=False if keep_sampler else shuffle,
        sampler=sampler if keep_sampler else None,
        **kwargs,
    )


class InLoopAB:
    """Rounds of ``steps`` steps each, A first, ``rounds`` of each arm. The first ``skip`` steps of every round
    are not counted: they are served from the batches the arm's workers prefetched while it was paused."""

    def __init__(self, loader: Any, changes: dict, rounds: int, steps: int):
        self.changes = changes
        self.loader_b = variant_loader(loader, changes)
        self.rounds, self.steps = rounds, steps
        depth = max(
            (loader.prefetch_factor or 2) * loader.num_workers if loader.num_workers else 0,
            (self.loader_b.prefetch_factor or 2) * self.loader_b.num_workers if self.loader_b.num_workers else 0,
        )
        self.skip = min(depth, steps - 1)
        self.entries: list[tuple[int, str, int]] = []  # (log index, arm, round)
        self._b: Any = None
        self._n = 0

    @property
    def arm(self) -> str:
        return "A" if (self._n // self.steps) % 2 == 0 else "B"

    @property
    def round(self) -> int:
        return self._n // self.steps

    def done(self) -> bool:
        return self._n >= 2 * self.rounds * self.steps

    def next_batch(self, inner: Any) -> Any:
        if self.arm == "A":
            return next(inner)  # StopIteration ends the script's epoch, as it would have
        if self._b is None:
            self._b = unwatched_iter(self.loader_b)
        try:
            return next(self._b)
        except StopIteration:
            self._b = unwatched_iter(self.loader_b)
            return next(self._b)

    def record(self, log_index: int) -> None:
        self.entries.append((log_index, self.arm, self.round))
        self._n += 1

    def start(self) -> None:
        """B's workers start now, while A runs its first round."""
        self._b = unwatched_iter(self.loader_b)

    def close(self) -> None:
        self._b = None  # B's workers end with its iterator

    def result(self, wait_s: list[float], step_s: list[float]) -> dict:
        from loaderbench.stats.bootstrap import rate_ratio_ci

        per: dict[tuple[str, int], list[float]] = {}
        seen: dict[int, int] = {}
        for i, arm, r in self.entries:
            k = seen[r] = seen.get(r, 0) + 1
            s = step_s[i]
            if k <= self.skip or s != s:
                continue
            per.setdefault((arm, r), []).append(wait_s[i] + s)
        pairs = [(per.get(("A", 2 * j)), per.get(("B", 2 * j + 1))) for j in range(self.rounds)]
        pairs = [(a, b) for a, b in pairs if a and b]
        out: dict = {"changes": self.changes, "rounds": len(pairs), "steps_per_round": self.steps, "skipped": self.skip}
        if not pairs:
            out["note"] = "no complete pair of rounds"
            return out
        ci = rate_ratio_ci(
            [len(b) for _, b in pairs],
            [sum(b) for _, b in pairs],
            [len(a) for a, _ in pairs],
            [sum(a) for a, _ in pairs],
        )
        out.update(
            {
                "a_steps_per_s": sum(len(a) for a, _ in pairs) / sum(sum(a) for a, _ in pairs),
                "b_steps_per_s": sum(len(b) for _, b in pairs) / sum(sum(b) for _, b in pairs),
                "ratio": ci.estimate,
                "low": ci.low,
                "high": ci.high,
                "method": ci.method,
            }
        )
        return out

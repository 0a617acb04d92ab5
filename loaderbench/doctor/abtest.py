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
    """Rounds of ``steps`` steps each, A first, ``rounds`` of each arm: round ``r`` is the log's batches from
    ``first + r * steps`` on. The first ``skip`` steps of every round are not counted: they are served from the
    batches the arm's workers prefetched while it was paused."""

    def __init__(self, loader: Any, changes: dict, rounds: int, steps: int):
        self.changes = changes
        self.loader_b = variant_loader(loader, changes)
        self.rounds, self.steps = rounds, steps
        depth = max(
            (loader.prefetch_factor or 2) * loader.num_workers if loader.num_workers else 0,
            (self.loader_b.prefetch_factor or 2) * self.loader_b.num_workers if self.loader_b.num_workers else 0,
        )
        self.skip = min(depth, steps - 1)
        self.first = 0  # the log's first batch of round 0
        self._b: Any = None

    @staticmethod
    def arm_of(round_: int) -> str:
        return "A" if round_ % 2 == 0 else "B"

    @property
    def total(self) -> int:
        """Steps in all rounds."""
        return 2 * self.rounds * self.steps

    def next_b(self) -> Any:
        """The next batch of arm B (its loader's next epoch where one ends: the loop's epoch is A's)."""
        if self._b is None:
            self._b = unwatched_iter(self.loader_b)
        try:
            return next(self._b)
        except StopIteration:
            self._b = unwatched_iter(self.loader_b)
            return next(self._b)

    def start(self, first: int) -> None:
        """Round 0 starts at the log's batch ``first``; B's workers start now, while A runs its first round."""
        self.first = first
        self._b = unwatched_iter(self.loader_b)

    def close(self) -> None:
        self._b = None  # B's workers end with its iterator

    def result(self, wait_s: list[float], step_s: list[float]) -> dict:
        """The rounds' ratio from the log's waits and steps (its batches from ``first`` on are the rounds')."""
        from loaderbench.stats.bootstrap import rate_ratio_ci

        per: dict[tuple[str, int], list[float]] = {}
        for i in range(self.first, min(len(step_s), self.first + self.total)):
            r, k = divmod(i - self.first, self.steps)
            s = step_s[i]
            if k < self.skip or s != s:
                continue
            per.setdefault((self.arm_of(r), r), []).append(wait_s[i] + s)
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

"""Exactly-once, checked. An observer (loaderbench.measure.observers' interface) that counts, for every pass over the
shards in every epoch, the samples seen, the distinct keys among them, the duplicates and the missing ones; and the
same accounting for an epoch resumed from a saved loader state (`resumed_sequence`).

A pass is complete once every worker that has shards has delivered a sample of a later pass (a worker's
batches arrive in the order it made them); only complete passes can miss samples, but any pass can repeat one.
Samples are identified by their key (WebDataset's `__key__`), never by content.
"""

from __future__ import annotations

from collections import Counter


class ShardPasses:
    def __init__(self, expected: set[int], readers: set[int], sharding: str):
        self.expected, self.readers, self.sharding = expected, readers, sharding
        self.current: list[tuple[list, list, list]] = []
        self.epochs: list[list[dict]] = []

    def see(self, batch, index: int) -> None:
        self.current.append((list(batch["__key__"]), batch["__pass__"].tolist(), batch["__worker__"].tolist()))

    def next_epoch(self) -> None:
        if self.current:
            self.epochs.append(self.evaluate(self.current))
        self.current = []

    def evaluate(self, batches) -> list[dict]:
        by_pass: dict[int, Counter] = {}
        last: dict[int, int] = {}
        for keys, passes, workers in batches:
            for key, p, w in zip(keys, passes, workers):
                by_pass.setdefault(p, Counter())[int(key)] += 1
                last[w] = max(last.get(w, -1), p)
        done_below = min((last.get(w, -1) for w in self.readers), default=-1)
        out = []
        for p in sorted(by_pass):
            counts = by_pass[p]
            seen = sum(counts.values())
            complete = p < done_below
            out.append(
                {
                    "pass": p,
                    "complete": complete,
                    "seen": seen,
                    "distinct": len(counts),
                    "duplicates": seen - len(counts),
                    "missing": len(self.expected - counts.keys()) if complete else None,
                    "unexpected": len(counts.keys() - self.expected),
                }
            )
        return out

    def metrics(self) -> dict:
        self.next_epoch()
        passes = [p for epoch in self.epochs for p in epoch]
        complete = [p for p in passes if p["complete"]]
        return {
            "shard_passes": {
                "sharding": self.sharding,
                "expected_per_pass": len(self.expected),
                "readers": len(self.readers),
                "passes_complete": len(complete),
                "seen": sum(p["seen"] for p in passes),
                "duplicates": sum(p["duplicates"] for p in passes),
                "missing": sum(p["missing"] for p in complete) if complete else None,
                "unexpected": sum(p["unexpected"] for p in passes),
                "epochs": self.epochs,
            }
        }

    def warnings(self) -> list[str]:
        m = self.metrics()["shard_passes"]
        out = []
        if not m["passes_complete"]:
            out.append(
                "shard passes: no pass over the shards was complete within an epoch, so missing samples "
                "could not be checked: lower shards x shard_samples or raise measure_batches"
            )
        if m["duplicates"]:
            why = ' (sharding = "none": every worker reads every shard)' if self.sharding == "none" else ""
            out.append(
                f"shard passes: {m['duplicates']} duplicate samples (read more than once within a pass){why}; "
                f"the throughput counts every copy"
            )
        if m["missing"]:
            out.append(f"shard passes: {m['missing']} samples were missing from complete passes")
        return out


def shard_observer(parts, num_workers: int) -> ShardPasses:
    """The observer for a ShardStream of this rank (loaderbench.workloads.shards) read by `num_workers` workers."""
    dataset = parts.dataset
    workers = max(1, num_workers)
    readers = {w for w in range(workers) if dataset.shards_of(w, workers)}
    expected = dataset.shardset.keys({i for w in readers for i in dataset.shards_of(w, workers)})
    return ShardPasses(expected, readers, dataset.sharding)


def resumed_sequence(reference: list[int], before: list[int], after: list[int]) -> dict:
    """A resumed epoch checked against the uninterrupted one (loaderbench.measure.resume): the sample indices
    delivered before the checkpoint and after the resume, together, must be the reference's, each as often as
    there (a sampler with replacement repeats some by design), and in its order. Lost: in the reference but not
    delivered; duplicated: delivered more often than there."""
    reference_counts, delivered_counts = Counter(reference), Counter(before + after)
    lost = sum((reference_counts - delivered_counts).values())
    duplicated = sum((delivered_counts - reference_counts).values())
    delivered = before + after
    diverges = next((i for i, (a, b) in enumerate(zip(delivered, reference)) if a != b), None)
    if diverges is None and len(delivered) != len(reference):
        diverges = min(len(delivered), len(reference))
    return {
        "expected_samples": len(reference),
        "delivered_before": len(before),
        "delivered_after": len(after),
        "lost": lost,
        "duplicated": duplicated,
        "exactly_once": lost == 0 and duplicated == 0,
        "same_order": diverges is None,
        "first_divergence": diverges,
    }

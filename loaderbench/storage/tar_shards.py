"""The dataset as tar shards in WebDataset's layout, and reading them as a stream.

Layout: `shard-000000.tar` ... each holding, per sample, `<key>.jpg` (the JPEG's bytes) and `<key>.cls` (its
class index as text), a sample's files next to each other; keys are the sample's number, zero-padded, so
any WebDataset reader can read them too. `index.json` lists every shard's byte size and sample count: a shard
that ends early is caught against it, whatever byte it was cut at.

A shard set holds `shards x shard_samples` samples; sample j is image j mod N of the prepared dataset. Sets
live in the cache (`<cache>/shards/<dataset digest>-<shards>x<shard_samples>`), written once into a
temporary folder and renamed into place; the "truncated" variant (for the truncated-shard fault) is the same
set with one shard cut to TRUNCATE_FRACTION of its bytes and the index of the intact set.

Which loader process reads which shard (`assigned`): with `sharding = "split"`, shard i goes to rank i mod R
and, within that rank, to worker (i div R) mod W (WebDataset's split by node, then by worker); with
`sharding = "none"` every worker of every rank reads every shard (the mistake that yields duplicates).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

INDEX = "index.json"
FORMAT = "loaderbench-shards/1"
TRUNCATED_SHARD = 1  # which shard the truncated variant cuts (0 when there is only one)
TRUNCATE_FRACTION = 0.6


class ShardTruncated(RuntimeError):
    """A shard ended before the bytes or samples its index promises."""


def shard_name(i: int) -> str:
    return f"shard-{i:06d}.tar"


def key_of(j: int) -> str:
    return f"{j:08d}"


@dataclass(frozen=True)
class ShardSet:
    root: Path
    names: tuple[str, ...]
    sizes: tuple[int, ...]  # bytes each shard must have
    samples: tuple[int, ...]  # samples each shard must hold
    first_key: tuple[int, ...]  # number of each shard's first sample
    truncated: bool = False

    def keys(self, shard_ids) -> set[int]:
        return {self.first_key[i] + k for i in shard_ids for k in range(self.samples[i])}

    @property
    def count(self) -> int:
        return len(self.names)


def assigned(shards: int, rank: int, ranks: int, worker: int, workers: int, sharding: str) -> list[int]:
    """The shards loader process (rank, worker) reads, in order; `workers` is 1 with num_workers = 0."""
    if sharding == "none":
        return list(range(shards))
    return [i for i in range(shards) if i % ranks == rank and (i // ranks) % workers == worker]


def shards_root(cache: Path, digest: str, shards: int, per_shard: int, truncated: bool) -> Path:
    return cache / "shards" / f"{digest[:16]}-{shards}x{per_shard}{'-truncated' if truncated else ''}"


def ensure_shards(
    prepared, shards: int, per_shard: int, truncated: bool = False, cache: Path | None = None
) -> ShardSet:
    """The shard set of `prepared`, written into the cache if it is not there yet."""
    if cache is None:
        from loaderbench.datasets import default_cache_dir

        cache = default_cache_dir().parent
    root = shards_root(cache, prepared.digest, shards, per_shard, truncated)
    if not (root / INDEX).exists():
        source = ensure_shards(prepared, shards, per_shard, False, cache) if truncated else None
        tmp = root.parent / f".tmp-{root.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir(parents=True)
        try:
            if source is None:
                _write(prepared, tmp, shards, per_shard)
            else:
                _write_truncated(source, tmp)
            try:
                os.rename(tmp, root)
            except OSError:  # another process put the same set in place first
                if not (root / INDEX).exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return load(root)


def load(root: Path) -> ShardSet:
    index = json.loads((root / INDEX).read_text())
    rows = index["shards"]
    return ShardSet(
        root,
        tuple(r["name"] for r in rows),
        tuple(r["bytes"] for r in rows),
        tuple(r["samples"] for r in rows),
        tuple(r["first_key"] for r in rows),
        index["truncated"],
    )


def _member(name: str, data: bytes) -> tuple[tarfile.TarInfo, BinaryIO]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o644, "", ""
    return info, io.BytesIO(data)


def _write(prepared, dest: Path, shards: int, per_shard: int) -> None:
    paths, labels = prepared.paths(), prepared.labels
    rows = []
    for i in range(shards):
        name = shard_name(i)
        with tarfile.open(dest / name, "w", format=tarfile.USTAR_FORMAT) as tar:
            for j in range(i * per_shard, (i + 1) * per_shard):
                k = j % len(paths)
                tar.addfile(*_member(f"{key_of(j)}.jpg", paths[k].read_bytes()))
                tar.addfile(*_member(f"{key_of(j)}.cls", str(labels[k]).encode()))
        rows.append(
            {"name": name, "bytes": (dest / name).stat().st_size, "samples": per_shard, "first_key": i * per_shard}
        )
    (dest / INDEX).write_text(
        json.dumps({"format": FORMAT, "dataset": prepared.digest, "truncated": False, "shards": rows}, indent=1)
    )


def _write_truncated(source: ShardSet, dest: Path) -> None:
    victim = TRUNCATED_SHARD if source.count > TRUNCATED_SHARD else 0
    for i, name in enumerate(source.names):
        if i == victim:
            data = (source.root / name).read_bytes()
            (dest / name).write_bytes(data[: int(len(data) * TRUNCATE_FRACTION)])
        else:
            os.link(source.root / name, dest / name) if _same_device(source.root, dest) else shutil.copyfile(
                source.root / name, dest / name
            )
    index = json.loads((source.root / INDEX).read_text())
    index["truncated"] = True  # the sizes stay the intact ones: what a reader must find
    index["truncated_shard"] = source.names[victim]
    (dest / INDEX).write_text(json.dumps(index, indent=1))


def _same_device(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


class _Counting:
    """A read-only stream that counts the bytes read through it."""

    def __init__(self, raw, read):
        self.raw, self._read, self.count = raw, read, 0

    def read(self, size: int = -1) -> bytes:
        data = self._read(size)
        self.count += len(data)
        return data


def read_samples(
    stream, read, name: str, expected_bytes: int, expected_samples: int, where: str
) -> Iterator[tuple[str, bytes, int]]:
    """(key, jpg bytes, class) of each sample of one shard read from `stream` through `read(size)`; raises
    ShardTruncated when the shard ends before its index says it should, wherever it was cut."""
    counted = _Counting(stream, read)
    seen = 0
    try:
        with tarfile.open(fileobj=counted, mode="r|") as tar:
            key, parts = None, {}
            for member in tar:
                stem, _, ext = member.name.partition(".")
                data = tar.extractfile(member).read() if member.isfile() else b""
                if stem != key:
                    if "jpg" in parts and "cls" in parts:  # an incomplete sample is not counted: caught below
                        seen += 1
                        yield key, parts["jpg"], int(parts["cls"])
                    key, parts = stem, {}
                parts[ext] = data
            if "jpg" in parts and "cls" in parts:
                seen += 1
                yield key, parts["jpg"], int(parts["cls"])
        rest = counted.read()  # tarfile stops at the end-of-archive blocks: the padding after them counts too
        del rest
    except tarfile.ReadError as exc:
        raise ShardTruncated(
            _truncated(name, where, counted.count, expected_bytes, seen, expected_samples, str(exc))
        ) from None
    if counted.count != expected_bytes or seen != expected_samples:
        raise ShardTruncated(_truncated(name, where, counted.count, expected_bytes, seen, expected_samples))


def _truncated(name: str, where: str, got: int, expected: int, seen: int, samples: int, detail: str = "") -> str:
    why = f" ({detail})" if detail else ""
    return (
        f"shard {name} at {where} is truncated: it ended after {got} of its {expected} bytes, with {seen} of its "
        f"{samples} samples{why}; an interrupted copy or upload cuts a shard like this: write it again (the "
        f"suite's own sets: delete that folder and rerun)"
    )

"""Streamed shards: the [dataset] as WebDataset tar shards (loaderbench/storage/tar_shards.py), read in order as an
IterableDataset from the local disk (storage = "local") or over the cell's HTTP server (storage = "http"),
one GET per shard; each sample's JPEG is decoded (and augmented) as the jpeg workload does.

Every loader process streams the shards `assigned` gives it, over and over (pass 0, pass 1, ...) until the
measuring loop stops, so an epoch of any length has enough samples; a pass is one read of all the shards.
Each sample is a dict, as WebDataset's are: the image, `cls`, `__key__`, and `__pass__` / `__worker__` (which
pass and which worker produced it), so loaderbench.storage.exactly_once can check that every pass saw each sample once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch.utils.data import IterableDataset, get_worker_info

from loaderbench.schema.cell import CellConfig
from loaderbench.storage.tar_shards import ShardSet, assigned, ensure_shards, read_samples
from loaderbench.workloads import DataSource
from loaderbench.workloads.jpeg import decoded_transform, from_bytes, usable_decoder

if TYPE_CHECKING:
    from loaderbench.datasets.types import PreparedDataset


class ShardStream(IterableDataset):
    def __init__(self, shardset: ShardSet, sharding: str, rank: int, ranks: int, decoder: str, stage: str, client=None):
        self.shardset, self.sharding, self.rank, self.ranks = shardset, sharding, rank, ranks
        self.decoder, self.stage, self.client = decoder, stage, client
        self.transform = decoded_transform(decoder)

    def shards_of(self, worker: int, workers: int) -> list[int]:
        return assigned(self.shardset.count, self.rank, self.ranks, worker, workers, self.sharding)

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        mine = self.shards_of(worker, workers)
        if not mine:  # more workers than shards: this one has nothing to read
            return
        p = 0
        while True:
            for i in mine:
                for key, data, label in self._samples(i):
                    image = from_bytes(data, self.decoder, self.stage, self.transform)
                    yield {"image": image, "cls": label, "__key__": key, "__pass__": p, "__worker__": worker}
            p += 1

    def _samples(self, i: int):
        s = self.shardset
        name = s.names[i]
        if self.client is None:
            with open(s.root / name, "rb") as fh:
                yield from read_samples(fh, fh.read, name, s.sizes[i], s.samples[i], str(s.root))
            return
        resp = self.client.open(name)
        got = 0

        def read(size: int = -1) -> bytes:
            nonlocal got
            data = self.client.read(resp, name, size)
            got += len(data)
            return data

        yield from read_samples(resp, read, name, s.sizes[i], s.samples[i], self.client.url(name))
        self.client.finish(resp, name, got, s.samples[i])


def shard_set(cell: CellConfig, prepared: PreparedDataset | None) -> ShardSet:
    """The cell's shard set (written into the cache on first use); the truncated variant for that fault."""
    if prepared is None:
        raise ValueError("the shards workload needs a prepared dataset")
    return ensure_shards(
        prepared, cell.shards or 1, cell.shard_samples or 1, truncated=cell.storage_fault == "truncated_shard"
    )


def build(cell: CellConfig, length: int, source: DataSource) -> ShardStream:
    client = None
    if cell.storage == "http":
        from loaderbench.storage.client import HttpClient

        if source.endpoint is None:
            raise ValueError('storage = "http" needs the cell\'s server (loaderbench.measure.storage_session)')
        client = HttpClient(source.endpoint, source.rank)
    return ShardStream(
        shard_set(cell, source.prepared),
        cell.sharding or "split",
        source.rank,
        cell.ranks,
        usable_decoder(cell),
        cell.jpeg_stage or "full",
        client,
    )

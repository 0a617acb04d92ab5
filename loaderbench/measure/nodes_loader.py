"""The cell's loader as a torchdata.nodes pipeline: sampler, batches of indices, ParallelMapper (threads or
processes) fetching and collating each batch, pin memory, a Prefetcher of prefetch_factor batches, Loader.

A worker's unit of work is one batch, fetched and collated in the worker, as a DataLoader worker's is, so
`num_workers`, `prefetch_factor` and `in_order` keep their meaning and thread and process cells differ only in
what a worker is. Imported in the cell process only (it imports torch and torchdata).
"""

from __future__ import annotations

import gc
from typing import Any

from loaderbench.schema.cell import CellConfig


class FetchBatch:
    """One batch of indices -> one collated batch (`__getitems__` where the dataset has it, as DataLoader
    does). A class, not a closure, so a spawned worker process can receive it."""

    def __init__(self, dataset: Any, collate: Any):
        self.dataset, self.collate = dataset, collate

    def __call__(self, indices: list[int]) -> Any:
        getitems = getattr(self.dataset, "__getitems__", None)
        samples = getitems(indices) if getitems is not None else [self.dataset[i] for i in indices]
        return self.collate(samples)


class EagerOrder:
    """The sampler's order of one epoch, drawn whole when its iterator is made. torchdata.nodes makes it in
    `reset`, on the main thread, before its reader thread starts and its process workers are forked: so no
    thread is inside torch (the sampler's generator) when a worker is forked, a state a forked child can
    deadlock on."""

    def __init__(self, sampler: Any):
        self.sampler = sampler

    def __iter__(self):
        return iter(list(self.sampler))

    def __len__(self) -> int:
        return len(self.sampler)


class NodesLoader:
    """A torchdata.nodes Loader with `close()`: its workers are stopped and joined when it is dropped, so their
    CPU time is counted (RUSAGE_CHILDREN) before the record is made."""

    def __init__(self, loader: Any):
        self.loader = loader

    def __iter__(self):
        return iter(self.loader)

    def close(self) -> None:
        self.loader = None
        gc.collect()  # the nodes hold each other in cycles: their __del__ stops and joins the workers


def nodes_loader(cell: CellConfig, parts, sampler, pin: bool) -> NodesLoader:
    """The pipeline over `parts` (loaderbench.workloads.LoaderParts) reading indices from `sampler`."""
    from torch.utils.data import default_collate
    from torchdata.nodes import Batcher, Loader, ParallelMapper, PinMemory, Prefetcher, SamplerWrapper

    if parts.iterable:
        raise ValueError('loader = "nodes" reads map-style datasets; this one is iterable: use loader = "dataloader"')
    if parts.worker_init_fn is not None:
        raise ValueError('loader = "nodes" has no worker_init_fn; the factory returned one: use loader = "dataloader"')
    workers = cell.num_workers
    node: Any = Batcher(SamplerWrapper(EagerOrder(sampler)), batch_size=cell.batch_size, drop_last=True)
    fetch = FetchBatch(parts.dataset, parts.collate_fn or default_collate)
    node = ParallelMapper(
        node,
        fetch,
        num_workers=workers,
        in_order=cell.in_order is not False,
        method=cell.worker_method or "process",
        multiprocessing_context=cell.start_method,
    )
    if pin:
        node = PinMemory(node)
    if workers > 0:  # ParallelMapper keeps 2 batches per worker in flight (DataLoader's default); ready ones wait here
        node = Prefetcher(node, prefetch_factor=cell.prefetch_factor or 2)
    return NodesLoader(Loader(node))

"""How a cell builds its DataLoader from what a workload hands it (loaderbench.measure.rank.build_loader)."""

import torch
from torch.utils.data import Dataset, IterableDataset

from loaderbench.measure.rank import build_loader
from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import LoaderParts

CONFIG = CellConfig(num_workers=0, seed=0, batch_size=4, pin_memory=False, warmup_batches=0, measure_batches=4)


class Indexed(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.tensor([i])


class Counting(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(torch.tensor([i]) for i in range(self.n))


def indices(loader) -> list[int]:
    return [int(x) for batch in loader for x in batch.flatten()]


def test_a_dataset_of_the_epoch_length_is_a_seeded_permutation():
    loader, _ = build_loader(CONFIG, LoaderParts(Indexed(16)), 16, rank=0, repetition=0)
    seen = indices(loader)
    assert sorted(seen) == list(range(16)) and seen != list(range(16))
    again, _ = build_loader(CONFIG, LoaderParts(Indexed(16)), 16, rank=0, repetition=0)
    assert indices(again) == seen


def test_a_larger_dataset_is_sampled_without_replacement_a_smaller_one_with():
    big, _ = build_loader(CONFIG, LoaderParts(Indexed(1000)), 16, rank=0, repetition=0)
    seen = indices(big)
    assert len(seen) == 16 and len(set(seen)) == 16
    small, _ = build_loader(CONFIG, LoaderParts(Indexed(5)), 16, rank=0, repetition=0)
    seen = indices(small)
    assert len(seen) == 16 and set(seen) <= set(range(5))


def test_an_iterable_dataset_is_read_as_it_yields_with_its_own_collate():
    collate = lambda samples: torch.cat(samples) * 10
    loader, _ = build_loader(CONFIG, LoaderParts(Counting(8), collate_fn=collate), 16, rank=0, repetition=0)
    assert indices(loader) == [i * 10 for i in range(8)]

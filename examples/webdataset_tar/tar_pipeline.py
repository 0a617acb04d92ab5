"""An iterable pipeline over tar shards in WebDataset layout (`<key>.jpg` + `<key>.cls` members, one sample
per key, in order), read with Python's tarfile, decoded by Pillow, augmented with torchvision's v2 transforms.

    make_dataset(shards="/data/shards/train-{000000..000063}.tar" or a folder or a list of paths)

Each DataLoader worker reads its own shards (`torch.utils.data.get_worker_info()`: worker i takes shards
i, i + n, i + 2n ...), so together they read each sample once per pass; `shard_by_worker = false` turns that
off, to see what the suite's duplicate check says about a pipeline that forgets it. The stream repeats its
shards (as WebDataset's `.repeat()` does): the suite takes the batches each epoch needs. Each sample carries
its key, which is how the duplicate check recognises a sample through random augmentations.

With no `shards`, it writes 8 shards from the suite's synthetic JPEG set once (`write_shards`).
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import torch
from PIL import Image
from torch.utils.data import IterableDataset, get_worker_info
from torchvision.transforms import v2

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def train_transform(image_size: int) -> v2.Compose:
    return v2.Compose(
        [
            v2.ToImage(),
            v2.RandomResizedCrop(image_size, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def tar_samples(path: str):
    """(key, {extension: bytes}) per sample of one shard: consecutive members that share a key."""
    key, fields = None, {}
    with tarfile.open(path, "r|") as tar:  # a stream: shards are read front to back, never seeked
        for member in tar:
            if not member.isfile():
                continue
            name = os.path.basename(member.name)
            stem, _, ext = name.partition(".")
            if stem != key and fields:
                yield key, fields
                fields = {}
            key = stem
            fields[ext] = tar.extractfile(member).read()
    if fields:
        yield key, fields


class TarShards(IterableDataset):
    def __init__(self, shards: list[str], image_size: int = 224, shard_by_worker: bool = True, repeat: bool = True):
        if not shards:
            raise ValueError("no shards to read")
        self.shards, self.shard_by_worker, self.repeat = list(shards), shard_by_worker, repeat
        self.transform = train_transform(image_size)

    def my_shards(self) -> list[str]:
        info = get_worker_info()
        if info is None or not self.shard_by_worker:
            return self.shards
        mine = self.shards[info.id :: info.num_workers]
        if not mine:
            raise ValueError(
                f"{len(self.shards)} shards for {info.num_workers} workers: worker {info.id} has "
                f"none; write at least as many shards as workers"
            )
        return mine

    def __iter__(self):
        shards = self.my_shards()
        while True:
            for shard in shards:
                for key, fields in tar_samples(shard):
                    with Image.open(io.BytesIO(fields["jpg"])) as img:
                        image = self.transform(img.convert("RGB"))
                    yield image, int(fields["cls"]), key
            if not self.repeat:
                return


def shard_paths(shards: str | list[str]) -> list[str]:
    """A list of paths as given, or every *.tar file of a folder, sorted."""
    if isinstance(shards, list):
        return [str(p) for p in shards]
    folder = Path(shards)
    if folder.is_dir():
        return sorted(str(p) for p in folder.glob("*.tar"))
    return [str(folder)]


def write_shards(out_dir: Path, files: list[Path], labels: list[int], shards: int) -> list[str]:
    """WebDataset-layout shards of the given JPEGs, round-robin; each written under a temporary name and
    renamed, so a reader never sees half a shard."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(shards):
        final = out_dir / f"shard-{s:06d}.tar"
        paths.append(str(final))
        if final.exists():
            continue
        tmp = out_dir / f".{final.name}.{os.getpid()}.tmp"
        with tarfile.open(tmp, "w") as tar:
            for i in range(s, len(files), shards):
                key = f"{labels[i]:04d}_{i:07d}"
                for ext, data in (("jpg", files[i].read_bytes()), ("cls", str(labels[i]).encode())):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, final)
    return paths


def synthetic_shards(images: int, shards: int) -> list[str]:
    """Shards of the suite's synthetic JPEG set, written once into the suite's cache."""
    from loaderbench.datasets import DatasetSpec, default_cache_dir, ensure_dataset

    prepared = ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=images))
    out = default_cache_dir().parent / "example-shards" / f"{prepared.root.name}-tar{shards}"
    return write_shards(out, prepared.paths(), list(prepared.labels), shards)


def make_dataset(
    shards: str | list[str] | None = None,
    image_size: int = 224,
    shard_by_worker: bool = True,
    images: int = 1024,
    synthetic_shard_count: int = 8,
) -> TarShards:
    """TarShards over `shards` (a folder of .tar files, one file, or a list); without it, shards of the
    suite's synthetic set."""
    paths = shard_paths(shards) if shards else synthetic_shards(images, synthetic_shard_count)
    return TarShards(paths, image_size=image_size, shard_by_worker=shard_by_worker)

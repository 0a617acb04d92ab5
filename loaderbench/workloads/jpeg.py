"""Real image loading: read a JPEG, decode it, RandomResizedCrop(224), flip, to float tensor, normalize.

The decoder is PIL (resize then runs in PIL, where pillow-simd helps), torchvision.io.decode_jpeg on the CPU
(resize then runs on uint8 tensors in torch), or nvjpeg: decode_jpeg on the GPU, the transform after it on the GPU
too, in whichever process loads the sample (the cell process at num_workers = 0, else each worker), so the batch
arrives on the GPU and the step copies nothing. With storage = "http" each file is fetched from the cell's server
(loaderbench/storage) instead of read from disk.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch.utils.data import Dataset

from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource
from loaderbench.workloads.claim_axes import Extras

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def decoded_transform(decoder: str):
    from torchvision.transforms import v2

    head = [v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()]
    to_tensor = [v2.PILToTensor()] if decoder == "pil" else []
    return v2.Compose(
        head + to_tensor + [v2.ToDtype(torch.float32, scale=True), v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    )


def decode(path: str, decoder: str):
    if decoder == "pil":
        from PIL import Image

        with Image.open(path) as img:
            return img.convert("RGB")
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    return decode_jpeg(read_file(path), mode=ImageReadMode.RGB, device=_device(decoder))


def _device(decoder: str) -> str:
    return "cuda" if decoder == "nvjpeg" else "cpu"


def usable_decoder(cell: CellConfig) -> str:
    """The cell's decoder; nvjpeg where no CUDA device is visible fails the cell with a message that says so."""
    decoder = cell.decoder or "pil"
    if decoder == "nvjpeg" and not torch.cuda.is_available():
        raise RuntimeError('decoder = "nvjpeg" decodes on the GPU, and no CUDA device is visible in this cell')
    return decoder


def decode_bytes(data: bytes, decoder: str):
    """decode() for a JPEG already in memory (read over the network, or from a shard)."""
    if decoder == "pil":
        import io

        from PIL import Image

        with Image.open(io.BytesIO(data)) as img:
            return img.convert("RGB")
    from torchvision.io import ImageReadMode, decode_jpeg

    encoded = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return decode_jpeg(encoded, mode=ImageReadMode.RGB, device=_device(decoder))


def finish(image, stage: str, transform):
    """The sample's image: transformed, or, for the decode-only ceiling, only its size (no transform)."""
    if stage == "decode":
        size = image.size if hasattr(image, "size") and not callable(image.size) else tuple(image.shape[-2:])
        return torch.tensor(size)
    return transform(image)


def from_bytes(data: bytes, decoder: str, stage: str, transform):
    """A sample from a JPEG's bytes; for the read-only stage (the I/O ceiling: nothing decoded) only their count."""
    if stage == "read":
        return torch.tensor([len(data)])
    return finish(decode_bytes(data, decoder), stage, transform)


class JpegDataset(Extras, Dataset):
    def __init__(
        self,
        length: int,
        root: Path,
        files: tuple[str, ...],
        labels: tuple[int, ...],
        decoder: str,
        stage: str = "full",
    ):
        if not files:
            raise ValueError(f"{root}: no JPEG files to read")
        self.length, self.decoder = length, decoder
        self.paths = [str(Path(root) / f) for f in files]
        self.labels = list(labels)
        self.stage = stage
        self.transform = decoded_transform(decoder)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        self.extras(index)
        k = index % len(self.paths)
        if self.stage == "read":
            with open(self.paths[k], "rb") as fh:
                return from_bytes(fh.read(), self.decoder, self.stage, self.transform), self.labels[k]
        return finish(decode(self.paths[k], self.decoder), self.stage, self.transform), self.labels[k]


class BatchedJpegDataset(JpegDataset):
    def __getitems__(self, indices: list[int]):
        return [self[i] for i in indices]


class HttpJpegDataset(JpegDataset):
    """storage = "http": each JPEG is a GET (its path relative to the dataset's root) from the cell's server."""

    def __init__(
        self, length: int, root: Path, files: tuple[str, ...], labels: tuple[int, ...], decoder: str, stage: str, client
    ):
        super().__init__(length, root, files, labels, decoder, stage)
        self.files, self.client = list(files), client

    def __getitem__(self, index: int):
        self.extras(index)
        k = index % len(self.files)
        return from_bytes(self.client.get(self.files[k]), self.decoder, self.stage, self.transform), self.labels[k]


class BatchedHttpJpegDataset(HttpJpegDataset):
    def __getitems__(self, indices: list[int]):
        return [self[i] for i in indices]


def build(cell: CellConfig, length: int, source: DataSource) -> JpegDataset:
    prepared = source.prepared
    if prepared is None:
        raise ValueError("the jpeg workload needs a prepared dataset")
    decoder, stage = usable_decoder(cell), cell.jpeg_stage or "full"
    if cell.storage == "http":
        from loaderbench.storage.client import HttpClient

        if source.endpoint is None:
            raise ValueError('storage = "http" needs the cell\'s server (loaderbench.measure.storage_session)')
        http = BatchedHttpJpegDataset if cell.batched else HttpJpegDataset
        client = HttpClient(source.endpoint, source.rank)
        return http(length, prepared.root, prepared.files, prepared.labels, decoder, stage, client)
    local = BatchedJpegDataset if cell.batched else JpegDataset
    return local(length, prepared.root, prepared.files, prepared.labels, decoder, stage)

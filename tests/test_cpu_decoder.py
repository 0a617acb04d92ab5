"""decoder = "torchvision": the jpeg workload decodes on the CPU with torchvision.io.decode_jpeg (libjpeg-turbo) to
the pixels PIL decodes from the same file, and the dataset's samples are the workload's transform of them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from loaderbench.datasets import DatasetSpec, PreparedDataset, ensure_dataset
from loaderbench.schema.cell import CellConfig
from loaderbench.workloads import DataSource, jpeg


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> PreparedDataset:
    """The synthetic JPEG set, small (about 50 x 38 pixels an image)."""
    spec = DatasetSpec(kind="synthetic-jpeg", images=4)
    return ensure_dataset(spec, cache_dir=tmp_path_factory.mktemp("jpeg"), workers=1, overrides={"scale": 0.1})


def pil_pixels(path) -> torch.Tensor:
    """PIL's decode of the file, as the channels x height x width uint8 tensor decode_jpeg returns."""
    with Image.open(path) as img:
        return torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1).contiguous()


def test_torchvision_decodes_to_pils_pixels(images):
    for path in images.paths():
        got, expected = jpeg.decode(str(path), "torchvision"), pil_pixels(path)
        assert (got.dtype, got.device.type, got.shape) == (torch.uint8, "cpu", expected.shape), path
        assert torch.equal(got, expected), (path, (got.int() - expected.int()).abs().max())
        with open(path, "rb") as fh:  # the same decode from bytes (storage = "http", shards)
            assert torch.equal(jpeg.decode_bytes(fh.read(), "torchvision"), expected)


def test_a_torchvision_cells_sample_is_the_transform_of_pils_pixels(images):
    from torchvision.transforms import v2

    cell = CellConfig(workload="jpeg", decoder="torchvision", warmup_batches=0, measure_batches=1, seed=0)
    dataset = jpeg.build(cell, len(images), DataSource(prepared=images))
    # what the workload does to a decoded image, written out here: crop to 224, flip, scale to [0, 1], normalize
    transform = v2.Compose(
        [
            v2.RandomResizedCrop(224, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(jpeg.IMAGENET_MEAN, jpeg.IMAGENET_STD),
        ]
    )
    for k, path in enumerate(images.paths()):
        torch.manual_seed(k)
        sample, label = dataset[k]
        torch.manual_seed(k)
        expected = transform(pil_pixels(path))
        assert (sample.dtype, sample.shape, label) == (torch.float32, (3, 224, 224), images.labels[k])
        assert torch.equal(sample, expected), (path, (sample - expected).abs().max())

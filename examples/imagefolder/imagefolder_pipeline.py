"""An ImageFolder JPEG pipeline, as a training script would build it: torchvision's ImageFolder over a folder
of class sub-folders, decoded by Pillow, augmented with torchvision's v2 transforms.

    make_dataset(root="/data/imagenet/train", image_size=224)

With no `root`, it reads the suite's synthetic JPEG set (generated once; `python -m loaderbench dataset` prints
where), so the example runs anywhere.
"""

from __future__ import annotations

import torch
from torchvision import datasets
from torchvision.transforms import v2

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def train_transform(image_size: int) -> v2.Compose:
    return v2.Compose(
        [
            v2.ToImage(),  # PIL -> uint8 tensor: the crop and flip below run on tensors
            v2.RandomResizedCrop(image_size, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


def synthetic_root(images: int) -> str:
    """The suite's synthetic JPEG set of `images` files (an ImageFolder tree), generated on first use."""
    from loaderbench.datasets import DatasetSpec, ensure_dataset

    return str(ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=images)).root)


def make_dataset(root: str | None = None, image_size: int = 224, images: int = 1024) -> datasets.ImageFolder:
    """ImageFolder(root) with the training transform; `images` sizes the synthetic set used without `root`."""
    return datasets.ImageFolder(root or synthetic_root(images), transform=train_transform(image_size))

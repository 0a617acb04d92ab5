"""Train ResNet-18 on the suite's synthetic JPEG set, with a deliberately poor loader: every image decoded and
cropped in the training process itself (num_workers=0), one batch at a time. A training script as users write
them: nothing in it knows about loaderbench. Watch it with

    loaderbench doctor -- python examples/train_resnet.py

CPU by default, CUDA where there is one (--device). The first run generates the images (a few seconds for the
default 512) into loaderbench's dataset cache.
"""

from __future__ import annotations

import argparse
import time

import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision.transforms import v2

from loaderbench.datasets import DatasetSpec, ensure_dataset


class JpegFolder(Dataset):
    """(image, label) pairs: read the JPEG, decode it with PIL, random crop and flip, to a normalized tensor."""

    def __init__(self, paths, labels, size: int):
        self.paths, self.labels = [str(p) for p in paths], list(labels)
        self.transform = v2.Compose(
            [
                v2.RandomResizedCrop(size, antialias=True),
                v2.RandomHorizontalFlip(),
                v2.PILToTensor(),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
            ]
        )

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        with Image.open(self.paths[i]) as img:
            return self.transform(img.convert("RGB")), self.labels[i]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=512, help="synthetic images (default: %(default)s)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--num-workers", type=int, default=0, help="the poor default: decode in the training process")
    p.add_argument("--image-size", type=int, default=96, help="crop size fed to the model (default: %(default)s)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    args = p.parse_args()

    data = ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=args.images))
    classes = max(data.labels) + 1
    loader = DataLoader(
        JpegFolder(data.paths(), data.labels, args.image_size),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.num_workers,
    )
    device = torch.device(args.device)
    model = torchvision.models.resnet18(num_classes=classes).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    step, t0 = 0, time.perf_counter()
    for epoch in range(args.epochs):
        for images, labels in loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(images), labels)
            loss.backward()
            opt.step()
            step += 1
            if step % 10 == 0:
                rate = step / (time.perf_counter() - t0)
                print(f"epoch {epoch} step {step} loss {loss.item():.3f} ({rate:.2f} steps/s)", flush=True)
            if args.max_steps and step >= args.max_steps:
                return


if __name__ == "__main__":
    main()

"""Check that PIL is pillow-simd with libjpeg-turbo, and that torch and torchvision import.

Run in the image build right after pillow-simd is compiled, by the Apptainer %test, and by hand:
    python /opt/loaderbench/verify_pillow_simd.py
Exits non-zero with a reason when the image is not what the lock and the Dockerfile promise.
Set EXPECT_LIBJPEG_TURBO=2.1.5 to require that exact libjpeg-turbo version.
"""

from __future__ import annotations

import json
import os
import re
import sys
from importlib import metadata


def main() -> int:
    problems: list[str] = []
    import PIL
    from PIL import Image, features

    version = PIL.__version__
    if not re.search(r"\.post\d+$", version):
        problems.append(f"PIL.__version__ is {version!r}: stock Pillow, not pillow-simd (.postN)")
    try:
        simd_dist = metadata.version("pillow-simd")
    except metadata.PackageNotFoundError:
        simd_dist = None
        problems.append("no pillow-simd distribution installed")
    try:
        stock = metadata.version("pillow")
        problems.append(f"stock Pillow {stock} is installed next to pillow-simd")
    except metadata.PackageNotFoundError:
        pass
    turbo = bool(features.check_feature("libjpeg_turbo"))
    turbo_version = features.version("libjpeg_turbo") if turbo else None
    if not turbo:
        problems.append("PIL.features.check_feature('libjpeg_turbo') is false")
    expected = os.environ.get("EXPECT_LIBJPEG_TURBO")
    if expected and turbo_version != expected:
        problems.append(f"libjpeg-turbo is {turbo_version}, expected {expected}")

    # A JPEG round trip through the compiled decoder and pillow-simd's resampling.
    import io

    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 30, 90)).save(buf, format="JPEG", quality=90)
    img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB").resize((32, 24), Image.BILINEAR)
    if img.size != (32, 24):
        problems.append("JPEG decode + resize gave the wrong size")

    import torch
    import torchvision
    from torchvision.transforms import functional as F

    tensor = F.to_tensor(img)
    if tuple(tensor.shape) != (3, 24, 32):
        problems.append("torchvision to_tensor on a pillow-simd image gave the wrong shape")

    print(
        json.dumps(
            {
                "pillow": version,
                "pillow_simd": simd_dist,
                "libjpeg_turbo": turbo_version,
                "torch": torch.__version__,
                "torchvision": torchvision.__version__,
                "python": sys.version.split()[0],
            }
        )
    )
    for problem in problems:
        print(f"verify_pillow_simd: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

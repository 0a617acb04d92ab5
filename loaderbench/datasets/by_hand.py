"""``python -m loaderbench.datasets``: generate (or check) a dataset by hand and print its summary as JSON.

Exit status 0 on success, 2 with an ``error:`` line on stderr when the dataset cannot be used.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from loaderbench.datasets.cache import ensure_dataset, verify_dataset
from loaderbench.datasets.types import DatasetError, DatasetSpec


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m loaderbench.datasets",
        description="Generate/verify a loaderbench dataset and print its summary.",
    )
    ap.add_argument("--images", type=int, default=1024, help="synthetic: number of images (default 1024)")
    ap.add_argument("--recipe", default="synthetic-jpeg", help="synthetic: a shipped recipe's name or a .toml path")
    ap.add_argument("--path", help="use this ImageFolder tree instead of generating")
    ap.add_argument(
        "--cache-dir",
        type=Path,
        help="default: <cache>/datasets; the cache is $LOADERBENCH_CACHE, else ~/.cache/loaderbench "
        "(.cache in a checkout)",
    )
    ap.add_argument("--workers", type=int, help="generation processes (default: usable CPUs)")
    ap.add_argument("--full", action="store_true", help="also hash every file")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    spec = (
        DatasetSpec(kind="imagefolder", path=args.path)
        if args.path
        else DatasetSpec(kind="synthetic-jpeg", images=args.images, recipe=args.recipe)
    )
    try:
        t0 = time.perf_counter()
        ds = ensure_dataset(spec, cache_dir=args.cache_dir, workers=args.workers)
        if args.full:
            ds = verify_dataset(ds, full=True)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        json.dumps(
            {
                "root": str(ds.root),
                "digest": ds.digest,
                "seconds": round(time.perf_counter() - t0, 2),
                "summary": ds.summary,
            },
            indent=2,
        )
    )
    return 0

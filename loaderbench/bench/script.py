"""One DataLoader configuration measured by one fresh process: the command-wrapping baseline.

This is what a benchmark looks like without the suite: one script per configuration, run once per
repetition under a command timer (hyperfine, `time`), each run paying interpreter start-up and the
torch import again. `python -m loaderbench.bench` times it from outside against the suite running the same
cells. It does the same work as a suite cell (same workloads, same DataLoader arguments, the same epoch
of warm-up + window + tail batches, which the bench takes from the cell's `loaderbench.study.window.plan_window`)
with a bare loop and two clock reads around the window.

    python -m loaderbench.bench.script --workload jpeg --workers 2 --cores 2 --warmup 4 --batches 30 --tail 4

Prints one JSON line: samples_per_s and where the process's time went (imports, setup, measuring).
Runs as a file (the bench runs it so, from where the import system finds it: no package import before its
clock starts) or as `python -m loaderbench.bench.script`.
"""

from __future__ import annotations

import time

T_START = time.perf_counter()  # the interpreter has started; everything after this is ours

import argparse  # noqa: E402 - after T_START: the clock starts before our own imports
import json  # noqa: E402 - after T_START: the clock starts before our own imports
import os  # noqa: E402 - after T_START: the clock starts before our own imports
import sys  # noqa: E402 - after T_START: the clock starts before our own imports
from pathlib import Path  # noqa: E402 - after T_START: the clock starts before our own imports

# Run as a file, Python puts loaderbench/bench/ first on sys.path, where its modules (common.py, fork.py...)
# would shadow top-level names; the folder that holds the loaderbench package (site-packages, or a source
# checkout) goes there instead, so the script imports the same loaderbench as the bench that runs it.
_HERE = Path(__file__).resolve().parent
_PACKAGE_PARENT = _HERE.parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
if str(_PACKAGE_PARENT) not in sys.path:
    sys.path.insert(0, str(_PACKAGE_PARENT))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", choices=("sleep", "cpu", "jpeg"), required=True)
    p.add_argument("--workers", type=int, default=0, help="DataLoader num_workers")
    p.add_argument("--cores", type=int, default=1, help="CPUs to pin to (the first N allowed)")
    p.add_argument("--start-method", default="fork", choices=("fork", "spawn", "forkserver"))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--prefetch-factor", type=int, default=2)
    p.add_argument(
        "--warmup",
        type=int,
        default=4,
        help="batches before the window (at least 1: the first "
        "carries start-up; at least the prefetch pipeline, num_workers x prefetch_factor)",
    )
    p.add_argument("--batches", type=int, default=30, help="measured batches")
    p.add_argument(
        "--tail",
        type=int,
        default=0,
        help="batches consumed after the window, unmeasured, so it closes with the pipeline as full as it opened",
    )
    p.add_argument("--sleep-ms", type=float, default=2.0)
    p.add_argument("--cpu-work", type=int, default=15)
    p.add_argument("--sample-kb", type=float, default=12.0)
    p.add_argument("--decoder", default="pil", choices=("pil", "torchvision"))
    p.add_argument("--images", type=int, default=1024, help="synthetic JPEG dataset size (jpeg)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repetition", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.warmup < 1 or args.batches < 1 or args.tail < 0:
        raise SystemExit("--warmup and --batches must be at least 1, --tail at least 0")
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, allowed[: args.cores])
    os.environ["OMP_NUM_THREADS"] = str(args.cores)

    import torch
    import torch.multiprocessing as tmp
    from torch.utils.data import DataLoader

    from loaderbench.workloads import build_dataset

    t_imported = time.perf_counter()
    torch.set_num_threads(args.cores)
    prepared = None
    if args.workload == "jpeg":
        from loaderbench.datasets import DatasetSpec, ensure_dataset

        prepared = ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=args.images))
    from loaderbench.bench.abab import bare_window as take
    from loaderbench.schema.cell import CellConfig
    from loaderbench.workloads import DataSource

    # every axis at its default (as a study cell has them), then this configuration's values
    cell = CellConfig(
        workload=args.workload,
        num_workers=args.workers,
        cores=args.cores,
        batch_size=args.batch_size,
        sleep_ms=args.sleep_ms,
        cpu_work=args.cpu_work,
        sample_kb=args.sample_kb,
        decoder=args.decoder,
        warmup_batches=args.warmup,
        measure_batches=args.batches,
        seed=args.seed,
    )
    warmup = args.warmup
    total = warmup + args.batches + args.tail
    parts = build_dataset(cell, total * args.batch_size, DataSource(prepared))
    kwargs = {"collate_fn": parts.collate_fn}
    if args.workers > 0:
        kwargs.update(
            multiprocessing_context=tmp.get_context(args.start_method),
            prefetch_factor=args.prefetch_factor,
            worker_init_fn=parts.worker_init_fn,
        )
    generator = torch.Generator().manual_seed(args.seed * 1000 + args.repetition * 64)  # the cell's seed (rank 0)
    loader = DataLoader(
        parts.dataset,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        generator=generator,
        **kwargs,
    )

    clock = time.perf_counter
    t_iter = clock()
    it = iter(loader)
    next(it)
    t_first = clock()
    take(it, warmup - 1)
    t0 = clock()
    take(it, args.batches)
    t1 = clock()
    take(it, args.tail)
    del it
    t_end = clock()
    print(
        json.dumps(
            {
                "samples_per_s": args.batches * args.batch_size / (t1 - t0),
                "measured_s": t1 - t0,
                "time_to_first_batch_s": t_first - t_iter,
                "import_s": t_imported - T_START,
                "setup_s": t_iter - t_imported,
                "loop_s": t_end - t_iter,
                "in_script_s": t_end - T_START,
                "pid": os.getpid(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

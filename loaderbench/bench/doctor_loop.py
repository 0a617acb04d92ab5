"""A training loop of a known kind, for `make bench`'s doctor-against-grid part (loaderbench.bench.doctor_vs_grid):
`python -m loaderbench.bench.doctor_loop --kind io --num-workers 0 ...` runs a few epochs of a DataLoader over a
dataset whose samples cost a known time, with a simulated step after every batch, and prints one JSON line with
the end-to-end steps per second of the steps after the first epoch.

Kinds (per sample, then per step of a batch of BATCH samples):
  io     the sample waits 4 ms (a read from slow storage: the core is free); the step sleeps 10 ms
  cpu    the sample busies the core for 1.5 ms (decoding, augmenting); the step sleeps 10 ms
  step   the sample waits 0.1 ms; the step sleeps 40 ms (the accelerator is the bottleneck)
"""

from __future__ import annotations

import argparse
import json
import time

BATCH = 8
KINDS = {"io": (4.0, False, 10.0), "cpu": (1.5, True, 10.0), "step": (0.1, False, 40.0)}  # ms, busy, step ms


def _dataset(kind: str, samples: int):
    import torch
    from torch.utils.data import Dataset

    per_sample_s, busy, _ = KINDS[kind][0] / 1e3, KINDS[kind][1], KINDS[kind][2]

    class Known(Dataset):
        def __len__(self) -> int:
            return samples

        def __getitem__(self, i: int):
            if busy:
                end = time.perf_counter() + per_sample_s
                while time.perf_counter() < end:
                    pass
            else:
                time.sleep(per_sample_s)
            return torch.tensor([i])

    return Known()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m loaderbench.bench.doctor_loop")
    p.add_argument("--kind", choices=sorted(KINDS), required=True)
    p.add_argument("--num-workers", type=int, default=0)
    p.add_argument("--prefetch-factor", type=int, default=None)
    p.add_argument("--persistent-workers", action="store_true")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batches", type=int, default=40, help="batches per epoch")
    args = p.parse_args(argv)
    from torch.utils.data import DataLoader

    extra = {"prefetch_factor": args.prefetch_factor or 2, "persistent_workers": args.persistent_workers}
    loader = DataLoader(
        _dataset(args.kind, args.batches * BATCH),
        batch_size=BATCH,
        num_workers=args.num_workers,
        **(extra if args.num_workers else {}),
    )
    step_s = KINDS[args.kind][2] / 1e3
    steps, t0 = 0, None
    for epoch in range(args.epochs):
        for _batch in loader:
            time.sleep(step_s)
            if epoch > 0:
                steps += 1
        if epoch == 0:
            t0 = time.perf_counter()  # the first epoch (the workers' first start, imports) is not counted
    seconds = time.perf_counter() - (t0 or 0.0)
    print(json.dumps({"steps": steps, "seconds": seconds, "steps_per_s": steps / seconds if seconds > 0 else None}))


if __name__ == "__main__":
    main()

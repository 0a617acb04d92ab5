"""Fake records for the GPU questions (the tutorial's ladder, feeding a GPU, decoding on it, batch size on it)
and the simulated training step, built as loaderbench.fake_records.questions builds the others."""

from __future__ import annotations

import itertools

import pandas as pd

from loaderbench.fake_records.questions import SPREAD, jitter, rec, table


def ladder_table(speed, consumer="cpu", reps=3, pin_effective=False, spread=SPREAD):
    steps = {
        "baseline": {"num_workers": 0},
        "+workers": {"num_workers": 4},
        "+pin_memory": {"num_workers": 4, "pin_memory": True},
        "+persistent": {"num_workers": 4, "pin_memory": True, "persistent_workers": True},
        "+prefetcher": {"num_workers": 4, "pin_memory": True, "persistent_workers": True, "prefetcher": True},
        "+batched": {
            "num_workers": 4,
            "pin_memory": True,
            "persistent_workers": True,
            "prefetcher": True,
            "batched": True,
        },
    }
    out = []
    for name, cfg in steps.items():
        full = {
            "pin_memory": False,
            "persistent_workers": False if cfg["num_workers"] else None,
            "prefetcher": False,
            "batched": False,
            "workload": "tutorial",
            "model": "tutorial",
            **cfg,
        }
        for r in range(reps):
            out.append(
                rec(
                    "ladder",
                    full,
                    {
                        "end_to_end_samples_per_s": 100 * speed[name] * jitter(r, spread),
                        "consumer": consumer,
                        "device": "cuda:0" if consumer == "gpu" else "cpu",
                        "pin_memory_effective": pin_effective and full["pin_memory"],
                    },
                    r,
                )
            )
    return table(out)


#: the speedups the PyTorch tutorial publishes, rung by rung (loaderbench.analysis.questions.ladder.PUBLISHED; a
#: test keeps the two equal)
TUTORIAL = {
    "baseline": 1.0,
    "+workers": 3.30,
    "+pin_memory": 3.33,
    "+persistent": 3.76,
    "+prefetcher": 3.77,
    "+batched": 11.55,
}


def gpu_table(rate, consumer="gpu", reps=3, spread=SPREAD, models=("resnet50", "tutorial"), nws=(0, 4, 16)):
    """gpu-feed cells on 16 cores: samples/s `rate(model, num_workers, pinned)`, AU in proportion to it."""
    out = []
    for model, nw, pin, r in itertools.product(models, nws, (False, True), range(reps)):
        x = rate(model, nw, pin) * jitter(r, spread)
        out.append(
            rec(
                "gpu-feed",
                {
                    "workload": "jpeg",
                    "model": model,
                    "device": "auto",
                    "num_workers": nw,
                    "cores": 16,
                    "pin_memory": pin,
                    "batch_size": 64,
                },
                {
                    "samples_per_s": x,
                    "consumer": consumer,
                    "accelerator_busy_fraction": min(1.0, x / 2000),
                    "pin_memory_effective": pin and consumer == "gpu",
                },
                r,
            )
        )
    return table(out)


def gpu_rate(model, nw, pin):
    """ResNet-50: the loader binds up to 16 workers, where pinning pays; the small model: pinning costs a little."""
    loader = 150.0 * max(nw, 1)
    if model == "resnet50":
        return min(loader, 1600.0 if pin else 1250.0)
    return loader * (0.97 if pin else 1.0)


def stepped_table(per_batch_s: dict[int, float], step_ms=25.0, cores=2, reps=3, spread=SPREAD) -> pd.DataFrame:
    """gpu-feed-small cells with a simulated step that sleeps: seconds per batch of 32 at each num_workers."""
    out = []
    for nw, t in per_batch_s.items():
        for r in range(reps):
            cfg = {
                "workload": "jpeg",
                "model": "resnet50",
                "device": "auto",
                "num_workers": nw,
                "cores": cores,
                "batch_size": 32,
                "pin_memory": True,
                "step_ms": step_ms,
                "step_kind": "sleep",
            }
            metrics = {"samples_per_s": 32 / (t * jitter(r, spread)), "consumer": "simulated (no CUDA device)"}
            out.append(rec("gpu-feed-small", cfg, metrics, r))
    return table(out)


CUDA_FORK_ERROR = {
    "kind": "cuda_after_fork",
    "message": "CUDA was initialized in the cell process before its DataLoader workers were forked, and in DataLoader "
    'worker 0 used CUDA, which a forked child cannot: use start_method = "spawn" or "forkserver", or keep CUDA out '
    "of the workers (torch.AcceleratorError: CUDA error: initialization error)",
}


def gpu_decode_table(forked_fail=True, spawned_ok=True, reps=3, spread=SPREAD) -> pd.DataFrame:
    """gpu-decode cells on 16 cores, ResNet-50 on the GPU: torchvision in 0/2/4 forked workers, nvjpeg in the cell
    process and in 2 forked and 2 spawned workers; the forked nvjpeg cells fail (`forked_fail`) with CUDA in a
    forked worker, the spawned ones run (`spawned_ok`)."""
    cells = [("torchvision", w, "fork") for w in (0, 2, 4)] + [("nvjpeg", 0, "fork")]
    cells += [("nvjpeg", 2, "fork"), ("nvjpeg", 2, "spawn")]
    out = []
    for (decoder, w, method), r in itertools.product(cells, range(reps)):
        cfg = {"workload": "jpeg", "model": "resnet50", "device": "cuda", "decoder": decoder, "num_workers": w}
        cfg |= {"cores": 16, "batch_size": 64, "pin_memory": False, "start_method": method if w else None}
        rate = (760.0 if w == 0 else 790.0) if decoder == "nvjpeg" else 320.0 * max(w, 1)
        fails = (
            decoder == "nvjpeg" and w and ((method == "fork") == forked_fail if method == "fork" else not spawned_ok)
        )
        metrics = {"samples_per_s": rate * jitter(r, spread), "consumer": "gpu"}
        metrics["accelerator_busy_fraction"] = min(1.0, rate / 2000)
        error = CUDA_FORK_ERROR if fails else None
        out.append(rec("gpu-decode", cfg, metrics, r, status="failed" if fails else "ok", error=error))
    return table(out)


def gpu_batch_table(oom_at=(2048,), rate=None, reps=3, spread=SPREAD, au=0.9) -> pd.DataFrame:
    """gpu-batch-size cells: ResNet-50 on the GPU at batch sizes 32-2048, samples/s `rate(size)`, the GPU busy
    `au` of each window; the sizes in `oom_at` fail with gpu_out_of_memory."""
    rate = rate or (lambda bs: {32: 1650.0, 64: 2000.0, 128: 2140.0, 512: 2250.0, 2048: 2250.0}[bs])
    out = []
    for bs, r in itertools.product((32, 64, 128, 512, 2048), range(reps)):
        cfg = {"workload": "jpeg", "model": "resnet50", "device": "cuda", "decoder": "nvjpeg", "num_workers": 0}
        cfg |= {"cores": 16, "batch_size": bs, "pin_memory": False, "start_method": None}
        metrics = {"samples_per_s": rate(bs) * jitter(r, spread), "consumer": "gpu", "accelerator_busy_fraction": au}
        oom = bs in oom_at
        error = (
            {"kind": "gpu_out_of_memory", "message": "the GPU ran out of memory in the cell process"} if oom else None
        )
        out.append(rec("gpu-batch-size", cfg, metrics, r, status="failed" if oom else "ok", error=error))
    return table(out)

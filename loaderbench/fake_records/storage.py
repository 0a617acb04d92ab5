"""Fake records for the storage question: Little's law with a core's ceiling, a bandwidth cap, two round trips
per request for a new connection; built as loaderbench.fake_records.questions builds the others."""

from __future__ import annotations

import itertools

from loaderbench.fake_records.questions import SPREAD, jitter, rec, table

SERVICE_S = 0.001  # the synthetic path's service time per request


DECODE_S = 0.003  # a full-pipeline sample's decoding and transforms on one core


def storage_rate(
    nw: int,
    latency_ms: float,
    client: str = "pooled",
    mbit: float = 0.0,
    ceiling: float = 1500.0,
    sample_bytes: float = 100e3,
) -> float:
    """Little's law with a core's ceiling and a cap: W / (round trips x latency + service), at most `ceiling`
    samples/s and `mbit` of payload."""
    trips = 2 if client == "per_request" else 1
    x = min(nw / (trips * latency_ms / 1000 + SERVICE_S), ceiling)
    return min(x, mbit * 1e6 / 8 / sample_bytes) if mbit else x


def storage_table(
    reps=3,
    spread=SPREAD,
    per_request=("per_request", 1000.0),
    cap_mbit=200.0,
    split_dups=0,
    none_dups=192,
    latencies=(0.0, 10.0, 50.0),
    nws=(1, 2, 4, 8, 16),
    full=(),
):
    """HTTP read-stage jpeg cells on one core at each latency (`storage_rate`), a `cap_mbit` cap at 10 ms, the
    `per_request` client (its name, its ceiling) at 10 ms, local cells, and shards cells (split: `split_dups`
    duplicates; none: `none_dups`). `full`: latencies of full-pipeline HTTP cells too, each sample decoded in
    DECODE_S after its wait (Little's law up to one core's decoding rate)."""
    out = []
    for lat, nw, r in itertools.product(full, nws, range(reps)):
        x = min(nw / (lat / 1000 + DECODE_S), 1 / DECODE_S) * jitter(r, spread)
        cfg = {"workload": "jpeg", "storage": "http", "jpeg_stage": "full", "latency_ms": lat, "num_workers": nw}
        cfg |= {"bandwidth_mbit": 0.0, "http_client": "pooled", "cores": 1}
        out.append(rec("storage", cfg, {"samples_per_s": x}, r))
    for r in range(reps) if full else ():  # the local twin at num_workers = cores only: no curve of its own
        cfg = {"workload": "jpeg", "storage": "local", "jpeg_stage": "full", "num_workers": 1, "cores": 1}
        out.append(rec("storage", cfg, {"samples_per_s": jitter(r, spread) / DECODE_S}, r))
    client, pr_ceiling = per_request
    cells = [(lat, 0.0, "pooled", 1500.0) for lat in latencies] + [
        (10.0, cap_mbit, "pooled", 1500.0),
        (10.0, 0.0, client, pr_ceiling),
    ]
    for (lat, mbit, cl, ceiling), nw, r in itertools.product(cells, nws, range(reps)):
        x = storage_rate(
            nw, lat, "per_request" if cl == "per_request" and client == "per_request" else "pooled", mbit, ceiling
        ) * jitter(r, spread)
        cfg = {
            "workload": "jpeg",
            "storage": "http",
            "jpeg_stage": "read",
            "latency_ms": lat,
            "bandwidth_mbit": mbit,
            "http_client": cl,
            "num_workers": nw,
            "cores": 1,
        }
        path = {"latency": "proxy", "bandwidth": "tbf" if mbit else "none"}
        metrics = {
            "samples_per_s": x,
            "time_to_first_batch_s": 0.1 + 4 * (lat / 1000 + SERVICE_S),
            "storage": {"payload_mbit_per_s": x * 100e3 * 8 / 1e6, "bytes_per_sample": 100e3, "path": path},
        }
        out.append(rec("storage", cfg, metrics, r))
    for nw, r in itertools.product(nws, range(reps)):
        out.append(
            rec(
                "storage",
                {"workload": "jpeg", "storage": "local", "jpeg_stage": "read", "num_workers": nw, "cores": 1},
                {"samples_per_s": 1500.0 * jitter(r, spread)},
                r,
            )
        )
    for (storage, sharding), r in itertools.product(
        itertools.product(("local", "http"), ("split", "none")), range(reps)
    ):
        dups = split_dups if sharding == "split" else none_dups
        out.append(
            rec(
                "storage",
                {
                    "workload": "shards",
                    "storage": storage,
                    "jpeg_stage": "read",
                    "sharding": sharding,
                    "num_workers": 4,
                    "cores": 1,
                },
                {
                    "samples_per_s": 800.0 * jitter(r, spread),
                    "shard_passes": {
                        "seen": 512,
                        "duplicates": dups,
                        "missing": 0,
                        "passes_complete": 2,
                        "expected_per_pass": 64,
                    },
                },
                r,
            )
        )
    return table(out)

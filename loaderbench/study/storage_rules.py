"""Which storage settings a cell may combine: checked when a study is loaded, before anything runs, with
messages that name the axis, the value and what is allowed."""

from __future__ import annotations

SERVER_FAULTS = ("server_stop", "server_stall")


def storage_problems(cells) -> list[str]:
    """One sentence per impossible combination among the (normalised) cells, each said once."""
    problems: dict[str, None] = {}
    for cell in cells:
        c = cell.config
        fault = c.get("storage_fault")
        if fault in SERVER_FAULTS and (c.get("storage") != "http" or c.get("storage_url")):
            problems[
                f'[matrix] storage_fault = "{fault}": the suite can stop or stall only a server it started; '
                f'allowed: with storage = "http" and no storage_url'
            ] = None
        if fault == "truncated_shard" and c["workload"] != "shards":
            problems[
                '[matrix] storage_fault = "truncated_shard": only the shards workload reads shards; '
                'allowed: with workload = "shards"'
            ] = None
        if c.get("storage_url") and c.get("shaping") == "kernel":
            problems[
                '[matrix] shaping = "kernel" with storage_url: the path to your own server is not the '
                'suite\'s to shape with qdiscs; allowed: shaping = "proxy" or "auto" (the proxy)'
            ] = None
    return list(problems)

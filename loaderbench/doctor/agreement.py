"""Ranks agreeing on one setting: under torchrun or srun every rank searches its own loader, and the script's
DataLoader line is one line for all of them, so before the loop's A B rounds every rank takes the same changes.

Each rank writes what its search found into the doctor's folder and waits for the others (the ranks reach this
point after the same number of steps, so they wait little); then every rank takes the changes most ranks found,
the lowest rank's among equals, and validates those in its loop, in step with the others. A rank that does not
report within the wait (a node that does not share the folder, a loader the others do not have) leaves each rank
with its own winner, and the record says so.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

#: how long a rank waits for the others' searches, at most
WAIT_S = 120.0


def _file(folder: Path, loader: str, rank: int) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", loader).strip("-") or "loader"
    return folder / f"tune-{slug}-rank{rank}.json"


def agree(
    folder: Path,
    loader: str,
    rank: int,
    world: int,
    changes: dict,
    wait_s: float = WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict, dict]:
    """(the changes every rank validates, what the ranks found and how they agreed)."""
    folder.mkdir(parents=True, exist_ok=True)
    mine = _file(folder, loader, rank)
    tmp = mine.with_suffix(".tmp")
    tmp.write_text(json.dumps({"rank": rank, "changes": changes}))
    os.replace(tmp, mine)
    deadline = clock() + wait_s
    found: dict[int, dict] = {}
    while True:
        for r in range(world):
            if r not in found:
                try:
                    found[r] = json.loads(_file(folder, loader, r).read_text())["changes"]
                except (OSError, ValueError, KeyError):
                    pass
        if len(found) == world or clock() >= deadline:
            break
        sleep(0.05)
    missing = [r for r in range(world) if r not in found]
    info: dict = {"world_size": world, "found": {str(r): c for r, c in sorted(found.items())}, "missing": missing}
    if missing:
        info["note"] = (
            f"rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} did not report within "
            f"{wait_s:g} s: this rank validates its own winner"
        )
        return changes, info
    key = {r: json.dumps(c, sort_keys=True) for r, c in found.items()}
    votes = Counter(key.values())
    top = max(votes.values())
    chosen_rank = min(r for r, k in key.items() if votes[k] == top)
    chosen = found[chosen_rank]
    info.update(chosen=chosen, from_ranks=sorted(r for r, k in key.items() if k == key[chosen_rank]))
    return chosen, info

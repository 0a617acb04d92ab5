"""A loader's saved state, as a training checkpoint holds it: `StatefulDataLoader.state_dict()` written with
torch.save (to a temporary file, then renamed, so a kill mid-write leaves the old file), and read back refusing
what cannot be trusted.

torchdata writes no version into its state, and a state taken by another version may load without complaint
and resume from the wrong place. So the file carries the torchdata and torch versions that wrote it, and a
state from another torchdata version is refused. A truncated or corrupt file is refused too: resuming from
zero instead would silently replay (or skip) a whole epoch.
"""

from __future__ import annotations

import os
from typing import Any

FORMAT = 1  # the layout of the saved file below


class CheckpointError(RuntimeError):
    """The saved loader state cannot be used: unreadable, not a loader state, or from another torchdata."""


def library_versions() -> dict[str, str]:
    import torch
    import torchdata

    return {"torchdata": str(torchdata.__version__), "torch": str(torch.__version__)}  # plain str: weights_only


def save_state(path: str, state: dict[str, Any]) -> int:
    """Write `state` (a loader's state_dict) with the versions that made it; returns the file's size in bytes."""
    import torch

    tmp = f"{path}.tmp"
    torch.save({"format": FORMAT, "versions": library_versions(), "loader": state}, tmp)
    os.replace(tmp, path)
    return os.path.getsize(path)


def load_state(path: str) -> dict[str, Any]:
    """The loader state saved at `path`; CheckpointError naming the file and what is wrong with it."""
    import torch

    try:
        saved = torch.load(path, weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no saved loader state there") from None
    except Exception as exc:  # noqa: BLE001 - torch.load raises many kinds on a damaged file; each means the same
        raise CheckpointError(
            f"{path}: the saved loader state is truncated or corrupt ({type(exc).__name__}: {str(exc)[:200]}); "
            f"resume from an intact checkpoint (starting the epoch from zero would replay or skip samples)"
        ) from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or not isinstance(saved.get("loader"), dict):
        raise CheckpointError(f"{path}: not a loader state saved by loaderbench (format {FORMAT})")
    ours, theirs = library_versions()["torchdata"], saved.get("versions", {}).get("torchdata")
    if theirs != ours:
        raise CheckpointError(
            f"{path}: the loader state was saved by torchdata {theirs} and this is torchdata {ours}; torchdata "
            f"does not convert states between versions: resume with torchdata {theirs}, or restart the epoch"
        )
    return saved["loader"]

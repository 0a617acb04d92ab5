"""What a failed cell's exception lets its user see: the frames of the traceback the main process holds (the ones
a debugger's post-mortem and an IDE can walk), and the frames only quoted in its message text (a DataLoader worker's
traceback, re-raised in the main process as text)."""

from __future__ import annotations

import re
import traceback
from pathlib import Path

_QUOTED = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
#: frames kept of each kind, the innermost
KEEP = 12


def _frame(path: str, line: int | str, name: str) -> str:
    return f"{Path(path).name}:{line}:{name}"


def frames_of(exc: BaseException) -> dict[str, list[str]]:
    """`held`: file:line:function of the main process's own traceback frames; `quoted`: those its message names
    (innermost last, at most KEEP of each)."""
    held = [_frame(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    quoted = [_frame(*m) for m in _QUOTED.findall(str(exc))]
    return {"held": held[-KEEP:], "quoted": quoted[-KEEP:]}

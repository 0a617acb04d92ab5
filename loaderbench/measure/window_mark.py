"""The cell's word to the runner that its last window has ended, sent while the loader's workers are still alive.

The runner's probe walks the page tables (PSS, USS) on a schedule of seconds and when RSS reaches a new high.
Pages a worker turns private under copy-on-write do not raise RSS, so in a cell shorter than the schedule the
last of that growth would never be read. At the mark the runner walks the whole tree once more and answers; the
cell waits for the answer (outside every window: after the last epoch's last step, before its iterator is
dropped) and goes on. A cell that no runner watches (a benchmark driving it in-process) has no pipes: the mark
is then a no-op.
"""

from __future__ import annotations

import os
import select

#: how long the cell waits for the runner's answer before it goes on without it
ANSWER_TIMEOUT_S = 10.0
MARK = b"m"
ANSWER = b"a"

_pipes: tuple[int, int, int] | None = None  # (the cell's pid, its write end of the mark, its read end of the answer)


def install(mark_w: int, answer_r: int) -> None:
    """In the forked cell: the pipes to the runner. Processes the cell forks inherit them but never mark."""
    global _pipes
    _pipes = (os.getpid(), mark_w, answer_r)


def window_ended(timeout_s: float = ANSWER_TIMEOUT_S) -> bool:
    """Tell the runner the last window has ended and wait until it has walked the tree; whether it answered."""
    if _pipes is None or _pipes[0] != os.getpid():
        return False
    _, mark_w, answer_r = _pipes
    try:
        os.write(mark_w, MARK)
    except OSError:
        return False
    ready, _, _ = select.select([answer_r], [], [], timeout_s)
    return bool(ready) and os.read(answer_r, 1) == ANSWER

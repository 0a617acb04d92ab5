"""Waiting for a quiet machine before a run begins: the run records the 1-minute load average it began at, and a
study is published as measured alone only where that was below QUIET_LOAD_PER_CPU of the logical CPUs. A run
started right after another (a study after a study) would otherwise inherit the load the last one left, which the
1-minute average takes a minute or two to forget.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from loaderbench.schema.disturbance import QUIET_LOAD_PER_CPU

#: seconds between two readings of the load average
POLL_S = 5.0


def wait_for_quiet(
    max_s: float,
    say: Callable[[str], None],
    cpus: int | None = None,
    load: Callable[[], float] = lambda: os.getloadavg()[0],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Wait until the 1-minute load average is below QUIET_LOAD_PER_CPU x `cpus` (default: this machine's logical
    CPUs), at most `max_s` seconds; whether it got there. Says what it waits for, and what it found."""
    limit = QUIET_LOAD_PER_CPU * (cpus or os.cpu_count() or 1)
    now = load()
    if now < limit:
        return True
    say(f"waiting up to {max_s:g} s for a quiet machine: load {now:.2f}, quiet below {limit:g}")
    deadline = clock() + max_s
    while clock() < deadline:
        sleep(min(POLL_S, max(0.0, deadline - clock())))
        now = load()
        if now < limit:
            say(f"quiet: load {now:.2f}")
            return True
    say(f"still not quiet after {max_s:g} s (load {now:.2f}): starting anyway; the records say so")
    return False

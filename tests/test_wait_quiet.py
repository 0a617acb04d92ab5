"""`loaderbench run --wait-quiet S`: the run begins once the 1-minute load average is below the share of the CPUs a
published study must begin at, or after S seconds (and says which)."""

from __future__ import annotations

import subprocess
import sys

from loaderbench.launch.quiet import POLL_S, wait_for_quiet
from loaderbench.schema.disturbance import QUIET_LOAD_PER_CPU


class FakeMachine:
    """A load average read from a list, a clock that only moves when the waiter sleeps."""

    def __init__(self, loads: list[float]):
        self.loads, self.t, self.said = list(loads), 0.0, []

    def load(self) -> float:
        return self.loads.pop(0) if len(self.loads) > 1 else self.loads[0]

    def sleep(self, s: float) -> None:
        self.t += s

    def wait(self, max_s: float) -> bool:
        return wait_for_quiet(max_s, self.said.append, 2, self.load, self.sleep, lambda: self.t)


def test_the_run_waits_until_the_load_falls_below_the_quiet_share_of_the_cpus():
    limit = QUIET_LOAD_PER_CPU * 2
    m = FakeMachine([limit + 0.8, limit + 0.3, limit - 0.01])
    assert m.wait(600) is True
    assert m.t == 2 * POLL_S and m.said[-1].startswith("quiet: load")


def test_a_machine_already_quiet_is_not_waited_for():
    m = FakeMachine([0.1])
    assert m.wait(600) is True and m.t == 0 and m.said == []


def test_a_machine_that_stays_busy_is_waited_for_at_most_the_given_seconds():
    m = FakeMachine([5.0])
    assert m.wait(12) is False
    assert m.t == 12 and "starting anyway" in m.said[-1]


def test_a_negative_wait_is_bad_input():
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench", "run", "quick", "--wait-quiet", "-1", "--results", "/nonexistent"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "--wait-quiet -1: allowed: a number of seconds, 0 or more" in out.stderr
    assert "Traceback" not in out.stderr

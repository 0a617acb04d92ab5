"""Required capabilities: a skip that CI cannot accept becomes a failure.

Some tests skip where the machine cannot run them (Slurm not installable, no root for a private /dev/shm, no
nginx). On a developer's laptop that is right; on CI, which runs as root and installs what it needs, such a skip
would hide a broken install. `LOADERBENCH_REQUIRE` lists the capabilities this run must have, comma separated
(`.ci/run` sets it when it runs as root):

    LOADERBENCH_REQUIRE=slurm,two-nodes,private-shm,storage

A skip whose reason belongs to a listed capability is reported as a failure that names the capability and the
skip reason; other skips stay skips. `tests/conftest.py` registers this plugin with `register(config)`.
"""

from __future__ import annotations

import os
import re

import pytest

ENV = "LOADERBENCH_REQUIRE"

#: each capability, and the skip reasons that say a test could not use it (searched in the reason)
CAPABILITIES: dict[str, re.Pattern[str]] = {
    "slurm": re.compile(r"Slurm is not installed|the Slurm test cluster needs|could not import 'submitit'"),
    "two-nodes": re.compile(r"two test nodes need"),
    "private-shm": re.compile(r"private\b[^.;]*/dev/shm"),
    "storage": re.compile(r"nginx is not installed"),
}


def required(value: str | None) -> list[str]:
    """The capabilities named in `value` (LOADERBENCH_REQUIRE); an unknown name is a usage error."""
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in CAPABILITIES]
    if unknown:
        raise pytest.UsageError(
            f"{ENV}: unknown capability {', '.join(map(repr, unknown))}; allowed: {', '.join(CAPABILITIES)}"
        )
    return names


def capability_of(reason: str, names: list[str]) -> str | None:
    """The required capability a skip reason belongs to, if any."""
    return next((n for n in names if CAPABILITIES[n].search(reason)), None)


def _skip_reason(longrepr) -> str:
    """The reason of a skip report: pytest keeps it as (path, line, "Skipped: reason")."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class RequiredCapabilities:
    def __init__(self, names: list[str]):
        self.names = names

    def _failure(self, report) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = _skip_reason(report.longrepr)
        name = capability_of(reason, self.names)
        if name is not None:
            report.outcome = "failed"
            report.longrepr = (
                f"required capability {name!r} ({ENV}={','.join(self.names)}) is missing here, "
                f"so this skip fails: {reason}"
            )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        self._failure(outcome.get_result())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        outcome = yield
        self._failure(outcome.get_result())


def register(config: pytest.Config) -> None:
    """Turn skips of the capabilities in LOADERBENCH_REQUIRE into failures (nothing when it is unset)."""
    names = required(os.environ.get(ENV))
    if names:
        config.pluginmanager.register(RequiredCapabilities(names), "loaderbench-required")

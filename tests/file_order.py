"""The order the test files run in, and the measurements behind it.

`make test` hands whole files to the pytest-xdist workers as they free up (`--dist loadfile`), so the long files
should start first instead of leaving one worker busy at the end. tests/durations.json holds the seconds each file
took in the last whole, green run; files are ordered longest first, and a file it does not list (new, or never
measured) runs before all of them, since it may be long. Every run measures its files (the setup, call and teardown
of each test, summed per file; under pytest-xdist on the controller, from every worker's reports); a run of the
whole suite that passed rewrites durations.json from those measurements. A partial run (-k, -m, --deselect,
--lf, some files or tests) or one with failures leaves it as it was."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ABOUT = (
    "seconds each test file took in the last whole run of the suite that passed (`make test`), written by "
    "tests/file_order.py at the end of that run; the files run longest first so that pytest-xdist's loadfile "
    "scheduling starts the long ones early, and a file not listed here runs before them all (it may be long)"
)


def file_of(nodeid: str) -> str:
    """The test file's name in a test id: "tests/test_x.py::test_y[a]" gives "test_x.py"."""
    return Path(nodeid.split("::", 1)[0]).name


def order_key(name: str, seconds: Mapping[str, float]) -> tuple[int, float]:
    """Sort key of a file: the files never measured first, then the measured ones longest first."""
    if name not in seconds:
        return (0, 0.0)
    return (1, -float(seconds[name]))


def ordered(names: Iterable[str], seconds: Mapping[str, float]) -> list[str]:
    """`names` in the order they run; a stable sort, so files of equal key keep the order they came in."""
    return sorted(names, key=lambda name: order_key(name, seconds))


def read_seconds(path: Path) -> dict[str, float]:
    """The seconds per file in `path`; none when it does not exist (every file then counts as never measured)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    try:
        seconds = json.loads(text)["seconds"]
        return {str(name): float(s) for name, s in seconds.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise pytest.UsageError(
            f'{path}: not a durations file ({exc!r}); expected {{"about": ..., "seconds": {{"test_x.py": 12, ...}}}}, '
            f"or delete it and the next whole run writes it again"
        ) from exc


def durations_json(seconds: Mapping[str, float]) -> str:
    """The file's text: the seconds per file rounded to whole seconds, longest first."""
    rounded = {name: round(seconds[name]) for name in ordered(seconds, seconds)}
    return json.dumps({"about": ABOUT, "seconds": rounded}, indent=1) + "\n"


def write_seconds(path: Path, seconds: Mapping[str, float]) -> None:
    """Replace `path` atomically: a run interrupted while writing leaves the previous file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(durations_json(seconds))
    os.replace(tmp, path)


def partial_because(
    args: Iterable[str], invocation_dir: Path, tests_dir: Path, narrowing: Mapping[str, object]
) -> str | None:
    """Why a run is not one of the whole suite, or None when it is. `args` are the paths or test ids the run was
    given (pytest's config.args, relative to `invocation_dir`); `narrowing` maps the options that select part of
    the suite to their values (an empty or false value narrows nothing)."""
    for option, value in narrowing.items():
        if value:
            return f"{option} {value!r}"
    tests_dir = tests_dir.resolve()
    for arg in args:
        path = Path(arg.split("::", 1)[0])
        path = (path if path.is_absolute() else invocation_dir / path).resolve()
        if "::" in arg or (path != tests_dir and path not in tests_dir.parents):
            return f"only {arg}"
    return None


class FileOrder:
    """The plugin: orders the collected tests, measures each file, and writes `durations` after a whole green run."""

    def __init__(self, durations: Path, tests_dir: Path):
        self.durations, self.tests_dir = durations, tests_dir
        self.measured: dict[str, float] = {}

    def pytest_collection_modifyitems(self, config, items):
        """Each file's tests stay in their own order; the files run in `ordered` order."""
        seconds = read_seconds(self.durations)
        items.sort(key=lambda item: order_key(file_of(item.nodeid), seconds))

    def pytest_runtest_logreport(self, report):
        name = file_of(report.nodeid)
        self.measured[name] = self.measured.get(name, 0.0) + float(getattr(report, "duration", 0.0) or 0.0)

    def pytest_sessionfinish(self, session, exitstatus):
        config = session.config
        if hasattr(config, "workerinput") or exitstatus != pytest.ExitCode.OK or not self.measured:
            return  # an xdist worker (its controller writes), a run with failures, or nothing run
        narrowing = {
            "-k": config.getoption("keyword", ""),
            "-m": config.getoption("markexpr", ""),
            "--deselect": config.getoption("deselect", None),
            "--lf": config.getoption("lf", False),
            "--sw": config.getoption("stepwise", False),
        }
        if partial_because(config.args, config.invocation_params.dir, self.tests_dir, narrowing) is None:
            write_seconds(self.durations, self.measured)

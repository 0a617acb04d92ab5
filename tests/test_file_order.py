"""The order the test files run in (tests/file_order.py): files never measured first, then the longest first, each
file's tests in their own order; a whole run that passed rewrites tests/durations.json from what it measured, and a
partial or failing run leaves it as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import file_order as fo
from tests.conftest import REPO

pytest_plugins = ["pytester"]


def test_files_never_measured_run_first_then_the_longest():
    seconds = {"test_short.py": 2, "test_long.py": 90, "test_mid.py": 30, "test_zero.py": 0}
    names = ["test_short.py", "test_new_a.py", "test_zero.py", "test_long.py", "test_new_b.py", "test_mid.py"]
    assert fo.ordered(names, seconds) == [
        "test_new_a.py",  # not measured: as they came, before every measured file
        "test_new_b.py",
        "test_long.py",
        "test_mid.py",
        "test_short.py",
        "test_zero.py",  # measured at 0 s is known, not new
    ]


def test_a_tests_file_is_named_by_its_id():
    assert fo.file_of("tests/test_x.py::test_y[a/b::c]") == "test_x.py"
    assert fo.file_of("tests/test_x.py::Class::test_y") == "test_x.py"
    assert fo.file_of("test_x.py") == "test_x.py"


def test_the_file_written_reads_back_rounded_and_longest_first(tmp_path):
    path = tmp_path / "durations.json"
    fo.write_seconds(path, {"test_a.py": 1.4, "test_b.py": 61.6, "test_c.py": 12.5})
    data = json.loads(path.read_text())
    assert list(data["seconds"].items()) == [("test_b.py", 62), ("test_c.py", 12), ("test_a.py", 1)]
    assert data["about"] == fo.ABOUT
    assert fo.read_seconds(path) == {"test_b.py": 62.0, "test_c.py": 12.0, "test_a.py": 1.0}
    assert [p.name for p in tmp_path.iterdir()] == ["durations.json"]  # no temporary file left beside it


def test_no_durations_file_means_every_file_is_new_and_a_broken_one_is_named(tmp_path):
    assert fo.read_seconds(tmp_path / "durations.json") == {}
    broken = tmp_path / "broken.json"
    broken.write_text('{"seconds": [1, 2]}')
    with pytest.raises(pytest.UsageError, match=rf"{broken}: not a durations file"):
        fo.read_seconds(broken)


def test_the_committed_durations_file_is_one_this_code_reads():
    seconds = fo.read_seconds(Path(fo.__file__).parent / "durations.json")
    assert seconds and all(name.startswith("test_") and name.endswith(".py") for name in seconds)


NONE: dict[str, object] = {"-k": "", "-m": "", "--deselect": None, "--lf": False, "--sw": False}


@pytest.mark.parametrize(
    "args, narrowing, why",
    [
        (["tests"], {}, None),  # testpaths, from the repository's root
        (["."], {}, None),  # a folder holding the suite
        ([str(REPO / "tests")], {}, None),
        (["tests"], {"-k": "slurm"}, "-k 'slurm'"),
        (["tests"], {"-m": "not slow"}, "-m 'not slow'"),
        (["tests"], {"--deselect": ["tests/test_x.py::test_y"]}, "--deselect ['tests/test_x.py::test_y']"),
        (["tests"], {"--lf": True}, "--lf True"),
        (["tests/test_cli.py"], {}, "only tests/test_cli.py"),
        (["tests", "tests/test_cli.py::test_help"], {}, "only tests/test_cli.py::test_help"),
        (["loaderbench"], {}, "only loaderbench"),
    ],
)
def test_a_partial_run_is_told_from_a_whole_one(args, narrowing, why):
    assert fo.partial_because(args, REPO, REPO / "tests", {**NONE, **narrowing}) == why


# --- real pytest runs of a small suite ------------------------------------------------------------------------

# Each test's call phase reports 1 s and its setup and teardown none, whatever they really took: the sums are known.
CONFTEST = """
from pathlib import Path

import pytest

from tests.file_order import FileOrder


def pytest_configure(config):
    here = Path(__file__).parent
    config.pluginmanager.register(FileOrder(here / "durations.json", here), "file-order")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.duration = 1.0 if report.when == "call" else 0.0
    return report
"""
SUITE = {
    "test_quick": "def test_one():\n    pass\n\ndef test_two():\n    pass\n",
    "test_single": "def test_one():\n    pass\n",
}


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(**SUITE)
    return pytester


def _written(pytester) -> dict | None:
    path = pytester.path / "durations.json"
    return json.loads(path.read_text()) if path.exists() else None


def _ran(result) -> list[str]:
    return [line.split("::")[0] for line in result.outlines if " PASSED" in line]


def test_a_whole_run_that_passes_writes_what_it_measured_and_the_next_run_orders_by_it(suite):
    first = suite.runpytest_inprocess("-p", "no:cacheprovider", "-v")
    assert _ran(first) == ["test_quick.py", "test_quick.py", "test_single.py"]  # no durations yet: as collected
    assert list(_written(suite)["seconds"].items()) == [("test_quick.py", 2), ("test_single.py", 1)]
    # the single test's file measured longer now, and a new file is not measured at all
    (suite.path / "durations.json").write_text(json.dumps({"seconds": {"test_quick.py": 1, "test_single.py": 50}}))
    suite.makepyfile(test_zz_new="def test_new():\n    pass\n")
    second = suite.runpytest_inprocess("-p", "no:cacheprovider", "-v")
    assert _ran(second) == ["test_zz_new.py", "test_single.py", "test_quick.py", "test_quick.py"]
    assert _written(suite)["seconds"] == {"test_quick.py": 2, "test_single.py": 1, "test_zz_new.py": 1}


@pytest.mark.parametrize(
    "args",
    [
        ("-k", "one"),
        ("-m", "not slow"),
        ("test_quick.py",),
        ("test_quick.py::test_one",),
        ("--deselect", "test_quick.py::test_two"),
    ],
    ids=["-k", "-m", "one file", "one test", "--deselect"],
)
def test_a_partial_run_leaves_the_durations_as_they_were(suite, args):
    before = '{"seconds": {"test_quick.py": 7}}'
    (suite.path / "durations.json").write_text(before)
    result = suite.runpytest_inprocess("-p", "no:cacheprovider", *args)
    assert result.ret == 0 and result.parseoutcomes()["passed"] >= 1
    assert (suite.path / "durations.json").read_text() == before


def test_a_run_with_a_failure_leaves_the_durations_as_they_were(suite):
    suite.makepyfile(test_fails="def test_fails():\n    assert False\n")
    before = '{"seconds": {"test_quick.py": 7}}'
    (suite.path / "durations.json").write_text(before)
    suite.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=3, failed=1)
    assert (suite.path / "durations.json").read_text() == before


def test_under_xdist_the_controller_sums_every_workers_reports(suite, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    suite.makepyfile(test_three="".join(f"def test_{i}():\n    pass\n\n" for i in "abc"))
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile")
    result.assert_outcomes(passed=6)
    assert _written(suite)["seconds"] == {"test_three.py": 3, "test_quick.py": 2, "test_single.py": 1}

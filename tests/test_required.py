"""LOADERBENCH_REQUIRE (tests/required.py): a skip of a required capability fails, naming the capability and the
reason; other skips, and every skip when nothing is required, stay skips; an unknown name is a usage error."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import required

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(REPO)!r})
from tests import required

def pytest_configure(config):
    required.register(config)
"""

SLURM_REASON = "Slurm is not installed (slurmctld missing) and not root and no password-less sudo: ..."
STORAGE_REASON = "nginx is not installed and installing it needs root: run tools/install-storage-tools.sh"

# the suite's own skip reasons, each in the way it is raised there
TESTS = f"""
import pytest

@pytest.fixture
def slurm_cluster():
    pytest.skip("{SLURM_REASON}")

def test_slurm(slurm_cluster):
    pass

def test_two_nodes():
    pytest.skip("two test nodes need ip(8) (iproute2) for their network namespaces")

@pytest.mark.skipif(True, reason="a private /dev/shm needs root (unshare --mount)")
def test_shm():
    pass

def test_storage():
    pytest.skip("{STORAGE_REASON}")

@pytest.mark.skipif(True, reason="no CUDA device here")
def test_gpu():
    pass
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_caps=TESTS)
    return pytester


def test_nothing_required_skips_stay_skips(suite: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.delenv(required.ENV, raising=False)
    suite.runpytest().assert_outcomes(skipped=5)


def outcomes(reprec) -> tuple[dict[str, str], list[str]]:
    """{test name: its failure's text} and the names of the skipped tests, from an inline run."""
    reports = reprec.getreports("pytest_runtest_logreport")
    failed = {r.nodeid.split("::")[-1]: str(r.longrepr) for r in reports if r.failed}
    return failed, sorted(r.nodeid.split("::")[-1] for r in reports if r.skipped)


def test_a_required_capability_turns_its_skips_into_failures(suite: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv(required.ENV, "slurm,two-nodes,private-shm,storage")
    failed, skipped = outcomes(suite.inline_run())
    assert skipped == ["test_gpu"]  # not a required capability: still a skip
    expect = {
        "test_slurm": "slurm",
        "test_two_nodes": "two-nodes",
        "test_shm": "private-shm",
        "test_storage": "storage",
    }
    assert set(failed) == set(expect)
    for test, name in expect.items():
        assert failed[test].startswith(f"required capability {name!r} ({required.ENV}="), failed[test]
    # the skip's own reason is kept
    assert failed["test_slurm"].endswith(SLURM_REASON)
    assert failed["test_storage"].endswith(STORAGE_REASON)
    result = suite.runpytest()  # and the run says so
    result.assert_outcomes(failed=2, errors=2, skipped=1)  # a skip in a fixture or a skipif mark fails at setup
    result.stdout.fnmatch_lines(["*required capability 'two-nodes'*two test nodes need ip(8)*"])


def test_only_the_listed_capabilities_fail(suite: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv(required.ENV, " storage ")
    failed, skipped = outcomes(suite.inline_run())
    assert list(failed) == ["test_storage"] and skipped == ["test_gpu", "test_shm", "test_slurm", "test_two_nodes"]


def test_a_module_skipped_while_collected_fails_too(pytester: pytest.Pytester, monkeypatch) -> None:
    """`pytest.importorskip("submitit")` at module level skips the whole file while it is collected."""
    pytester.makeconftest(CONFTEST)
    monkeypatch.setenv(required.ENV, "slurm")
    pytester.makepyfile(test_mod='import pytest\npytest.importorskip("submitit_not_here")\n\ndef test_x():\n    pass\n')
    pytester.runpytest().assert_outcomes(skipped=1)  # another module than submitit: no Slurm capability
    pytester.makepyfile(
        test_mod="import pytest\npytest.skip(\"could not import 'submitit': No module\", allow_module_level=True)\n"
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*required capability 'slurm'*could not import 'submitit'*"])


def test_an_unknown_capability_is_a_usage_error(suite: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv(required.ENV, "slurm,gpus")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*LOADERBENCH_REQUIRE: unknown capability 'gpus'; allowed: slurm, two-nodes, private-shm, storage*"]
    )


def test_the_suites_skip_reasons_map_to_their_capability() -> None:
    """The reasons the suite's tests really skip with (read from their source) each name their capability."""
    sources = {p.name: p.read_text() for p in (REPO / "tests").glob("*.py")}
    expect = {
        "slurm_fixtures.py": ["slurm", "two-nodes"],
        "test_shm_size.py": ["private-shm"],
        "test_faults.py": ["private-shm"],
        "test_storage_cells.py": ["storage"],
        "test_storage.py": ["storage"],
        "test_firewall.py": ["two-nodes"],
    }
    for name, caps in expect.items():
        reasons = re.findall(r'(?:skip\(|reason=)\s*f?"([^"]+)"', sources[name])
        found = {required.capability_of(r, list(required.CAPABILITIES)) for r in reasons}
        assert set(caps) <= found, (name, reasons)

"""The direction data flows in: planning and analysis stay light, so a laptop without torch (or a login node)
can validate, plan and analyse."""

import subprocess
import sys

import pytest

from tests.conftest import REPO


def imported_by(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in out.stdout.split()}


@pytest.mark.parametrize("module", ["suite.plan", "suite.study", "suite.store", "suite.cell"])
def test_planning_imports_neither_torch_nor_psutil(module):
    assert not imported_by(module) & {"torch", "torchvision", "psutil"}


@pytest.mark.parametrize("module", ["analysis.records", "analysis.stats", "analysis.aggregate"])
def test_analysis_never_imports_torch_or_the_harness(module):
    mods = imported_by(module)
    assert "torch" not in mods
    out = subprocess.run([sys.executable, "-c", f"import sys, {module}; print([m for m in sys.modules if m in "
                          "('suite.harness', 'suite.runner', 'suite.cellproc')])"], cwd=REPO, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"

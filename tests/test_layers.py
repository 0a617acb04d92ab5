"""What the import contracts in pyproject.toml (checked by `lint-imports` in `make test`) cannot say: which
modules a process really has loaded once it has run. The contracts see import statements; these tests see the
process that forks cells, after it has forked them."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

HEAVY = ("pandas", "matplotlib", "seaborn", "loaderbench.analysis")

TINY = """
[study]
name = "layers"
repetitions = 1
warmup_batches = 1
measure_batches = 2
[matrix]
workload = ["sleep"]
sleep_ms = [0.1]
num_workers = [0, 1]
batch_size = [4]
"""


def loaded_after(argv: list[str], cwd) -> dict:
    """Run `loaderbench ARGV` in a fresh interpreter; its exit code and which heavy modules it had loaded."""
    code = (
        "import json, sys\n"
        "from loaderbench.cli import main\n"
        f"rc = main({argv!r})\n"
        f"print(json.dumps({{'rc': rc, 'loaded': sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
        f"or m.startswith('loaderbench.analysis'))}}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "tune"])
def test_the_process_that_forks_cells_never_loads_pandas_or_the_analysis(command, tmp_path):
    study = tmp_path / "layers.toml"
    study.write_text(TINY)
    got = loaded_after([command, str(study), "--results", str(tmp_path / "results")], tmp_path)
    assert got["rc"] == 0
    assert got["loaded"] == []
    assert list((tmp_path / "results").rglob("*.json")), "no cell ran: the test would prove nothing"


def test_validating_and_planning_load_no_torch(tmp_path):
    """A login node without torch can validate and plan: the commands themselves, not only their modules."""
    study = tmp_path / "layers.toml"
    study.write_text(TINY)
    code = (
        "import json, sys\n"
        "from loaderbench.cli import main\n"
        f"assert main(['validate', {str(study)!r}]) == 0\n"
        f"assert main(['plan', {str(study)!r}, '--results', {str(tmp_path / 'r')!r}]) == 0\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision', 'psutil'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []

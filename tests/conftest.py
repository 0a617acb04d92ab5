import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.file_order import FileOrder  # noqa: E402 - importable once the checkout is on the path

os.environ.setdefault("LOADERBENCH_CACHE", str(REPO / ".cache"))
# Test modules ask torch.cuda.is_available() while they are collected, in every pytest worker; through the CUDA
# runtime that marks the worker so that every process it forks (the cells of the in-process runs) fails at its
# first CUDA call. Through NVML it leaves forks alone.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


def pytest_configure(config):
    """The test processes fork cells (the runner, embedded). A process whose torch has run an OpenMP parallel
    region (a model step, a large tensor op) forks children whose own OpenMP calls hang in libgomp, so the cells
    of a later test would time out. One intra-op thread here keeps the pool from ever starting; every cell sets
    its own thread count."""
    import torch

    from tests import required

    torch.set_num_threads(1)
    # the longest test files first, from the seconds each took in the last whole run that passed, which every
    # such run rewrites (tests/file_order.py)
    here = Path(__file__).parent
    config.pluginmanager.register(FileOrder(here / "durations.json", here), "file-order")
    required.register(config)  # LOADERBENCH_REQUIRE: skips CI cannot accept fail (tests/required.py)


@pytest.fixture
def kept(monkeypatch):
    """The figures style.save wrote, kept open (it closes them) until the test ends: [(figure, png path)]."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from loaderbench.analysis.figures import style

    figs, real_close, real_png = [], plt.close, style._write_png

    def keep(fig=None):
        if not isinstance(fig, Figure):
            real_close(fig)

    def write_png(fig, path, *args, **kwargs):
        real_png(fig, path, *args, **kwargs)
        figs.append((fig, path))

    monkeypatch.setattr(plt, "close", keep)
    monkeypatch.setattr(style, "_write_png", write_png)
    yield figs
    for fig, _ in figs:
        real_close(fig)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def study_file(tmp_path):
    """Write a study file from TOML text; returns its path."""

    def make(text: str, name: str = "study.toml") -> Path:
        return write(tmp_path / name, text)

    return make


@pytest.fixture(autouse=True)
def _cpus_given_back():
    """A test must leave this process the CPUs it found: a later test's cells pin inside them, and a narrowed
    mask fails them with a misleading "only 1 CPUs are allowed here"."""
    before = os.sched_getaffinity(0)
    yield
    after = os.sched_getaffinity(0)
    if after != before:
        os.sched_setaffinity(0, before)
        pytest.fail(f"the test left this process pinned to CPUs {sorted(after)} (it had {sorted(before)})")

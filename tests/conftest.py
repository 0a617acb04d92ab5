import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LOADERBENCH_CACHE", str(REPO / ".cache"))
# Test modules ask torch.cuda.is_available() while they are collected, in every pytest worker; through the CUDA
# runtime that marks the worker so that every process it forks (the cells of the in-process runs) fails at its
# first CUDA call. Through NVML it leaves forks alone.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")


@pytest.fixture
def kept(monkeypatch):
    """The figures style.save wrote, kept open (it closes them) until the test ends: [(figure, png path)]."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    figs, real_close, real_save = [], plt.close, Figure.savefig

    def keep(fig=None):
        if not isinstance(fig, Figure):
            real_close(fig)

    def savefig(fig, path, *args, **kwargs):
        real_save(fig, path, *args, **kwargs)
        if str(path).endswith(".png"):
            figs.append((fig, path))

    monkeypatch.setattr(plt, "close", keep)
    monkeypatch.setattr(Figure, "savefig", savefig)
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

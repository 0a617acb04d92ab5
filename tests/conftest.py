import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("LOADERBENCH_CACHE", str(REPO / ".cache"))


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def study_file(tmp_path):
    """Write a study file from TOML text; returns its path."""
    def make(text: str, name: str = "study.toml") -> Path:
        return write(tmp_path / name, text)
    return make

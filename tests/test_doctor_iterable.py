"""The doctor on an IterableDataset: its settings say so, whether its __iter__ splits the stream among workers is
read from its source, an unsplit stream with workers is warned about, and `--try` varies only what applies
(workers, not persistence across epochs) in a whole script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from loaderbench.doctor.abtest import candidate
from loaderbench.doctor.diagnosis import UNSPLIT, validated_text
from loaderbench.doctor.settings import read_settings
from tests.test_doctor import _doctor

REPO = Path(__file__).resolve().parent.parent


class Split(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(torch.tensor([i]) for i in range(start, 64, step))


class Whole(IterableDataset):
    def __iter__(self):
        return iter(torch.tensor([i]) for i in range(64))


def test_the_settings_tell_a_split_stream_from_a_whole_one():
    split, whole = read_settings(DataLoader(Split(), batch_size=4)), read_settings(DataLoader(Whole(), batch_size=4))
    assert split["iterable_dataset"] and whole["iterable_dataset"]
    assert split["splits_among_workers"] is True and whole["splits_among_workers"] is False
    assert read_settings(DataLoader(list(range(8)), batch_size=4))["splits_among_workers"] is None


def test_what_the_warning_says_is_what_the_loader_does():
    """Two workers over the unsplit stream really deliver every sample twice; over the split one, once."""
    for ds, times in ((Whole(), 2), (Split(), 1)):
        seen = torch.cat(list(DataLoader(ds, batch_size=4, num_workers=2))).flatten().tolist()
        assert sorted(seen) == sorted(list(range(64)) * times)
    from loaderbench.doctor.diagnosis import _warnings

    settings = read_settings(DataLoader(Whole(), batch_size=4, num_workers=2))
    (warning,) = [w for w in _warnings(settings, {}, {}) if UNSPLIT in w]
    assert warning.endswith("the loop sees each sample 2 times")
    assert not [w for w in _warnings(read_settings(DataLoader(Split(), batch_size=4, num_workers=2)), {}, {})]


def test_an_iterable_dataset_is_tried_with_more_workers_but_no_persistence():
    changes = candidate(read_settings(DataLoader(Split(), batch_size=4)), "data-bound", 4.0)
    assert changes == {"num_workers": 4}
    settings = read_settings(DataLoader(Whole(), batch_size=4))
    result = {"changes": {"num_workers": 2}, "ratio": 1.8, "low": 1.5, "high": 2.1, "rounds": 4}
    assert "once it splits its stream" in validated_text(result, settings)
    assert "once it splits" not in validated_text(result, read_settings(DataLoader(Split(), batch_size=4)))


SCRIPT = """
import time
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

class Stream(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(start, 48, step):
            time.sleep(0.004)
            yield torch.tensor([i])

if __name__ == "__main__":
    loader = DataLoader(Stream(), batch_size=2)
    steps = 0
    for epoch in range(20):
        for batch in loader:
            time.sleep(0.002)
            steps += 1
    print("script done", steps)
"""


@pytest.mark.slow
def test_a_script_over_an_iterable_dataset_is_diagnosed_and_its_try_runs(tmp_path):
    r = _doctor(tmp_path, SCRIPT, "--steps", "8", "--warmup", "2", "--headspace-steps", "3", "--try", "auto")
    out = tmp_path / "out"
    assert r.returncode == 0 and "script done" in r.stdout, r.stderr[-3000:]
    (lo,) = json.loads((out / "doctor.json").read_text())["processes"][0]["loaders"]
    assert lo["settings"]["iterable_dataset"] and lo["settings"]["splits_among_workers"] is True
    assert lo["verdict"].startswith("data-bound")
    assert "persistent_workers" not in lo["in_loop"]["changes"] and lo["in_loop"]["changes"]["num_workers"] >= 2
    assert lo["in_loop"]["rounds"] == 4

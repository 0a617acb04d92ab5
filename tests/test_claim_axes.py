"""What the claim studies' dataset extras do: an eager dataset of Python objects, and occasional stragglers."""

from __future__ import annotations

import pytest

from loaderbench.workloads import claim_axes
from loaderbench.workloads.claim_axes import DECODED_SHAPE, build_index, read_entry, straggle


def test_an_eager_dataset_of_python_objects_holds_each_image_as_its_rows():
    index = build_index("decoded_objects", 3)
    channels, height, width = DECODED_SHAPE
    assert len(index) == 3
    assert all(len(image) == channels * height and all(isinstance(r, bytes) for r in image) for image in index)
    assert {len(r) for r in index[1]} == {width}
    assert index[2][0] == bytes([2]) * width
    assert read_entry(index, 4) == channels * height * width  # sample 4 reads image 1, assembled from its rows


@pytest.fixture
def slept(monkeypatch):
    calls: list[float] = []
    monkeypatch.setattr(claim_axes.time, "sleep", calls.append)
    return calls


def test_occasional_stragglers_wait_on_every_nth_index_in_any_process(slept):
    straggle(10.0, [0, 1, 39, 40, 80, 81], every=40)
    assert slept == [pytest.approx(0.030)]  # indices 0, 40 and 80
    straggle(10.0, [1, 2, 3], every=40)
    assert len(slept) == 1  # no index divisible by 40: no wait


def test_the_permanent_straggler_is_worker_zero_only(slept):
    straggle(10.0, [0, 1, 2])  # the main process is no worker: no wait
    straggle(0.0, [0], every=40)  # no straggler at all
    assert slept == []

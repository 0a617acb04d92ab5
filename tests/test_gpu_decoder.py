"""decoder = "nvjpeg": decoding on the GPU in whichever process loads the sample. A study that pins its batches is
refused before anything runs (they are on the GPU already), and a cell where no CUDA device is visible fails with a
message that says so; the GPU path itself runs on a GPU node (results/reference/h200/gpu-decode)."""

from __future__ import annotations

import pytest

from loaderbench.errors import StudyError
from loaderbench.schema.cell import CellConfig
from loaderbench.study.study_file import parse_study
from loaderbench.workloads import jpeg


def cells(matrix: dict):
    raw = {"study": {"name": "g", "repetitions": 1}, "matrix": {"workload": "jpeg", **matrix}}
    return parse_study(raw, where="g.toml", max_cores=2).cells


def test_nvjpeg_is_an_allowed_decoder():
    (cell,) = cells({"decoder": "nvjpeg", "num_workers": 2})
    assert cell.config["decoder"] == "nvjpeg"


def test_nvjpeg_with_pinned_memory_is_refused_before_anything_runs():
    with pytest.raises(StudyError) as exc:
        cells({"decoder": ["torchvision", "nvjpeg"], "pin_memory": True})
    text = str(exc.value)
    assert text.startswith("g.toml: ") and 'decoder = "nvjpeg" with pin_memory = true' in text
    assert 'allowed: pin_memory = false with decoder = "nvjpeg"' in text
    assert cells({"decoder": "torchvision", "pin_memory": True})  # a CPU decoder pins as before


def cell(**axes) -> CellConfig:
    return CellConfig(**axes, warmup_batches=0, measure_batches=1, seed=0)


def test_nvjpeg_without_a_cuda_device_fails_the_cell_saying_so(monkeypatch):
    monkeypatch.setattr(jpeg.torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match='decoder = "nvjpeg" decodes on the GPU, and no CUDA device is visible'):
        jpeg.usable_decoder(cell(decoder="nvjpeg"))
    assert jpeg.usable_decoder(cell(decoder="torchvision")) == "torchvision"
    assert jpeg.usable_decoder(cell()) == "pil"


@pytest.mark.gpu
@pytest.mark.skipif(not jpeg.torch.cuda.is_available(), reason="no CUDA device here")
def test_nvjpeg_decodes_on_the_gpu_to_about_pils_pixels(tmp_path):
    """nvJPEG's IDCT and upsampling are not libjpeg-turbo's: the pixels agree within a few levels, not exactly."""
    import numpy as np
    import torch
    from PIL import Image

    from loaderbench.datasets import DatasetSpec, ensure_dataset

    images = ensure_dataset(DatasetSpec(kind="synthetic-jpeg", images=4), cache_dir=tmp_path, workers=1)
    for path in images.paths():
        got = jpeg.decode(str(path), "nvjpeg")
        with Image.open(path) as img:
            expected = torch.from_numpy(np.array(img.convert("RGB"))).permute(2, 0, 1)
        assert (got.dtype, got.device.type, got.shape) == (torch.uint8, "cuda", expected.shape), path
        diff = (got.cpu().int() - expected.int()).abs().float()
        assert diff.mean() < 2 and diff.max() <= 64, (path, diff.mean(), diff.max())

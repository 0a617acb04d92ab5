"""loaderbench.datasets: the synthetic JPEG generator, its cache, verification, and ImageFolder scanning."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pytest
from PIL import Image

from loaderbench import datasets as ds
from loaderbench.datasets import (
    DatasetError,
    DatasetSpec,
    PreparedDataset,
    ensure_dataset,
    manifest,
    recipes,
    synthesis,
    verify_dataset,
)
from loaderbench.datasets import by_hand as cli

TINY = {"scale": 0.1}  # ~50x38 px images: the whole pipeline, in milliseconds


def synth(images: int = 8, **kw) -> DatasetSpec:
    return DatasetSpec(kind="synthetic-jpeg", images=images, **kw)


def make_tiny(cache: Path, images: int = 8, workers: int = 1, overrides: dict | None = None) -> PreparedDataset:
    return ensure_dataset(synth(images), cache_dir=cache, workers=workers, overrides=overrides or TINY)


def file_bytes(d: PreparedDataset) -> dict[str, bytes]:
    return {f: (d.root / f).read_bytes() for f in d.files}


# ----------------------------------------------------------------------------- generation


def test_tiny_dataset_layout_manifest_and_summary(tmp_path):
    d = make_tiny(tmp_path, images=8)
    assert d.root.parent == tmp_path and d.root.name.startswith("synthetic-jpeg-n8-")
    assert len(d.files) == len(d.labels) == 8
    assert list(d.files) == sorted(d.files)
    # fewer images than classes: one class per image, no empty class folder
    assert sorted({f.split("/")[0] for f in d.files}) == [f"class_{c:03d}" for c in range(8)]
    assert sorted(p.name for p in d.root.iterdir() if p.is_dir()) == [f"class_{c:03d}" for c in range(8)]
    for f, label in zip(d.files, d.labels):
        assert f == f"class_{label:03d}/{Path(f).name}" and f.endswith(".jpg")
    man = json.loads((d.root / "manifest.json").read_text())
    assert man["digest"] == d.digest and len(d.digest) == 64
    for row in man["files"]:
        data = (d.root / row["path"]).read_bytes()
        assert len(data) == row["bytes"]
        with Image.open(io.BytesIO(data)) as im:
            assert im.format == "JPEG" and im.size == (row["width"], row["height"])
            assert im.convert("RGB").size == im.size
    s = d.summary
    assert s["n"] == 8 and s["classes"] == 8 and s["kind"] == "synthetic-jpeg"
    for key in ("mean_bytes", "median_bytes", "mean_width", "mean_height", "total_bytes", "p90_bytes"):
        assert s[key] > 0, key
    json.dumps(s)  # goes into result records as is
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


def test_same_spec_twice_same_bytes_and_digest(tmp_path):
    a = make_tiny(tmp_path / "a", images=16)
    b = make_tiny(tmp_path / "b", images=16)
    assert a.digest == b.digest and a.files == b.files and a.labels == b.labels
    assert file_bytes(a) == file_bytes(b)


def test_parallel_generation_matches_serial(tmp_path):
    # 32 images with 2 workers goes through the spawn process pool; per-index seeding
    # makes the result independent of how the work was split.
    serial = make_tiny(tmp_path / "serial", images=32, workers=1)
    parallel = make_tiny(tmp_path / "parallel", images=32, workers=2)
    assert parallel.digest == serial.digest
    assert file_bytes(parallel) == file_bytes(serial)
    man = json.loads((parallel.root / "manifest.json").read_text())
    assert man["generation_workers"] == 2


def test_second_ensure_reuses_the_cache(tmp_path, monkeypatch):
    first = make_tiny(tmp_path)

    def boom(*a, **k):
        raise AssertionError("regenerated a valid cache entry")

    monkeypatch.setattr("loaderbench.datasets.cache._generate_into", boom)
    again = make_tiny(tmp_path)
    assert again == first and again.summary == first.summary


def test_recipe_change_makes_a_new_dataset(tmp_path):
    a = make_tiny(tmp_path, overrides={"scale": 0.1})
    b = make_tiny(tmp_path, overrides={"scale": 0.1, "seed": 7})
    c = make_tiny(tmp_path, images=9)
    assert len({a.root, b.root, c.root}) == 3
    assert len({a.digest, b.digest, c.digest}) == 3
    assert a.root.is_dir()  # the old entry is left alone


def test_default_cache_dir_follows_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADERBENCH_CACHE", str(tmp_path / "c"))
    assert ds.default_cache_dir() == tmp_path / "c" / "datasets"
    d = ensure_dataset(synth(8), workers=1, overrides=TINY)
    assert d.root.parent == tmp_path / "c" / "datasets"


def test_real_recipe_is_imagenet_like():
    recipe = ds.load_recipe("synthetic-jpeg")
    rows = [ds.generate_image(recipe, i) for i in range(24)]
    sizes = [len(b) for b, _ in rows]
    widths = [m["width"] for _, m in rows]
    assert 40_000 < sum(sizes) / len(sizes) < 250_000
    assert 300 < sum(widths) / len(widths) < 700
    assert max(m["quality"] for _, m in rows) <= 98


# ----------------------------------------------------------------------------- atomicity & verification


def test_leftover_temp_dir_is_cleaned_and_never_used(tmp_path):
    good = make_tiny(tmp_path)
    name = good.root.name
    shutil.rmtree(good.root)
    # what a generation killed half-way (SIGKILL, node failure) leaves behind: a temp
    # folder, possibly even with a manifest, on this host by a process that is gone
    dead = tmp_path / f".tmp-{name}-{socket.gethostname()}-999999999-deadbeef"
    (dead / "class_000").mkdir(parents=True)
    (dead / "class_000" / "img_00000.jpg").write_bytes(b"\xff\xd8 half a jpeg")
    (dead / "manifest.json").write_text("{}")
    # and one from another host that might still be running (shared filesystem): kept
    other = tmp_path / f".tmp-{name}-some-other-node-1234-cafef00d"
    other.mkdir()
    d = make_tiny(tmp_path)
    assert d.root == good.root and d.digest == good.digest
    assert not dead.exists()
    assert other.exists()
    assert file_bytes(d) == {f: (d.root / f).read_bytes() for f in good.files}


def test_truncated_file_is_detected_and_regenerated(tmp_path, caplog):
    good = make_tiny(tmp_path)
    before = file_bytes(good)
    victim = good.root / good.files[3]
    victim.write_bytes(before[good.files[3]][:100])
    with pytest.raises(DatasetError, match="truncated"):
        verify_dataset(good.root)
    with caplog.at_level(logging.WARNING, logger="loaderbench.datasets"):
        again = make_tiny(tmp_path)
    assert "generating it again" in caplog.text and str(victim) in caplog.text
    assert again.digest == good.digest and file_bytes(again) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


@pytest.mark.parametrize("damage", ["manifest", "extra", "missing"])
def test_incomplete_entry_is_regenerated(tmp_path, damage, caplog):
    good = make_tiny(tmp_path)
    if damage == "manifest":
        (good.root / "manifest.json").unlink()
    elif damage == "extra":
        (good.root / "class_000" / "stray.jpg").write_bytes(b"x")
    else:
        (good.root / good.files[0]).unlink()
    with caplog.at_level(logging.WARNING, logger="loaderbench.datasets"):
        again = make_tiny(tmp_path)
    assert "generating it again" in caplog.text
    assert again.digest == good.digest
    verify_dataset(again, full=True)


def test_full_verify_catches_same_size_corruption(tmp_path):
    good = make_tiny(tmp_path)
    victim = good.root / good.files[-1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match="sha256") as err:
        verify_dataset(good, full=True)
    assert str(victim) in str(err.value)


def test_tampered_manifest_is_rejected(tmp_path):
    good = make_tiny(tmp_path)
    mpath = good.root / "manifest.json"
    man = json.loads(mpath.read_text())
    man["files"][0]["label"] = 5
    mpath.write_text(json.dumps(man))
    with pytest.raises(DatasetError, match="digest"):
        verify_dataset(good.root)


def _ensure_in_child(cache: str) -> str:
    return make_tiny(Path(cache)).digest


def test_concurrent_ensures_agree(tmp_path):
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        digests = list(pool.map(_ensure_in_child, [str(tmp_path)] * 2))
    assert digests[0] == digests[1]
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == [make_tiny(tmp_path).root.name]


# ----------------------------------------------------------------------------- imagefolder


def _jpeg(path: Path, size=(40, 30), colour=(200, 50, 50)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path, "JPEG", quality=90)


def test_imagefolder_scan(tmp_path):
    root = tmp_path / "tree"
    _jpeg(root / "dog" / "b.jpg")
    _jpeg(root / "dog" / "a.JPEG", size=(60, 20))
    _jpeg(root / "cat" / "z.jpeg")
    _jpeg(root / "cat" / "nested" / "y.jpg")
    (root / "cat" / "notes.txt").write_text("not an image")
    d = ensure_dataset(DatasetSpec(kind="imagefolder", path=str(root)))
    assert d.root == root.resolve()
    # torchvision's order: class, then folder (os.walk sorted), then name
    assert d.files == ("cat/z.jpeg", "cat/nested/y.jpg", "dog/a.JPEG", "dog/b.jpg")
    assert d.labels == (0, 0, 1, 1)
    s = d.summary
    assert s["kind"] == "imagefolder" and s["n"] == 4 and s["classes"] == 2 and s["ignored_files"] == 1
    assert s["mean_width"] == pytest.approx((40 * 3 + 60) / 4)
    again = ensure_dataset(DatasetSpec(kind="imagefolder", path=str(root)))
    assert again.digest == d.digest
    assert verify_dataset(d).digest == d.digest
    _jpeg(root / "dog" / "c.jpg")
    assert ds.scan_imagefolder(root).digest != d.digest
    with pytest.raises(DatasetError, match="changed"):
        verify_dataset(d)


def test_labels_agree_with_torchvision_imagefolder(tmp_path):
    tv = pytest.importorskip("torchvision.datasets")
    d = make_tiny(tmp_path / "cache", images=12)
    ref = tv.ImageFolder(str(d.root))
    assert [(Path(p).relative_to(d.root).as_posix(), y) for p, y in ref.samples] == list(zip(d.files, d.labels))
    scanned = ds.scan_imagefolder(d.root)
    assert scanned.files == d.files and scanned.labels == d.labels
    # a real-world tree with nested folders and mixed-case suffixes
    root = tmp_path / "tree"
    for rel in ("n02/x.JPEG", "n01/sub/b.jpg", "n01/a.jpg", "n01/sub/a.jpeg", "n03/deep/er/q.jpg"):
        _jpeg(root / rel)
    ref = tv.ImageFolder(str(root))
    got = ds.scan_imagefolder(root)
    assert [(Path(p).relative_to(root).as_posix(), y) for p, y in ref.samples] == list(zip(got.files, got.labels))


@pytest.mark.parametrize("case", ["missing", "file", "empty", "no_jpegs", "empty_class"])
def test_imagefolder_bad_paths(tmp_path, case):
    root = tmp_path / "data"
    if case == "file":
        root.write_text("x")
    elif case == "empty":
        root.mkdir()
    elif case == "no_jpegs":
        (root / "a").mkdir(parents=True)
        (root / "a" / "x.png").write_bytes(b"png")
    elif case == "empty_class":
        _jpeg(root / "a" / "x.jpg")
        (root / "b").mkdir()
    with pytest.raises(DatasetError) as err:
        ensure_dataset(DatasetSpec(kind="imagefolder", path=str(root)))
    msg = str(err.value)
    assert "dataset.path" in msg and str(root) in msg


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "spec, key",
    [
        (DatasetSpec(kind="webdataset"), "dataset.kind"),
        (DatasetSpec(kind="synthetic-jpeg", images=0), "dataset.images"),
        (DatasetSpec(kind="synthetic-jpeg", images=True), "dataset.images"),
        (DatasetSpec(kind="synthetic-jpeg", path="/data"), "dataset.path"),
        (DatasetSpec(kind="imagefolder"), "dataset.path"),
        (DatasetSpec(kind="synthetic-jpeg", recipe="no-such-recipe"), "dataset.recipe"),
    ],
)
def test_bad_spec_names_the_key(tmp_path, spec, key):
    with pytest.raises(DatasetError, match=key.replace(".", r"\.")):
        ensure_dataset(spec, cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_missing_recipe_names_the_file(tmp_path):
    with pytest.raises(DatasetError) as err:
        ensure_dataset(synth(recipe="no-such-recipe"), cache_dir=tmp_path)
    assert "no-such-recipe.toml" in str(err.value) and "synthetic-jpeg" in str(err.value)


def test_from_table(tmp_path):
    assert DatasetSpec.from_table({"kind": "synthetic-jpeg", "images": 8}) == synth(8)
    with pytest.raises(DatasetError, match="imgs"):
        DatasetSpec.from_table({"kind": "synthetic-jpeg", "imgs": 8})
    with pytest.raises(DatasetError, match="kind"):
        DatasetSpec.from_table({"images": 8})


def test_bad_recipe_and_overrides(tmp_path):
    with pytest.raises(DatasetError, match="colour"):
        make_tiny(tmp_path, overrides={"colour": 1})
    with pytest.raises(DatasetError, match=r"jpeg\.subsampling"):
        make_tiny(tmp_path, overrides={"jpeg": {"subsampling": "4:1:1"}})
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = 1\n")
    with pytest.raises(DatasetError, match=r"bad\.toml.*missing key classes"):
        ensure_dataset(synth(8, recipe=str(bad)), cache_dir=tmp_path)
    with pytest.raises(DatasetError, match="workers"):
        ensure_dataset(synth(8), cache_dir=tmp_path, workers=0, overrides=TINY)


def test_recipe_file_path_works(tmp_path):
    copy = tmp_path / "mine.toml"
    copy.write_text((recipes.RECIPE_DIR / "synthetic-jpeg.toml").read_text())
    d = ensure_dataset(synth(8, recipe=str(copy)), cache_dir=tmp_path / "c", workers=1, overrides=TINY)
    assert d.root.name.startswith("mine-n8-")
    assert d.digest == make_tiny(tmp_path / "d").digest  # same parameters, same bytes


# ----------------------------------------------------------------------------- helpers & CLI


def test_smooth_fft_lengths():
    def smooth(n):
        for p in (2, 3, 5):
            while n % p == 0:
                n //= p
        return n == 1

    for n in range(1, 3000):
        m = synthesis._smooth_len(n)
        assert m >= n and smooth(m) and not any(smooth(k) for k in range(n, m)), n


def test_cli_prints_summary(tmp_path, capsys):
    _jpeg(tmp_path / "tree" / "a" / "x.jpg")
    assert cli.main(["--path", str(tmp_path / "tree")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["n"] == 1 and len(out["digest"]) == 64
    assert cli.main(["--path", str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in capsys.readouterr().err


def test_sha256_file_matches_hashlib(tmp_path):
    f = tmp_path / "blob"
    data = os.urandom(3 * (1 << 20) + 5)  # more than one read block
    f.write_bytes(data)
    assert manifest.sha256_file(f) == manifest.sha256_file(str(f)) == hashlib.sha256(data).hexdigest()
    with pytest.raises(OSError):
        manifest.sha256_file(tmp_path / "missing")


def test_cli_runs_as_a_module():
    out = subprocess.run(
        [sys.executable, "-m", "loaderbench.datasets", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "--images" in out.stdout

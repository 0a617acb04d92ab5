"""Datasets for loaderbench: the embedded synthetic JPEG set and real ImageFolder trees.

The rest of the suite calls :func:`ensure_dataset` with a :class:`DatasetSpec` (a study
file's ``[dataset]`` table) and gets back a :class:`PreparedDataset`: an ImageFolder root,
the sorted relative file paths, their class labels, a digest that identifies exactly those
files, and summary statistics for the result records.

``synthetic-jpeg``
    Photo-like JPEGs made from a recipe (``datasets/<recipe>.toml``) with numpy and Pillow
    only.  Image ``i`` is made from its own random stream ``SeedSequence([seed, i])``, so
    the set is the same whatever the number of worker processes.  Generation goes into a
    hidden temporary folder next to the cache entry; ``manifest.json`` (per-file sha256 and
    byte size, summary) is written last, every file is hashed again, and only then is the
    folder renamed into place.  A cache entry is therefore either complete or absent; a
    killed generation leaves only a ``.tmp-*`` folder, which is removed by the next one.
    Every :func:`ensure_dataset` checks the manifest, the file list, every file's size and
    the hash of a random sample of files; :func:`verify_dataset` with ``full=True`` hashes
    everything.  A cache entry that fails is moved aside and generated again, with a
    warning.  The entry's folder name holds a hash of the recipe parameters, the image
    count and the generator version, so changing any of them makes a new dataset.

    The bytes (and so the digest) are the same from run to run and machine to machine as
    long as numpy, Pillow and its libjpeg-turbo are the same versions; the manifest
    records those versions.

``imagefolder``
    An existing tree ``root/<class>/**/*.jpg|jpeg`` (any case).  Classes and files are
    ordered the way ``torchvision.datasets.ImageFolder`` orders them, so labels agree with
    it.  Its digest covers the relative paths, labels and byte sizes (hashing a real
    ImageNet on every run would cost minutes), not the file contents.

``python -m suite.dataset --images N`` generates (or checks) a dataset by hand and prints
its summary.
"""

from __future__ import annotations

import argparse
import colorsys
import hashlib
import io
import json
import logging
import math
import os
import random
import shutil
import socket
import statistics
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

try:  # Python >= 3.11
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as _toml  # type: ignore[no-redef]

__all__ = [
    "DatasetSpec",
    "DatasetError",
    "PreparedDataset",
    "ensure_dataset",
    "verify_dataset",
    "scan_imagefolder",
    "load_recipe",
    "generate_image",
    "default_cache_dir",
    "KINDS",
]

log = logging.getLogger(__name__)

#: Bump whenever the generator's output for a given recipe changes; it is part of the
#: cache key, so old cache entries are simply not used any more.
GENERATOR_VERSION = 1
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "loaderbench-dataset/1"
KINDS = ("synthetic-jpeg", "imagefolder")
JPEG_SUFFIXES = (".jpg", ".jpeg")  # compared lower-cased, so .JPEG and .JPG count too
REPO_ROOT = Path(__file__).resolve().parent.parent
RECIPE_DIR = REPO_ROOT / "datasets"
#: Files whose sha256 is checked on every ensure_dataset (the rest: size only).
CHEAP_HASH_SAMPLE = 16
#: Below this many images the pool's start-up costs more than it saves.
MIN_IMAGES_FOR_POOL = 32


class DatasetError(Exception):
    """A dataset cannot be used; the message names the path or key, the fault and the fix."""


class _CorruptDataset(DatasetError):
    """A cache entry or temporary folder fails verification (internal: it is regenerated)."""


# --------------------------------------------------------------------------------------
# public data types


@dataclass(frozen=True)
class DatasetSpec:
    """What a study asks for: its ``[dataset]`` table."""

    kind: str  # "synthetic-jpeg" | "imagefolder"
    images: int = 1024  # synthetic only: how many images to generate
    path: str | None = None  # imagefolder only: root of an ImageFolder tree
    recipe: str = "synthetic-jpeg"  # synthetic only: name of datasets/<recipe>.toml (or a .toml path)

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "dataset") -> "DatasetSpec":
        """Build from a parsed TOML table, with DatasetErrors that name ``where.key``."""
        if not isinstance(table, Mapping):
            raise DatasetError(f"[{where}] must be a table, got {type(table).__name__}")
        known = {"kind", "images", "path", "recipe"}
        unknown = sorted(set(table) - known)
        if unknown:
            raise DatasetError(
                f"[{where}] has unknown key(s) {', '.join(unknown)}; "
                f"allowed keys: {', '.join(sorted(known))}"
            )
        if "kind" not in table:
            raise DatasetError(f"[{where}] needs kind = one of {', '.join(map(repr, KINDS))}")
        spec = cls(**dict(table))
        spec.validate(where)
        return spec

    def validate(self, where: str = "dataset") -> None:
        """Raise DatasetError naming ``where.key`` if the spec cannot be satisfied as given."""
        if self.kind not in KINDS:
            raise DatasetError(
                f"{where}.kind: unknown dataset kind {self.kind!r}; "
                f"use one of {', '.join(map(repr, KINDS))}"
            )
        if self.kind == "synthetic-jpeg":
            if isinstance(self.images, bool) or not isinstance(self.images, int) or self.images < 1:
                raise DatasetError(
                    f"{where}.images: must be a whole number >= 1, got {self.images!r}"
                )
            if self.path is not None:
                raise DatasetError(
                    f"{where}.path: is only used with kind = 'imagefolder' "
                    f"(kind is 'synthetic-jpeg'); remove it or change the kind"
                )
            if not isinstance(self.recipe, str) or not self.recipe.strip():
                raise DatasetError(
                    f"{where}.recipe: must be a recipe name (datasets/<name>.toml) or a .toml path, "
                    f"got {self.recipe!r}"
                )
        else:
            if self.path is None or not isinstance(self.path, (str, os.PathLike)) or not str(self.path).strip():
                raise DatasetError(
                    f"{where}.path: kind = 'imagefolder' needs path = the root folder of an "
                    f"ImageFolder tree (one sub-folder per class holding .jpg/.jpeg files)"
                )


@dataclass(frozen=True)
class PreparedDataset:
    """A dataset ready to read: verified, with a deterministic file order."""

    root: Path  # ImageFolder root
    # relative paths ('/'-separated), deterministic: by class, then folder, then name, as
    # torchvision's ImageFolder orders them (plain sorted order for flat class folders)
    files: tuple[str, ...]
    labels: tuple[int, ...]  # class index per file
    digest: str  # sha256 over the manifest (identifies exactly these files)
    summary: dict = field(compare=False)  # n, mean_bytes, median_bytes, mean_width, ... (for result records)

    def __len__(self) -> int:
        return len(self.files)

    def paths(self) -> list[Path]:
        """Absolute paths, in ``files`` order."""
        return [self.root / f for f in self.files]


# --------------------------------------------------------------------------------------
# recipes

# The schema of a recipe: section -> key -> (type, check). Every key is required, so a
# recipe file is a complete description and its hash covers everything that shapes it.
_NUM = (int, float)
_RECIPE_SCHEMA: dict[str, dict[str, tuple[type | tuple[type, ...], Any]]] = {
    "": {
        "seed": (int, lambda v: v >= 0),
        "classes": (int, lambda v: v >= 1),
        "scale": (_NUM, lambda v: 0 < v <= 8),
        "grayscale_fraction": (_NUM, lambda v: 0 <= v <= 1),
    },
    "dimensions": {
        "fixed": (list, None),  # checked separately: [[width, height, weight], ...]
        "free_long_median": (_NUM, lambda v: v >= 8),
        "free_long_sigma": (_NUM, lambda v: v >= 0),
        "free_long_min": (int, lambda v: v >= 8),
        "free_long_max": (int, lambda v: v >= 8),
        "free_aspect_min": (_NUM, lambda v: 0.1 <= v <= 1),
        "free_aspect_max": (_NUM, lambda v: 0.1 <= v <= 1),
        "free_portrait_fraction": (_NUM, lambda v: 0 <= v <= 1),
    },
    "scene": {
        "shapes_min": (int, lambda v: v >= 0),
        "shapes_max": (int, lambda v: v >= 0),
        "smooth_fraction": (_NUM, lambda v: 0 <= v <= 1),
        "blur_min": (_NUM, lambda v: v >= 0),
        "blur_max": (_NUM, lambda v: v >= 0),
        "shading": (_NUM, lambda v: 0 <= v <= 1),
        "spectrum_slope_min": (_NUM, lambda v: 0 <= v <= 3),
        "spectrum_slope_max": (_NUM, lambda v: 0 <= v <= 3),
        "texture_median": (_NUM, lambda v: 0 <= v <= 2),
        "texture_sigma": (_NUM, lambda v: 0 <= v <= 2),
        "texture_max": (_NUM, lambda v: 0 <= v <= 4),
        "noise_min": (_NUM, lambda v: 0 <= v <= 64),
        "noise_max": (_NUM, lambda v: 0 <= v <= 64),
    },
    "jpeg": {
        "quality_values": (list, None),
        "quality_weights": (list, None),
        "subsampling": (str, lambda v: v in ("4:4:4", "4:2:2", "4:2:0")),
        "progressive_fraction": (_NUM, lambda v: 0 <= v <= 1),
    },
}


def _recipe_path(name: str) -> Path:
    p = Path(name).expanduser()
    if name.endswith(".toml") or os.sep in name or "/" in name:
        return p
    return RECIPE_DIR / f"{name}.toml"


def _deep_merge(base: dict, over: Mapping, where: str) -> dict:
    out = dict(base)
    for k, v in over.items():
        if k not in base:
            raise DatasetError(f"recipe override {where}{k}: no such recipe key; known: {', '.join(sorted(base))}")
        if isinstance(base[k], dict):
            if not isinstance(v, Mapping):
                raise DatasetError(f"recipe override {where}{k}: must be a table")
            out[k] = _deep_merge(base[k], v, f"{where}{k}.")
        else:
            out[k] = v
    return out


def load_recipe(recipe: str = "synthetic-jpeg", overrides: Mapping[str, Any] | None = None) -> dict:
    """Read ``datasets/<recipe>.toml`` (or a .toml path), apply ``overrides``, validate.

    ``overrides`` is a nested mapping with the recipe's own keys, e.g.
    ``{"scale": 0.1, "jpeg": {"quality_values": [90], "quality_weights": [1]}}``.
    Returns a plain dict (the exact parameters that go into the cache key).
    """
    path = _recipe_path(recipe)
    if not path.is_file():
        available = sorted(p.stem for p in RECIPE_DIR.glob("*.toml")) if RECIPE_DIR.is_dir() else []
        raise DatasetError(
            f"dataset.recipe: recipe file {path} does not exist; use one of "
            f"{', '.join(available) or '(none found in ' + str(RECIPE_DIR) + ')'} or a path to a .toml file"
        )
    try:
        with path.open("rb") as fh:
            data = _toml.load(fh)
    except (OSError, _toml.TOMLDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read the recipe: {exc}") from exc
    if overrides:
        data = _deep_merge(data, overrides, "")
    return _validate_recipe(data, str(path))


def _validate_recipe(data: Mapping[str, Any], where: str) -> dict:
    out: dict[str, Any] = {}
    for section, keys in _RECIPE_SCHEMA.items():
        table = data if section == "" else data.get(section)
        if not isinstance(table, Mapping):
            raise DatasetError(f"{where}: missing table [{section}]")
        expected = set(keys) | (set(_RECIPE_SCHEMA) - {""} if section == "" else set())
        extra = sorted(set(table) - expected)
        if extra:
            raise DatasetError(
                f"{where}: unknown key(s) {', '.join((section + '.' if section else '') + e for e in extra)}"
            )
        target = out if section == "" else out.setdefault(section, {})
        for key, (typ, check) in keys.items():
            dotted = f"{section}.{key}" if section else key
            if key not in table:
                raise DatasetError(f"{where}: missing key {dotted}")
            v = table[key]
            if isinstance(v, bool) or not isinstance(v, typ):
                raise DatasetError(f"{where}: {dotted} has the wrong type ({type(v).__name__}): {v!r}")
            if check is not None and not check(v):
                raise DatasetError(f"{where}: {dotted} = {v!r} is out of range")
            target[key] = float(v) if typ is _NUM else v
    dims, scene, jpeg = out["dimensions"], out["scene"], out["jpeg"]
    fixed = []
    for i, row in enumerate(dims["fixed"]):
        ok = (
            isinstance(row, list) and len(row) == 3
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 8 for x in row[:2])
            and isinstance(row[2], _NUM) and not isinstance(row[2], bool) and row[2] >= 0
        )
        if not ok:
            raise DatasetError(f"{where}: dimensions.fixed[{i}] must be [width, height, weight], got {row!r}")
        fixed.append([row[0], row[1], float(row[2])])
    if sum(r[2] for r in fixed) > 1 + 1e-9:
        raise DatasetError(f"{where}: dimensions.fixed weights add up to more than 1")
    dims["fixed"] = fixed
    for lo, hi, d in (("free_long_min", "free_long_max", dims), ("free_aspect_min", "free_aspect_max", dims),
                      ("shapes_min", "shapes_max", scene), ("blur_min", "blur_max", scene),
                      ("spectrum_slope_min", "spectrum_slope_max", scene), ("noise_min", "noise_max", scene)):
        if d[lo] > d[hi]:
            raise DatasetError(f"{where}: {lo} = {d[lo]} is larger than {hi} = {d[hi]}")
    qv, qw = jpeg["quality_values"], jpeg["quality_weights"]
    if (not qv or len(qv) != len(qw)
            or not all(isinstance(q, int) and not isinstance(q, bool) and 1 <= q <= 100 for q in qv)
            or not all(isinstance(w, _NUM) and not isinstance(w, bool) and w >= 0 for w in qw)
            or sum(qw) <= 0):
        raise DatasetError(
            f"{where}: jpeg.quality_values (integers 1..100) and jpeg.quality_weights (>= 0, not all 0) "
            f"must be non-empty lists of the same length"
        )
    jpeg["quality_weights"] = [float(w) for w in qw]
    return out


def _canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def recipe_key(recipe: Mapping[str, Any], images: int) -> str:
    """Hash of everything that determines the generated bytes (recipe, count, generator)."""
    payload = {"generator_version": GENERATOR_VERSION, "images": images, "recipe": recipe}
    return hashlib.sha256(_canonical_json(payload)).hexdigest()


def _entry_name(recipe_name: str, images: int, key: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in recipe_name) or "recipe"
    return f"{safe}-n{images}-{key[:12]}"


# --------------------------------------------------------------------------------------
# the image generator (pure: recipe + index -> JPEG bytes)


def _smooth_len(n: int) -> int:
    """Smallest 2^a 3^b 5^c >= n (fast FFT length)."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            v = p35
            while v < n:
                v *= 2
            best = min(best, v)
            p35 *= 3
        p5 *= 5
    return best


def _pink_noise(rng: np.random.Generator, h: int, w: int, slope: float) -> np.ndarray:
    """Gaussian field with amplitude spectrum 1/f^slope (natural images: slope ~ 1), std 1."""
    H, W = _smooth_len(max(h, 2)), _smooth_len(max(w, 2))
    fy = np.fft.fftfreq(H).astype(np.float32)[:, None]
    fx = np.fft.rfftfreq(W).astype(np.float32)[None, :]
    f2 = fx * fx + fy * fy
    f2[0, 0] = 1.0
    amp = f2 ** np.float32(-slope / 2)
    amp[0, 0] = 0.0
    shape = (H, W // 2 + 1)
    spec = (rng.standard_normal(shape, dtype=np.float32) + 1j * rng.standard_normal(shape, dtype=np.float32)) * amp
    x = np.fft.irfft2(spec, s=(H, W))[:h, :w].astype(np.float32)
    x -= x.mean()
    x /= x.std() + np.float32(1e-6)
    return x


def _choice(rng: np.random.Generator, weights: Sequence[float]) -> int:
    c = np.cumsum(np.asarray(weights, dtype=np.float64))
    return min(int(np.searchsorted(c, rng.random() * c[-1], side="right")), len(weights) - 1)


def _sample_size(rng: np.random.Generator, dims: Mapping[str, Any], scale: float) -> tuple[int, int]:
    u = rng.random()
    acc = 0.0
    for w, h, p in dims["fixed"]:
        acc += p
        if u < acc:
            break
    else:  # the "free" part of the mixture: log-normal long side, uniform aspect
        long = dims["free_long_median"] * math.exp(dims["free_long_sigma"] * rng.standard_normal())
        long = int(round(min(max(long, dims["free_long_min"]), dims["free_long_max"])))
        aspect = rng.uniform(dims["free_aspect_min"], dims["free_aspect_max"])
        short = max(8, int(round(long * aspect)))
        w, h = (short, long) if rng.random() < dims["free_portrait_fraction"] else (long, short)
    return max(8, int(round(w * scale))), max(8, int(round(h * scale)))


def _natural_colour(rng: np.random.Generator) -> tuple[float, float, float]:
    """A colour with photo-like saturation/brightness (mostly muted, some vivid)."""
    hue = rng.random()
    sat = rng.beta(1.4, 2.2)
    val = 0.12 + 0.85 * rng.beta(2.2, 1.6)
    return tuple(255.0 * c for c in colorsys.hsv_to_rgb(hue, sat, val))  # type: ignore[return-value]


def generate_image(recipe: Mapping[str, Any], index: int) -> tuple[bytes, dict]:
    """Make image ``index`` of a recipe: (JPEG bytes, {width, height, mode, quality, progressive}).

    Deterministic: it depends only on the recipe and the index (and the library versions).
    The scene: a sky/ground gradient, a few blurred (defocused) shapes with their own
    colour and surface roughness, a 1/f luminance texture modulated by that roughness,
    slow illumination shading, and sensor noise; then JPEG at a sampled quality.
    """
    rng = np.random.default_rng(np.random.SeedSequence([recipe["seed"], index]))
    dims, scene, jp = recipe["dimensions"], recipe["scene"], recipe["jpeg"]
    w, h = _sample_size(rng, dims, recipe["scale"])
    gray = rng.random() < recipe["grayscale_fraction"]
    quality = int(jp["quality_values"][_choice(rng, jp["quality_weights"])])
    progressive = bool(rng.random() < jp["progressive_fraction"])

    # -- colour layer and roughness mask ------------------------------------------------
    # Drawn at half resolution and blurred there, then upsampled: 4x cheaper than blurring
    # at full size, and the upsampling itself is the minimum ~1 px defocus of a real lens.
    lw, lh = max(4, (w + 1) // 2), max(4, (h + 1) // 2)
    top, bottom = np.array(_natural_colour(rng)), np.array(_natural_colour(rng))
    horizon = rng.uniform(0.2, 0.8)
    t = np.clip((np.linspace(0.0, 1.0, lh) - horizon) / rng.uniform(0.05, 0.6) + 0.5, 0.0, 1.0)
    grad = (top[None, :] * (1 - t[:, None]) + bottom[None, :] * t[:, None]).astype(np.uint8)
    colour = Image.fromarray(np.ascontiguousarray(np.broadcast_to(grad[:, None, :], (lh, lw, 3))), "RGB")
    rough = Image.new("L", (lw, lh), int(255 * rng.uniform(0.05, 0.6)))
    dc, dr = ImageDraw.Draw(colour), ImageDraw.Draw(rough)
    n_shapes = int(rng.integers(scene["shapes_min"], scene["shapes_max"] + 1))
    diag = math.hypot(lw, lh)
    for _ in range(n_shapes):
        fill = tuple(int(c) for c in _natural_colour(rng))
        smooth = rng.random() < scene["smooth_fraction"]
        r_val = int(255 * (rng.uniform(0.0, 0.25) if smooth else rng.uniform(0.45, 1.0)))
        cx, cy = rng.uniform(-0.1, 1.1) * lw, rng.uniform(-0.1, 1.1) * lh
        size = diag * (0.04 + 0.45 * rng.random() ** 1.7)  # many small, a few large
        kind = rng.random()
        if kind < 0.4:  # ellipse
            ax, ay = size * rng.uniform(0.4, 1.0), size * rng.uniform(0.4, 1.0)
            box = [cx - ax, cy - ay, cx + ax, cy + ay]
            dc.ellipse(box, fill=fill)
            dr.ellipse(box, fill=r_val)
        elif kind < 0.8:  # irregular blob-ish polygon
            k = int(rng.integers(3, 9))
            ang = np.sort(rng.uniform(0, 2 * math.pi, k))
            rad = size * rng.uniform(0.4, 1.0, k)
            pts = [(float(cx + r * math.cos(a)), float(cy + r * math.sin(a))) for a, r in zip(ang, rad)]
            dc.polygon(pts, fill=fill)
            dr.polygon(pts, fill=r_val)
        elif kind < 0.9:  # upright rectangle (walls, windows, signs)
            bw, bh = size * rng.uniform(0.2, 1.0), size * rng.uniform(0.2, 1.0)
            box = [cx - bw, cy - bh, cx + bw, cy + bh]
            dc.rectangle(box, fill=fill)
            dr.rectangle(box, fill=r_val)
        else:  # a thick stroke (branch, pole, cable)
            x2, y2 = cx + rng.uniform(-1, 1) * size * 2, cy + rng.uniform(-1, 1) * size * 2
            width = max(1, int(size * rng.uniform(0.02, 0.15)))
            dc.line([(cx, cy), (x2, y2)], fill=fill, width=width)
            dr.line([(cx, cy), (x2, y2)], fill=r_val, width=width)
    blur = 0.5 * rng.uniform(scene["blur_min"], scene["blur_max"]) * recipe["scale"] ** 0.5  # in half-res px
    if blur > 0.05:
        colour = colour.filter(ImageFilter.GaussianBlur(blur))
    rgb = np.asarray(colour.resize((w, h), Image.BICUBIC), dtype=np.float32)
    roughness = np.asarray(rough.resize((w, h), Image.BILINEAR), dtype=np.float32) * np.float32(1.0 / 255.0)

    # -- luminance texture, shading, noise --------------------------------------------
    slope = rng.uniform(scene["spectrum_slope_min"], scene["spectrum_slope_max"])
    level = min(scene["texture_max"], scene["texture_median"] * math.exp(scene["texture_sigma"] * rng.standard_normal()))
    tex = _pink_noise(rng, h, w, slope)
    mod = roughness
    mod *= np.float32(level)
    mod *= tex
    mod += np.float32(1.0)
    if scene["shading"] > 0:  # slow illumination changes: a very red 1/f field at 1/8 resolution
        sh, sw = max(2, h // 8), max(2, w // 8)
        small = _pink_noise(rng, sh, sw, 2.0) * np.float32(scene["shading"])
        shade = np.asarray(Image.fromarray(small, "F").resize((w, h), Image.BILINEAR), dtype=np.float32)
        mod *= np.float32(1.0) + shade
    rgb *= mod[:, :, None]
    sigma = rng.uniform(scene["noise_min"], scene["noise_max"])
    if sigma > 0:
        noise = rng.standard_normal((h, w), dtype=np.float32)
        noise *= np.float32(sigma)
        rgb += noise[:, :, None]  # luma noise (what survives a camera's processing)
    np.clip(rgb, 0.0, 255.0, out=rgb)
    img = Image.fromarray(rgb.astype(np.uint8), "RGB")
    if gray:
        img = img.convert("L")

    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality, subsampling=jp["subsampling"], progressive=progressive, optimize=False)
    return buf.getvalue(), {"width": w, "height": h, "mode": img.mode, "quality": quality, "progressive": progressive}


def _layout(images: int, classes: int) -> tuple[list[str], list[tuple[str, int]]]:
    """Class folder names and (relative path, label) per image index."""
    n_classes = min(classes, images)  # no empty class folders (torchvision ImageFolder rejects them)
    cw = max(3, len(str(n_classes - 1)))
    iw = max(5, len(str(images - 1)))
    names = [f"class_{c:0{cw}d}" for c in range(n_classes)]
    return names, [(f"{names[i % n_classes]}/img_{i:0{iw}d}.jpg", i % n_classes) for i in range(images)]


def _generate_chunk(recipe: dict, items: list[tuple[int, str, int]], out_dir: str) -> list[dict]:
    """Worker: make and write the images ``items`` = [(index, relpath, label)]; return manifest rows."""
    rows = []
    for index, rel, label in items:
        data, meta = generate_image(recipe, index)
        path = os.path.join(out_dir, rel)
        with open(path, "wb") as fh:
            fh.write(data)
        rows.append({"path": rel, "label": label, "bytes": len(data),
                     "sha256": hashlib.sha256(data).hexdigest(), **meta})
    return rows


# --------------------------------------------------------------------------------------
# manifests, digests, summaries


def _digest(rows: Iterable[Mapping[str, Any]], with_hash: bool) -> str:
    if with_hash:
        entries = [[r["path"], r["label"], r["bytes"], r["sha256"]] for r in rows]
    else:
        entries = [[r["path"], r["label"], r["bytes"]] for r in rows]
    return hashlib.sha256(_canonical_json({"files": entries})).hexdigest()


def _pct(sorted_vals: Sequence[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = min(len(sorted_vals) - 1, max(0, int(math.ceil(q * len(sorted_vals))) - 1))
    return float(sorted_vals[k])


def _summary(rows: Sequence[Mapping[str, Any]], n_classes: int, dim_rows: Sequence[Mapping[str, Any]]) -> dict:
    sizes = sorted(r["bytes"] for r in rows)
    widths = [r["width"] for r in dim_rows]
    heights = [r["height"] for r in dim_rows]
    out = {
        "n": len(rows),
        "classes": n_classes,
        "total_bytes": int(sum(sizes)),
        "mean_bytes": round(statistics.fmean(sizes), 1),
        "median_bytes": float(statistics.median(sizes)),
        "p10_bytes": _pct(sizes, 0.10),
        "p90_bytes": _pct(sizes, 0.90),
        "p99_bytes": _pct(sizes, 0.99),
        "max_bytes": int(sizes[-1]),
    }
    if dim_rows:
        out.update({
            "mean_width": round(statistics.fmean(widths), 1),
            "mean_height": round(statistics.fmean(heights), 1),
            "median_width": float(statistics.median(widths)),
            "median_height": float(statistics.median(heights)),
            "mean_megapixels": round(statistics.fmean(w * h for w, h in zip(widths, heights)) / 1e6, 4),
            "dims_sampled": len(dim_rows),
        })
        modes = [r.get("mode") for r in dim_rows if r.get("mode")]
        if modes:
            out["grayscale_fraction"] = round(sum(m == "L" for m in modes) / len(modes), 4)
    return out


def _library_versions() -> dict:
    import PIL
    from PIL import features

    return {
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "pillow": PIL.__version__,
        "libjpeg_turbo": features.version("libjpeg_turbo"),
    }


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _jpeg_files_under(root: Path) -> set[str]:
    found = set()
    for dirpath, _dirs, fnames in os.walk(root, followlinks=True):
        for f in fnames:
            if f.lower().endswith(JPEG_SUFFIXES):
                found.add(Path(dirpath, f).relative_to(root).as_posix())
    return found


def _verify_manifest_dir(root: Path, *, full: bool, sample: int = CHEAP_HASH_SAMPLE,
                         expect_key: str | None = None) -> PreparedDataset:
    """Check a generated dataset against its manifest; raise _CorruptDataset on any mismatch."""
    mpath = root / MANIFEST_NAME
    if not mpath.is_file():
        raise _CorruptDataset(f"{root}: no {MANIFEST_NAME}")
    try:
        man = json.loads(mpath.read_text())
        rows = man["files"]
        if man.get("format") != MANIFEST_FORMAT:
            raise ValueError(f"format is {man.get('format')!r}, expected {MANIFEST_FORMAT!r}")
        if not isinstance(rows, list) or not rows:
            raise ValueError("the file list is empty")
        digest = _digest(rows, with_hash=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _CorruptDataset(f"{mpath}: unreadable manifest ({exc})") from exc
    if digest != man.get("digest"):
        raise _CorruptDataset(f"{mpath}: the digest does not match the file list")
    if expect_key is not None and man.get("recipe_key") != expect_key:
        raise _CorruptDataset(f"{mpath}: made from other recipe parameters (key {man.get('recipe_key')!r})")
    listed = [r["path"] for r in rows]
    if listed != sorted(listed):
        raise _CorruptDataset(f"{mpath}: the file list is not sorted")
    try:
        class_dirs = {e.name for e in os.scandir(root) if e.is_dir()}
        on_disk = _jpeg_files_under(root)
    except OSError as exc:
        raise _CorruptDataset(f"{root}: cannot list the folder ({exc})") from exc
    if class_dirs != set(man.get("classes", ())):
        raise _CorruptDataset(f"{root}: the class folders differ from the manifest's")
    if on_disk != set(listed):
        missing, extra = sorted(set(listed) - on_disk), sorted(on_disk - set(listed))
        raise _CorruptDataset(
            f"{root}: {len(missing)} file(s) missing (e.g. {missing[:3]}), {len(extra)} unexpected (e.g. {extra[:3]})"
        )
    check = rows if full else random.SystemRandom().sample(rows, min(sample, len(rows)))
    try:
        for r in rows:
            p = root / r["path"]
            size = p.stat().st_size
            if size != r["bytes"]:
                raise _CorruptDataset(f"{p}: {size} bytes on disk, the manifest says {r['bytes']} "
                                      f"(truncated or changed)")
        for r in check:
            p = root / r["path"]
            if _sha256_file(p) != r["sha256"]:
                raise _CorruptDataset(f"{p}: sha256 differs from the manifest (file changed or corrupt)")
    except OSError as exc:
        raise _CorruptDataset(f"{root}: cannot read a file ({exc})") from exc
    return PreparedDataset(
        root=root,
        files=tuple(listed),
        labels=tuple(int(r["label"]) for r in rows),
        digest=digest,
        summary=dict(man.get("summary", {})),
    )


def verify_dataset(dataset: PreparedDataset | Path | str, *, full: bool = False,
                   sample: int = CHEAP_HASH_SAMPLE) -> PreparedDataset:
    """Verify a dataset and return it (fresh); raise DatasetError saying what is wrong.

    A generated dataset (a folder with ``manifest.json``) is checked against the manifest:
    file list, sizes, and the sha256 of ``sample`` random files, or of all with ``full``.
    An ImageFolder without a manifest is scanned again; if a PreparedDataset was given,
    its digest (paths, labels, sizes) must still match.
    """
    root = Path(dataset.root if isinstance(dataset, PreparedDataset) else dataset)
    if (root / MANIFEST_NAME).is_file():
        try:
            fresh = _verify_manifest_dir(root, full=full, sample=sample)
        except _CorruptDataset as exc:
            raise DatasetError(f"{exc}; the dataset at {root} is corrupt: ensure_dataset() (any study "
                               f"run) generates a synthetic one again, or delete the folder") from exc
    else:
        fresh = scan_imagefolder(root)
    if isinstance(dataset, PreparedDataset) and fresh.digest != dataset.digest:
        raise DatasetError(f"{root}: the dataset changed since it was prepared (digest {fresh.digest[:12]} "
                           f"!= {dataset.digest[:12]}); prepare it again")
    return fresh


# --------------------------------------------------------------------------------------
# imagefolder


def scan_imagefolder(path: str | os.PathLike, where: str = "dataset.path", dims_sample: int = 256) -> PreparedDataset:
    """Scan an ImageFolder tree: classes = sorted sub-folders, files = their JPEGs (recursive).

    The order and labels follow torchvision.datasets.ImageFolder. Non-JPEG files are
    ignored (their count is in the summary); a class folder without JPEGs is an error,
    as it is for torchvision. Widths/heights come from the headers of an evenly spaced
    sample of ``dims_sample`` files.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise DatasetError(f"{where}: {root} does not exist; point it at the root of an ImageFolder tree "
                           f"(one sub-folder per class holding .jpg/.jpeg files)")
    if not root.is_dir():
        raise DatasetError(f"{where}: {root} is not a folder; point it at the root of an ImageFolder tree")
    root = root.resolve()
    try:
        classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    except OSError as exc:
        raise DatasetError(f"{where}: cannot list {root}: {exc}") from exc
    if not classes:
        raise DatasetError(f"{where}: {root} has no class sub-folders; an ImageFolder tree is "
                           f"root/<class>/<image>.jpg (put the images in one folder per class)")
    rows: list[dict] = []
    ignored = 0
    empty = []
    for label, cname in enumerate(classes):
        n_before = len(rows)
        for dirpath, _dirs, fnames in sorted(os.walk(root / cname, followlinks=True)):
            for fname in sorted(fnames):
                p = Path(dirpath, fname)
                if not fname.lower().endswith(JPEG_SUFFIXES):
                    ignored += 1
                    continue
                try:
                    size = p.stat().st_size
                except OSError as exc:
                    raise DatasetError(f"{where}: cannot read {p}: {exc}") from exc
                rows.append({"path": p.relative_to(root).as_posix(), "label": label, "bytes": size})
        if len(rows) == n_before:
            empty.append(cname)
    if not rows:
        raise DatasetError(f"{where}: {root} has {len(classes)} class folder(s) but no .jpg/.jpeg files in them")
    if empty:
        raise DatasetError(f"{where}: class folder(s) without .jpg/.jpeg files in {root}: "
                           f"{', '.join(empty[:10])}{' ...' if len(empty) > 10 else ''}; remove them or add images")
    k = min(dims_sample, len(rows))
    dim_rows = []
    for i in range(k):
        r = rows[(i * len(rows)) // k]
        try:
            with Image.open(root / r["path"]) as im:
                dim_rows.append({"width": im.width, "height": im.height, "mode": im.mode})
        except (OSError, Image.DecompressionBombError) as exc:
            raise DatasetError(f"{where}: {root / r['path']} is not a readable image: {exc}") from exc
    summary = {"kind": "imagefolder", **_summary(rows, len(classes), dim_rows), "ignored_files": ignored}
    return PreparedDataset(
        root=root,
        files=tuple(r["path"] for r in rows),
        labels=tuple(r["label"] for r in rows),
        digest=_digest(rows, with_hash=False),
        summary=summary,
    )


# --------------------------------------------------------------------------------------
# cache management


def default_cache_dir() -> Path:
    """``$LOADERBENCH_CACHE/datasets`` if set, else ``<repo>/.cache/datasets``."""
    env = os.environ.get("LOADERBENCH_CACHE")
    base = Path(env).expanduser() if env else REPO_ROOT / ".cache"
    return base / "datasets"


def _default_workers() -> int:
    try:  # the CPUs this process may use (Slurm/cgroups/taskset), not the whole machine
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class _Lock:
    """An exclusive flock on ``path``; a no-op where the filesystem refuses flock."""

    def __init__(self, path: Path):
        self.path, self.fh, self.held = path, None, False

    def __enter__(self) -> "_Lock":
        try:
            import fcntl

            self.fh = open(self.path, "a+")
            try:
                fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                log.info("waiting for another process that is generating %s", self.path.name[1:-5])
                fcntl.flock(self.fh, fcntl.LOCK_EX)
            self.held = True
        except (ImportError, OSError) as exc:  # e.g. some NFS mounts; rename keeps us correct
            log.debug("no lock on %s (%s); relying on atomic rename", self.path, exc)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fh is not None:
            self.fh.close()  # releases the flock


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_tree(path: Path) -> None:
    """Rename aside first (so a half-deleted folder never looks like anything), then delete."""
    trash = path.with_name(f".trash-{path.name.lstrip('.')}-{uuid.uuid4().hex[:8]}")
    try:
        path.rename(trash)
    except OSError:
        trash = path
    shutil.rmtree(trash, ignore_errors=True)


def _clean_leftovers(cache_dir: Path, name: str, lock_held: bool) -> None:
    """Remove temporary/trash folders that interrupted generations left for this entry."""
    host = socket.gethostname()
    now = time.time()
    for p in cache_dir.iterdir():
        try:
            age = now - p.stat().st_mtime
        except OSError:
            continue  # already gone
        if p.name.startswith(".trash-"):
            if (lock_held and p.name.startswith(f".trash-{name}-")) or age > 3600:
                shutil.rmtree(p, ignore_errors=True)
            continue
        prefix = f".tmp-{name}-"
        if not p.name.startswith(prefix):
            continue
        parts = p.name[len(prefix):].rsplit("-", 2)  # <host>-<pid>-<random>
        p_host = parts[0] if len(parts) == 3 else ""
        try:
            p_pid = int(parts[1]) if len(parts) == 3 else -1
        except ValueError:
            p_pid = -1
        # Same host: with the lock held nobody else here can be generating this entry;
        # without it, only a dead process's folder is surely stale. Other hosts (shared
        # filesystem): after 6 hours.
        same_host = p_host == host
        if (same_host and (lock_held or not _pid_alive(p_pid))) or age > 6 * 3600:
            log.info("removing leftover %s from an interrupted generation", p)
            shutil.rmtree(p, ignore_errors=True)


def ensure_dataset(spec: DatasetSpec, cache_dir: Path | str | None = None, workers: int | None = None, *,
                   overrides: Mapping[str, Any] | None = None) -> PreparedDataset:
    """Return a verified dataset for ``spec``, generating it first if needed.

    synthetic-jpeg: generated once into ``cache_dir`` (default :func:`default_cache_dir`)
    with ``workers`` processes (default: the CPUs this process may use), verified in full
    right after generation and cheaply (file list, sizes, a sample of hashes) on every
    later call; a corrupt or incomplete entry is regenerated with a warning.
    ``overrides`` patches recipe keys (e.g. ``{"scale": 0.1}`` for tiny images in tests);
    it is part of the cache key like the recipe itself.

    imagefolder: ``spec.path`` is scanned (see :func:`scan_imagefolder`).
    """
    if not isinstance(spec, DatasetSpec):
        raise DatasetError(f"dataset: expected a DatasetSpec, got {type(spec).__name__}")
    spec.validate()
    if spec.kind == "imagefolder":
        return scan_imagefolder(spec.path)  # type: ignore[arg-type]

    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise DatasetError(f"workers: must be a whole number >= 1, got {workers!r}")
    recipe = load_recipe(spec.recipe, overrides)
    key = recipe_key(recipe, spec.images)
    name = _entry_name(Path(spec.recipe).stem if spec.recipe.endswith(".toml") else spec.recipe, spec.images, key)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(f"cache directory {cache}: cannot create it ({exc}); set LOADERBENCH_CACHE "
                           f"to a writable folder") from exc
    final = cache / name

    if final.is_dir():  # fast path, no lock: cache entries are immutable once in place
        try:
            return _verify_manifest_dir(final, full=False, expect_key=key)
        except _CorruptDataset:
            pass  # look again under the lock: another process may be replacing it

    with _Lock(cache / f".{name}.lock") as lock:
        if final.exists():
            try:
                return _verify_manifest_dir(final, full=False, expect_key=key)
            except _CorruptDataset as exc:
                log.warning("cached dataset %s is unusable (%s); generating it again", final, exc)
                _remove_tree(final)
        _clean_leftovers(cache, name, lock.held)
        tmp = _generate_into(cache, name, recipe, spec, key, workers or _default_workers())
        try:
            tmp.rename(final)
        except OSError:
            # Someone else put an entry in place (possible only without a working lock).
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                return _verify_manifest_dir(final, full=False, expect_key=key)
            except _CorruptDataset as exc:
                raise DatasetError(f"{final}: could not move the new dataset into place and the "
                                   f"existing one is unusable ({exc}); delete {final} and retry") from exc
    return _verify_manifest_dir(final, full=False, expect_key=key)


def _generate_into(cache: Path, name: str, recipe: dict, spec: DatasetSpec, key: str, workers: int) -> Path:
    """Generate into a fresh hidden temporary folder, write the manifest, verify in full."""
    tmp = cache / f".tmp-{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    n = spec.images
    class_names, layout = _layout(n, recipe["classes"])
    workers = max(1, min(workers, n // 8 or 1))
    log.info("generating %d synthetic JPEGs into %s with %d process(es)", n, cache / name, workers)
    t0 = time.perf_counter()
    try:
        tmp.mkdir()
        for c in class_names:
            (tmp / c).mkdir()
        items = [(i, rel, label) for i, (rel, label) in enumerate(layout)]
        if workers == 1 or n < MIN_IMAGES_FOR_POOL:
            rows = _generate_chunk(recipe, items, str(tmp))
        else:
            # "spawn", not fork: the caller usually has torch imported, whose OpenMP/intra-op
            # thread pools (and maybe a CUDA context) make fork() unsafe -- a child can
            # inherit a lock held by a thread that does not exist in it and hang. Spawned
            # children import only this module (numpy + Pillow, ~0.3 s each), which is
            # negligible next to generation; spawn is also the one method on every OS.
            chunk = max(1, min(32, n // (workers * 8)))
            chunks = [items[i:i + chunk] for i in range(0, n, chunk)]
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                try:
                    rows = [r for part in pool.map(_generate_chunk, [recipe] * len(chunks), chunks,
                                                   [str(tmp)] * len(chunks)) for r in part]
                except BaseException:
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
        rows.sort(key=lambda r: r["path"])
        seconds = time.perf_counter() - t0
        digest = _digest(rows, with_hash=True)
        manifest = {
            "format": MANIFEST_FORMAT,
            "kind": "synthetic-jpeg",
            "name": name,
            "recipe_name": spec.recipe,
            "recipe_key": key,
            "generator_version": GENERATOR_VERSION,
            "images": n,
            "recipe": recipe,
            "classes": class_names,
            "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "created_with": _library_versions(),
            "generation_seconds": round(seconds, 3),
            "generation_workers": workers,
            "digest": digest,
            "summary": {
                "kind": "synthetic-jpeg",
                "name": name,
                "recipe": spec.recipe,
                "recipe_key": key[:12],
                **_summary(rows, len(class_names), rows),
                "mean_quality": round(statistics.fmean(r["quality"] for r in rows), 2),
            },
            "files": rows,
        }
        part = tmp / (MANIFEST_NAME + ".part")
        with part.open("w") as fh:
            json.dump(manifest, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        part.rename(tmp / MANIFEST_NAME)
        try:  # full check of what actually landed on disk before the folder becomes visible
            _verify_manifest_dir(tmp, full=True, expect_key=key)
        except _CorruptDataset as exc:
            raise DatasetError(f"{cache}: the freshly generated dataset fails verification ({exc}); "
                               f"check the disk (space, errors) and retry") from exc
        log.info("generated %d images (%.1f MB) in %.1f s", n, manifest["summary"]["total_bytes"] / 1e6, seconds)
        return tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------------------------------
# python -m suite.dataset


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m suite.dataset",
                                 description="Generate/verify a loaderbench dataset and print its summary.")
    ap.add_argument("--images", type=int, default=1024, help="synthetic: number of images (default 1024)")
    ap.add_argument("--recipe", default="synthetic-jpeg", help="synthetic: datasets/<recipe>.toml or a path")
    ap.add_argument("--path", help="use this ImageFolder tree instead of generating")
    ap.add_argument("--cache-dir", type=Path, help="default: $LOADERBENCH_CACHE/datasets or <repo>/.cache/datasets")
    ap.add_argument("--workers", type=int, help="generation processes (default: usable CPUs)")
    ap.add_argument("--full", action="store_true", help="also hash every file")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    spec = (DatasetSpec(kind="imagefolder", path=args.path) if args.path
            else DatasetSpec(kind="synthetic-jpeg", images=args.images, recipe=args.recipe))
    try:
        t0 = time.perf_counter()
        ds = ensure_dataset(spec, cache_dir=args.cache_dir, workers=args.workers)
        if args.full:
            ds = verify_dataset(ds, full=True)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"root": str(ds.root), "digest": ds.digest, "seconds": round(time.perf_counter() - t0, 2),
                      "summary": ds.summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

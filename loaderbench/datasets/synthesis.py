"""The synthetic JPEG generator: recipe + image index -> JPEG bytes, pure and deterministic.

Image ``i`` of a recipe is drawn from its own random stream ``SeedSequence([seed, i])``, so
its bytes depend only on the recipe, the index and the versions of numpy, Pillow and
libjpeg-turbo, never on which process made it or in what order: generation can be split
across any number of processes.  The scenes are photo-like in what matters for loading
cost (file sizes, dimensions, JPEG settings, decode work), not in content.

Any change to the output for a given recipe must bump :data:`GENERATOR_VERSION`, which is
part of the cache key.
"""

from __future__ import annotations

import colorsys
import hashlib
import io
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

#: Part of the cache key: bump it whenever the generator's output for a given recipe
#: changes, so cache entries made by another generator version are never reused.
GENERATOR_VERSION = 1


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
    for w, h, p in dims["fixed"]:  # noqa: B007 - the size drawn is the one the loop breaks at
        acc += p
        if u < acc:
            break
    else:  # the "free" part of the mixture: log-normal long side, uniform aspect
        long = dims["free_long_median"] * math.exp(dims["free_long_sigma"] * rng.standard_normal())
        long = round(min(max(long, dims["free_long_min"]), dims["free_long_max"]))
        aspect = rng.uniform(dims["free_aspect_min"], dims["free_aspect_max"])
        short = max(8, round(long * aspect))
        w, h = (short, long) if rng.random() < dims["free_portrait_fraction"] else (long, short)
    return max(8, round(w * scale)), max(8, round(h * scale))


def _natural_colour(rng: np.random.Generator) -> tuple[float, float, float]:
    """A colour with photo-like saturation/brightness (mostly muted, some vivid)."""
    hue = rng.random()
    sat = rng.beta(1.4, 2.2)
    val = 0.12 + 0.85 * rng.beta(2.2, 1.6)
    return tuple(255.0 * c for c in colorsys.hsv_to_rgb(hue, sat, val))  # type: ignore[return-value]  # hsv_to_rgb gives exactly three values


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
    level = min(
        scene["texture_max"], scene["texture_median"] * math.exp(scene["texture_sigma"] * rng.standard_normal())
    )
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


def class_layout(images: int, classes: int) -> tuple[list[str], list[tuple[str, int]]]:
    """Class folder names and (relative path, label) per image index."""
    n_classes = min(classes, images)  # no empty class folders (torchvision ImageFolder rejects them)
    cw = max(3, len(str(n_classes - 1)))
    iw = max(5, len(str(images - 1)))
    names = [f"class_{c:0{cw}d}" for c in range(n_classes)]
    return names, [(f"{names[i % n_classes]}/img_{i:0{iw}d}.jpg", i % n_classes) for i in range(images)]


def write_images(recipe: dict, items: list[tuple[int, str, int]], out_dir: str) -> list[dict]:
    """Worker: make and write the images ``items`` = [(index, relpath, label)]; return manifest rows."""
    rows = []
    for index, rel, label in items:
        data, meta = generate_image(recipe, index)
        path = os.path.join(out_dir, rel)
        with open(path, "wb") as fh:
            fh.write(data)
        rows.append(
            {"path": rel, "label": label, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), **meta}
        )
    return rows

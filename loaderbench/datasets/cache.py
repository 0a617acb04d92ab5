"""Prepare and check datasets: ensure_dataset, verify_dataset, and the cache of generated sets.

A synthetic dataset is generated once per recipe key into ``<cache>/<recipe>-n<images>-<key>``
and never changed afterwards.  Generation writes into a hidden ``.tmp-<name>-<host>-<pid>-*``
folder next to it, writes the manifest last, hashes every file again, and only then renames
the folder into place, so an entry is either complete or absent; a killed generation leaves
only a temporary folder, which a later generation removes.  An exclusive lock
(``.<name>.lock``) keeps concurrent processes from generating the same entry twice; where the
filesystem refuses locks, the atomic rename alone keeps the cache correct.

Every :func:`ensure_dataset` checks an existing entry cheaply (manifest, file list, sizes,
the sha256 of a random sample); an entry that fails is moved aside and generated again,
with a warning.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import statistics
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from loaderbench.datasets.imagefolder import scan_imagefolder
from loaderbench.datasets.manifest import (
    CHEAP_HASH_SAMPLE,
    MANIFEST_FORMAT,
    MANIFEST_NAME,
    files_digest,
    files_summary,
    library_versions,
    verify_manifest_dir,
    write_manifest,
)
from loaderbench.datasets.recipes import load_recipe, recipe_key
from loaderbench.datasets.synthesis import GENERATOR_VERSION, class_layout, write_images
from loaderbench.datasets.types import CorruptDataset, DatasetError, DatasetSpec, PreparedDataset
from loaderbench.locations import default_cache_root
from loaderbench.processes import pid_alive

log = logging.getLogger(__name__)

#: Below this many images the pool's start-up costs more than it saves.
MIN_IMAGES_FOR_POOL = 32


def default_cache_dir() -> Path:
    """``<cache>/datasets``: the cache is ``$LOADERBENCH_CACHE`` if set, else ``<checkout>/.cache`` when run from
    a source checkout, else the user's cache folder (``$XDG_CACHE_HOME/loaderbench``, ``~/.cache/loaderbench``)."""
    return default_cache_root() / "datasets"


def _default_workers() -> int:
    try:  # the CPUs this process may use (Slurm/cgroups/taskset), not the whole machine
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class _Lock:
    """An exclusive flock on ``path``; a no-op where the filesystem refuses flock."""

    def __init__(self, path: Path):
        self.path, self.fh, self.held = path, None, False

    def __enter__(self) -> _Lock:
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
        parts = p.name[len(prefix) :].rsplit("-", 2)  # <host>-<pid>-<random>
        p_host = parts[0] if len(parts) == 3 else ""
        try:
            p_pid = int(parts[1]) if len(parts) == 3 else -1
        except ValueError:
            p_pid = -1
        # Same host: with the lock held nobody else here can be generating this entry;
        # without it, only a dead process's folder is surely stale. Other hosts (shared
        # filesystem): after 6 hours.
        same_host = p_host == host
        if (same_host and (lock_held or not pid_alive(p_pid))) or age > 6 * 3600:
            log.info("removing leftover %s from an interrupted generation", p)
            shutil.rmtree(p, ignore_errors=True)


def _entry_name(recipe_name: str, images: int, key: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in recipe_name) or "recipe"
    return f"{safe}-n{images}-{key[:12]}"


def ensure_dataset(
    spec: DatasetSpec,
    cache_dir: Path | str | None = None,
    workers: int | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
) -> PreparedDataset:
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
        return scan_imagefolder(spec.path)  # type: ignore[arg-type]  # validate() has checked that an imagefolder spec has a path

    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise DatasetError(f"workers: must be a whole number >= 1, got {workers!r}")
    recipe = load_recipe(spec.recipe, overrides)
    key = recipe_key(recipe, spec.images)
    name = _entry_name(Path(spec.recipe).stem if spec.recipe.endswith(".toml") else spec.recipe, spec.images, key)
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetError(
            f"cache directory {cache}: cannot create it ({exc}); set LOADERBENCH_CACHE to a writable folder"
        ) from exc
    final = cache / name

    if final.is_dir():  # fast path, no lock: cache entries are immutable once in place
        try:
            return verify_manifest_dir(final, full=False, expect_key=key)
        except CorruptDataset:
            pass  # look again under the lock: another process may be replacing it

    with _Lock(cache / f".{name}.lock") as lock:
        if final.exists():
            try:
                return verify_manifest_dir(final, full=False, expect_key=key)
            except CorruptDataset as exc:
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
                return verify_manifest_dir(final, full=False, expect_key=key)
            except CorruptDataset as exc:
                raise DatasetError(
                    f"{final}: could not move the new dataset into place and the "
                    f"existing one is unusable ({exc}); delete {final} and retry"
                ) from exc
    return verify_manifest_dir(final, full=False, expect_key=key)


def _generate_into(cache: Path, name: str, recipe: dict, spec: DatasetSpec, key: str, workers: int) -> Path:
    """Generate into a fresh hidden temporary folder, write the manifest, verify in full."""
    tmp = cache / f".tmp-{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    n = spec.images
    class_names, layout = class_layout(n, recipe["classes"])
    workers = max(1, min(workers, n // 8 or 1))
    log.info("generating %d synthetic JPEGs into %s with %d process(es)", n, cache / name, workers)
    t0 = time.perf_counter()
    try:
        tmp.mkdir()
        for c in class_names:
            (tmp / c).mkdir()
        items = [(i, rel, label) for i, (rel, label) in enumerate(layout)]
        if workers == 1 or n < MIN_IMAGES_FOR_POOL:
            rows = write_images(recipe, items, str(tmp))
        else:
            # "spawn", not fork: the caller usually has torch imported, whose OpenMP/intra-op
            # thread pools (and maybe a CUDA context) make fork() unsafe -- a child can
            # inherit a lock held by a thread that does not exist in it and hang. Spawned
            # children import only loaderbench.datasets (numpy + Pillow, ~0.3 s each), which is
            # negligible next to generation; spawn is also the one method on every OS.
            chunk = max(1, min(32, n // (workers * 8)))
            chunks = [items[i : i + chunk] for i in range(0, n, chunk)]
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                try:
                    rows = [
                        r
                        for part in pool.map(write_images, [recipe] * len(chunks), chunks, [str(tmp)] * len(chunks))
                        for r in part
                    ]
                except BaseException:
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
        rows.sort(key=lambda r: r["path"])
        seconds = time.perf_counter() - t0
        digest = files_digest(rows, with_hash=True)
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
            "created_with": library_versions(),
            "generation_seconds": round(seconds, 3),
            "generation_workers": workers,
            "digest": digest,
            "summary": {
                "kind": "synthetic-jpeg",
                "name": name,
                "recipe": spec.recipe,
                "recipe_key": key[:12],
                **files_summary(rows, len(class_names), rows),
                "mean_quality": round(statistics.fmean(r["quality"] for r in rows), 2),
            },
            "files": rows,
        }
        write_manifest(tmp, manifest)
        try:  # full check of what actually landed on disk before the folder becomes visible
            verify_manifest_dir(tmp, full=True, expect_key=key)
        except CorruptDataset as exc:
            raise DatasetError(
                f"{cache}: the freshly generated dataset fails verification ({exc}); "
                f"check the disk (space, errors) and retry"
            ) from exc
        log.info("generated %d images (%.1f MB) in %.1f s", n, manifest["summary"]["total_bytes"] / 1e6, seconds)
        return tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def verify_dataset(
    dataset: PreparedDataset | Path | str, *, full: bool = False, sample: int = CHEAP_HASH_SAMPLE
) -> PreparedDataset:
    """Verify a dataset and return it (fresh); raise DatasetError saying what is wrong.

    A generated dataset (a folder with ``manifest.json``) is checked against the manifest:
    file list, sizes, and the sha256 of ``sample`` random files, or of all with ``full``.
    An ImageFolder without a manifest is scanned again; if a PreparedDataset was given,
    its digest (paths, labels, sizes) must still match.
    """
    root = Path(dataset.root if isinstance(dataset, PreparedDataset) else dataset)
    if (root / MANIFEST_NAME).is_file():
        try:
            fresh = verify_manifest_dir(root, full=full, sample=sample)
        except CorruptDataset as exc:
            raise DatasetError(
                f"{exc}; the dataset at {root} is corrupt: ensure_dataset() (any study "
                f"run) generates a synthetic one again, or delete the folder"
            ) from exc
    else:
        fresh = scan_imagefolder(root)
    if isinstance(dataset, PreparedDataset) and fresh.digest != dataset.digest:
        raise DatasetError(
            f"{root}: the dataset changed since it was prepared (digest {fresh.digest[:12]} "
            f"!= {dataset.digest[:12]}); prepare it again"
        )
    return fresh

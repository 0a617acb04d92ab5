"""Your own pipeline (workload "custom"): find, import and call the factory a study names, and turn what it
returns into the parts a DataLoader takes. Used twice: once per factory when the study is validated
(loaderbench.study.factory_check, in a child process), and in every cell process (loaderbench.workloads.custom).

The contract (docs/custom-pipelines.md): `factory = "module:callable"` names a callable that takes the study's
[factory_args] as keyword arguments and returns a dataset (map-style: `__getitem__` and `__len__`, as the
DataLoader reads any such object; or a `torch.utils.data.IterableDataset`), or a dict with `dataset` and
optional `collate_fn` / `worker_init_fn`.

Where the module comes from: its top-level name is looked up in the study file's folder first, then on
sys.path. The folder it was found in (`factory_root`) travels with the cell in Cell.context, which is no part
of the cell id; the cell process puts it first on sys.path and PYTHONPATH, so spawn and forkserver workers
(which start a fresh interpreter) import the same module, and a Slurm node does too where the folder has the
same path. The module file's sha256 is part of the cell id: a cell process that finds a file with another
hash refuses to measure it rather than record new code under an old cell.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Any

from loaderbench.datasets.manifest import sha256_file
from loaderbench.errors import FactoryError
from loaderbench.schema.cell import CellConfig
from loaderbench.study.factory_spec import FactorySpec, raised

PARTS_KEYS = ("dataset", "collate_fn", "worker_init_fn")
ALLOWED_RETURN = (
    "allowed: a torch.utils.data.Dataset (map-style: __getitem__ and __len__) or IterableDataset, "
    "or a dict with dataset and optional collate_fn / worker_init_fn"
)


def activate_root(root: str | os.PathLike | None) -> None:
    """Put `root` first on sys.path, and on PYTHONPATH: spawn workers get the parent's sys.path, a forkserver
    process (started with the environment) only PYTHONPATH, before either unpickles the dataset."""
    if root is None:
        return
    root = str(root)
    if root in sys.path:
        sys.path.remove(root)
    sys.path.insert(0, root)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


def import_factory(spec: FactorySpec, root: Path | None) -> tuple[Any, Path]:
    """Import the module with `root` first on the path; (the callable, the module's file)."""
    activate_root(root)
    try:
        module = importlib.import_module(spec.module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise FactoryError(f"importing {spec.module} (from {root or 'sys.path'}) raised {raised(exc)}") from exc
    file = getattr(module, "__file__", None)
    if not file:
        raise FactoryError(
            f"{spec.module} has no module file (a folder without __init__.py?); allowed: a .py module or a package"
        )
    file = Path(file).resolve()
    if root is not None and not file.is_relative_to(Path(root).resolve()):
        raise FactoryError(
            f"the module name {spec.module!r} is already taken by {file} (imported before the "
            f"study's own); rename the module in {root}"
        )
    obj: Any = module
    for part in spec.attr.split("."):
        if not hasattr(obj, part):
            raise FactoryError(
                f"{spec.module} ({file}) has no {spec.attr!r}; callables it defines: "
                f"{', '.join(_callables(module)) or 'none'}"
            )
        obj = getattr(obj, part)
    if not callable(obj):
        raise FactoryError(
            f"{spec} is a {type(obj).__name__}, not a callable; allowed: a function or class that returns the dataset"
        )
    return obj, file


def _callables(module: types.ModuleType) -> list[str]:
    return sorted(
        name
        for name, v in vars(module).items()
        if callable(v) and not name.startswith("_") and getattr(v, "__module__", None) == module.__name__
    )


def argument_problems(factory: Any, args: dict[str, Any], spec: FactorySpec) -> list[str]:
    """Keyword arguments in [factory_args] that the factory does not accept, and required ones it lacks."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature to read (a C function): calling it will say
        return []
    params = list(sig.parameters.values())
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params)
    shown = f"{spec}{sig}"
    problems = []
    unknown = [k for k in args if k not in named and not takes_any]
    if unknown:
        near = [m for k in unknown for m in difflib.get_close_matches(k, named, n=1)]
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        problems.append(
            f"[factory_args] {', '.join(unknown)}: not accepted by {shown}; it accepts "
            f"{', '.join(named) or 'no keyword arguments'}{hint}"
        )
    missing = [
        p.name
        for p in params
        if p.default is p.empty
        and p.name not in args
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    if missing:
        problems.append(
            f"[factory_args] {', '.join(missing)}: missing; {shown} requires "
            f"{'them' if len(missing) > 1 else 'it'} (as keyword arguments)"
        )
    return problems


def call_factory(factory: Any, args: dict[str, Any], spec: FactorySpec) -> Any:
    try:
        return factory(**args)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise FactoryError(f"{spec}(**factory_args) raised {raised(exc)}") from exc


def loader_parts(made: Any, spec: FactorySpec):
    """What the factory returned, as loaderbench.workloads.LoaderParts; FactoryError naming what it was otherwise."""
    from loaderbench.workloads import LoaderParts

    if isinstance(made, dict):
        unknown = sorted(map(str, set(made) - set(PARTS_KEYS)))
        if unknown or "dataset" not in made:
            what = f"unknown key(s) {', '.join(unknown)}" if unknown else "no dataset key"
            raise FactoryError(f"{spec} returned a dict with {what}; allowed keys: {', '.join(PARTS_KEYS)}")
        for key in ("collate_fn", "worker_init_fn"):
            if made.get(key) is not None and not callable(made[key]):
                raise FactoryError(f"{spec} returned {key} = {describe(made[key])}; allowed: a callable or None")
        dataset = made["dataset"]
        parts = LoaderParts(dataset, made.get("collate_fn"), made.get("worker_init_fn"))
    else:
        dataset = made
        parts = LoaderParts(dataset)
    check_dataset(dataset, spec)
    return parts


def check_dataset(dataset: Any, spec: FactorySpec) -> None:
    from torch.utils.data import Dataset, IterableDataset

    if isinstance(dataset, IterableDataset):
        return
    has_len = hasattr(type(dataset), "__len__")
    if hasattr(type(dataset), "__getitem__") and has_len and not isinstance(dataset, (str, bytes)):
        try:
            n = len(dataset)
        except Exception as exc:
            raise FactoryError(f"{spec} returned {describe(dataset)} whose len() raised {raised(exc)}") from exc
        if n < 1:
            raise FactoryError(f"{spec} returned an empty dataset ({describe(dataset)}, len 0)")
        return
    if isinstance(dataset, Dataset):
        raise FactoryError(
            f"{spec} returned {describe(dataset)}, a map-style Dataset without __len__: the suite "
            f"samples its indices to size each epoch and needs its length; add __len__, or make it "
            f"an IterableDataset"
        )
    if isinstance(dataset, types.GeneratorType) or (hasattr(dataset, "__next__") and hasattr(dataset, "__iter__")):
        raise FactoryError(
            f"{spec} returned {describe(dataset)}, an iterator (one pass, no workers); wrap it in a "
            f"torch.utils.data.IterableDataset whose __iter__ starts a fresh one; {ALLOWED_RETURN}"
        )
    raise FactoryError(f"{spec} returned {describe(dataset)}, not a dataset; {ALLOWED_RETURN}")


def describe(obj: Any) -> str:
    if obj is None:
        return "None (does it end with a return?)"
    kind = type(obj)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def build_parts(cell: CellConfig):
    """In a cell process: import the cell's factory from its root, check the module file is the one the cell
    was validated with, call the factory with the study's [factory_args], and return its LoaderParts."""
    if cell.factory is None or cell.factory_sha256 is None:
        raise FactoryError('workload = "custom" needs a factory checked by the study (factory, factory_sha256)')
    spec = FactorySpec.parse(cell.factory)
    root = cell.factory_root
    factory, file = import_factory(spec, Path(root) if root else None)
    digest = sha256_file(file)
    if digest != cell.factory_sha256:
        raise FactoryError(
            f"{file} changed since the study was validated (sha256 {cell.factory_sha256[:12]} "
            f"then, {digest[:12]} now): run or submit the study again, so its cells name this version"
        )
    return loader_parts(call_factory(factory, cell.factory_args or {}, spec), spec)

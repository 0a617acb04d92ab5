"""The hooks: `DataLoader.__iter__` (and torchdata's `StatefulDataLoader.__iter__`) patched in this process
only, so that the loaders a session watches hand out timed iterators. When torch is not imported yet, the patch
waits for it: an import hook applies it as soon as the script imports the module, so the script's own order
(environment variables set before `import torch`) is kept."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any

#: Modules that define a loader class to patch, and the class.
TARGETS = {
    "torch.utils.data.dataloader": "DataLoader",
    "torchdata.stateful_dataloader.stateful_dataloader": "StatefulDataLoader",
}
_ORIGINAL = "_loaderbench_doctor_original_iter"
_session: Any = None
_owner_pid: int | None = None
_depth = 0  # patched __iter__ calls in progress: only the outermost one watches


def _site(frame: Any) -> str:
    """Where the loop iterates: file and line of the first frame outside torch and this package."""
    while frame is not None:
        name = frame.f_code.co_filename
        if "/torch/" not in name and "/loaderbench/doctor/" not in name and "/torchdata/" not in name:
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def unwatched_iter(loader: Any) -> Any:
    """The loader's own iterator, never a watched one: for the loaders the doctor makes itself (the other arm of an
    in-loop A/B), which would otherwise be watched by the watch of the loop they are fed into."""
    for cls in type(loader).__mro__:
        if _ORIGINAL in cls.__dict__:
            return cls.__dict__[_ORIGINAL](loader)
    return iter(loader)


def patch_class(cls: type) -> None:
    """Patch ``cls.__iter__`` (once)."""
    if _ORIGINAL in cls.__dict__:
        return
    original = cls.__dict__.get("__iter__")
    if original is None:
        return

    def __iter__(self):
        global _depth
        _depth += 1
        try:
            it = original(self)
        finally:
            _depth -= 1
        session = _session
        if session is None or os.getpid() != _owner_pid or _depth:
            return it  # another process (a forked worker), or a patched __iter__ called by another one
        watch = session.watch_for(self, _site(sys._getframe(1)))
        return it if watch is None else watch.wrap(it)

    __iter__.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(cls, _ORIGINAL, original)
    cls.__iter__ = __iter__  # type: ignore[method-assign]


def _patch_module(name: str) -> None:
    module = sys.modules.get(name)
    cls = getattr(module, TARGETS[name], None) if module is not None else None
    if isinstance(cls, type):
        patch_class(cls)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds the target modules with the ordinary finders, then patches their class right after they run."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in TARGETS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch_module(fullname)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def install(session: Any) -> None:
    """Watch this process's loaders with ``session``: patch now what is imported, the rest when it is."""
    global _session, _owner_pid
    _session, _owner_pid = session, os.getpid()
    for name in TARGETS:
        _patch_module(name)
    if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


def uninstall() -> None:
    """Stop watching (the patches stay, and pass every iterator through untouched)."""
    global _session
    _session = None

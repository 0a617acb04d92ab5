"""Which loader and worker kind a cell may combine with its other axes: checked when a study is loaded, before
anything runs, without importing torch (validation and planning load none).

Thread workers in `torch.utils.data.DataLoader` are detected as a feature, not a version: the installed
DataLoader must take a `worker_method` argument. Its source is read, not imported, so a study is validated as
fast on a login node as anywhere.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
from pathlib import Path

#: the DataLoader argument that picks thread workers, where torch offers them
THREAD_ARGUMENT = "worker_method"
#: iterable datasets: their workers split the stream by get_worker_info(), which torchdata.nodes does not set
ITERABLE_WORKLOADS = ("shards",)


def torch_version() -> str:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


@functools.cache
def dataloader_has_threads() -> bool:
    """Whether the installed torch's DataLoader takes `worker_method` (read from its source, torch not imported)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return False
    source = Path(next(iter(spec.submodule_search_locations))) / "utils" / "data" / "dataloader.py"
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "DataLoader":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args.args + item.args.kwonlyargs
                    return any(a.arg == THREAD_ARGUMENT for a in args)
    return False


def has_torchdata() -> bool:
    return importlib.util.find_spec("torchdata") is not None


def loader_problems(cells) -> list[str]:
    """One sentence per impossible combination among the (normalised) cells, each said once."""
    problems: dict[str, None] = {}
    for cell in cells:
        c = cell.config
        if c.get("loader") == "dataloader" and c.get("worker_method") == "thread" and not dataloader_has_threads():
            problems[
                f'[matrix] worker_method = "thread" with loader = "dataloader": thread workers are not '
                f"available in torch {torch_version()}'s DataLoader (it takes no {THREAD_ARGUMENT} argument); "
                f'allowed: loader = "nodes" (torchdata.nodes) for thread workers, or worker_method = "process"'
            ] = None
        if c.get("worker_method") == "thread" and c.get("storage") == "http":
            problems[
                '[matrix] worker_method = "thread" with storage = "http": the suite\'s HTTP client keeps one '
                "connection per loader process, which thread workers would share; allowed: "
                'worker_method = "process" with storage = "http"'
            ] = None
        if c.get("decoder") == "nvjpeg" and c.get("pin_memory"):
            problems[
                '[matrix] decoder = "nvjpeg" with pin_memory = true: its batches are decoded onto the GPU, and only '
                'memory on the CPU can be pinned; allowed: pin_memory = false with decoder = "nvjpeg"'
            ] = None
        if c.get("loader") != "nodes":
            continue
        if not has_torchdata():
            problems[
                '[matrix] loader = "nodes": torchdata is not installed here; allowed: loader = "dataloader", '
                "or install torchdata (pip install 'torchdata>=0.11')"
            ] = None
        if c["workload"] in ITERABLE_WORKLOADS:
            problems[
                f'[matrix] loader = "nodes" with workload = "{c["workload"]}": an iterable dataset splits its '
                f"stream across DataLoader workers, which torchdata.nodes does not have; allowed: loader = "
                f'"dataloader" for it (add an [[exclude]])'
            ] = None
        if c.get("worker_init", "none") != "none":
            problems[
                f'[matrix] worker_init = "{c["worker_init"]}" with loader = "nodes": torchdata.nodes has no '
                f'worker_init_fn; allowed: worker_init = "none" with loader = "nodes"'
            ] = None
        if c.get("slow_worker_ms"):
            problems[
                '[matrix] slow_worker_ms with loader = "nodes": the straggler is worker 0, and torchdata.nodes '
                'numbers no workers; allowed: slow_worker_ms = 0 with loader = "nodes"'
            ] = None
    return list(problems)

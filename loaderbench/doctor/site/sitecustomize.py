"""loaderbench doctor: watch this process's DataLoaders (only when LOADERBENCH_DOCTOR is set), then run the
sitecustomize this one hides, if there is one."""

import os
import sys

if os.environ.get("LOADERBENCH_DOCTOR"):
    try:
        from loaderbench.doctor.bootstrap import install_from_env
    except ImportError:
        sys.path.append(os.environ.get("LOADERBENCH_DOCTOR_PACKAGE_PARENT", ""))
        from loaderbench.doctor.bootstrap import install_from_env
    try:
        install_from_env()
    except Exception as exc:  # noqa: BLE001 - never stop the user's script
        print(f"loaderbench doctor: could not install its hooks: {exc}", file=sys.stderr)


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(__file__):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()

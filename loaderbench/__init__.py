"""loaderbench: measure how PyTorch DataLoader parallelism behaves on a machine."""

from loaderbench.version import __version__  # noqa: F401 - the package's version


def __getattr__(name: str):
    """``loaderbench.watch``, imported when first used (``import loaderbench`` stays light)."""
    if name == "watch":
        from loaderbench.doctor.api import watch

        return watch
    raise AttributeError(f"module 'loaderbench' has no attribute {name!r}")

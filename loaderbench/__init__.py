"""loaderbench: measure how PyTorch DataLoader parallelism behaves on a machine."""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``loaderbench.watch``, imported when first used (``import loaderbench`` stays light)."""
    if name == "watch":
        from loaderbench.doctor.api import watch

        return watch
    raise AttributeError(f"module 'loaderbench' has no attribute {name!r}")

"""loaderbench: measure how PyTorch DataLoader parallelism behaves on a machine."""

__version__ = "0.1.0"

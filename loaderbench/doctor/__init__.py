"""`loaderbench doctor`: is a training loop waiting for data, and what should change? Watches the user's
unchanged script (or a loop, through `loaderbench.watch`), times every `next()` on its DataLoaders, and says
in words how much of each step waits for data ([doctor.md](../../docs/doctor.md))."""

from loaderbench.doctor.api import Watched, watch

__all__ = ["Watched", "watch"]

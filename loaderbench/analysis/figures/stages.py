"""What `make figures` is doing while it works: a line per long stage on stderr (parsing, analysing, drawing), its
count kept up to date in place on a terminal, and the seconds it took at its end. A large results folder takes
minutes from nothing; without this the command says nothing until it is done."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class Stages:
    """Reports stages to `stream` (default stderr). On a terminal a stage's line counts its tasks as they finish;
    elsewhere (a CI log, a file) it is written once at the start and once at the end."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        try:
            self.live = self.stream.isatty()
        except (AttributeError, ValueError):  # a closed or file-like stream without a terminal behind it
            self.live = False

    def _say(self, text: str, end: str = "\n") -> None:
        print(text, end=end, file=self.stream, flush=True)

    def stage(self, what: str, total: int, unit: str = "") -> Callable[[int], None]:
        """Start a stage of `total` tasks (`what`: "drawing 13 studies", counted in `unit`); returns the callable to
        give the number of tasks done so far, each time one finishes."""
        t0 = time.monotonic()
        self._say(f"{what} ...", end="\r" if self.live else "\n")

        def done(n: int) -> None:
            if n >= total:
                self._say(f"{what}: done in {time.monotonic() - t0:.1f} s" + (" " * 12 if self.live else ""))
            elif self.live:
                self._say(f"{what}: {n}/{total} {unit}".rstrip(), end="\r")

        return done

"""Progress for long runs: cells done/total, the current cell, elapsed time and an ETA."""

from __future__ import annotations

import time

from rich.console import Console

from loaderbench.schema.cell import describe
from loaderbench.schema.record import Record


def _number(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None else "n/a"


class Progress:
    """Line-oriented (works in CI logs and terminals alike; no background thread, the runner forks)."""

    def __init__(self, total: int, console: Console | None = None):
        self.total, self.done = total, 0
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.t0 = time.monotonic()

    @staticmethod
    def _fmt(seconds: float) -> str:
        seconds = round(seconds)
        return (
            f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
            if seconds >= 3600
            else f"{seconds // 60}m{seconds % 60:02d}s"
        )

    def start(self, task) -> None:
        self.console.print(
            f"[dim][{self.done + 1}/{self.total}][/dim] {describe(task.cell.config)} rep {task.repetition} ...",
            end="\r" if self.console.is_terminal else "\n",
        )

    def finish(self, task, record: Record) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        if record.ok:
            what = f"{_number(record.samples_per_s, '9.1f')} samples/s  first batch "
            what += f"{_number(record.time_to_first_batch_s, '.2f')} s"
        else:
            what = f"[red]{record.status}[/red]: {record.error_line(120)}"
        self.console.print(
            f"[{self.done}/{self.total}] {describe(record.config)} rep {record.repetition}: "
            f"{what}  [dim](elapsed {self._fmt(elapsed)}, ETA {self._fmt(eta)})[/dim]"
        )
        for warning in record.warnings or ():
            self.console.print(f"  [yellow]warning[/yellow]: {warning}")
        if record.disturbed:
            why = "; ".join((record.metrics or {}).get("machine", {}).get("disturbed_reasons", ()))
            self.console.print(f"  [yellow]disturbed[/yellow]: {why}")

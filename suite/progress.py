"""Progress for long runs: cells done/total, the current cell, elapsed time and an ETA."""

from __future__ import annotations

import time

from rich.console import Console


def describe(config: dict) -> str:
    parts = [config["workload"], f"w={config['num_workers']}", f"c={config['cores']}"]
    for key in ("factory", "start_method", "sharing_strategy", "batch_size", "decoder", "batched",
                "persistent_workers", "pin_memory", "step_ms", "storage", "latency_ms", "bandwidth_mbit",
                "http_client", "sharding", "storage_fault"):
        value = config.get(key)
        if value not in (None, False, 0, 0.0, "fork", "file_descriptor", 32, "pil", "local", "pooled", "split",
                         "none"):
            parts.append(f"{key}={value}")
    return " ".join(parts)


class Progress:
    """Line-oriented (works in CI logs and terminals alike; no background thread, the runner forks)."""

    def __init__(self, total: int, console: Console | None = None):
        self.total, self.done = total, 0
        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.t0 = time.monotonic()

    @staticmethod
    def _fmt(seconds: float) -> str:
        seconds = int(round(seconds))
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"

    def start(self, task) -> None:
        self.console.print(f"[dim][{self.done + 1}/{self.total}][/dim] {describe(task.cell.config)} "
                           f"rep {task.repetition} ...", end="\r" if self.console.is_terminal else "\n")

    def finish(self, task, record: dict) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.t0
        eta = elapsed / self.done * (self.total - self.done)
        m = record.get("metrics") or {}
        if record["status"] == "ok":
            what = f"{m['samples_per_s']:9.1f} samples/s  first batch {m['time_to_first_batch_s']:.2f} s"
        else:
            what = f"[red]{record['status']}[/red]: {record['error']['kind']}: {record['error']['message'][:120]}"
        self.console.print(f"[{self.done}/{self.total}] {describe(record['config'])} rep {record['repetition']}: "
                           f"{what}  [dim](elapsed {self._fmt(elapsed)}, ETA {self._fmt(eta)})[/dim]")
        for warning in record.get("warnings") or ():
            self.console.print(f"  [yellow]warning[/yellow]: {warning}")

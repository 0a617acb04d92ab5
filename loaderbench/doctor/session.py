"""The doctor inside the watched process: which loaders it watches, what it prints when a loader's diagnosis is
ready, and the part file it leaves for the `loaderbench doctor` process (written again at exit, so a script
that fails or is interrupted keeps what was measured)."""

from __future__ import annotations

import atexit
import json
import os
import sys
from pathlib import Path
from typing import Any

from loaderbench.doctor.report import loader_report, terminal_lines
from loaderbench.doctor.watch import DONE, LoaderWatch, WatchPlan
from loaderbench.measure.fingerprint import package_versions

#: At most this many loaders are watched in one process.
MAX_LOADERS = 8


def _rank() -> dict:
    env = os.environ
    rank = env.get("RANK", env.get("SLURM_PROCID"))
    return {
        "rank": int(rank) if rank and rank.isdigit() else None,
        "local_rank": env.get("LOCAL_RANK", env.get("SLURM_LOCALID")),
        "world_size": env.get("WORLD_SIZE", env.get("SLURM_NTASKS")),
    }


class Session:
    """The loaders one process watches. ``part`` is where this process's findings go (None: nowhere);
    ``always_write``: write the part even when no loader was iterated (the process the doctor started)."""

    def __init__(
        self,
        plan: WatchPlan,
        part: Path | None = None,
        always_write: bool = False,
        echo: bool = True,
        after_done: Any = None,
    ):
        self.plan = plan
        self.after_done = after_done
        self.part = part
        self.always_write = always_write
        self.echo = echo
        self.watches: dict[Any, LoaderWatch] = {}
        self.pid = os.getpid()
        self.stopping = False
        rank = _rank()["rank"]
        #: what each line this process prints starts with: under torchrun or srun, the rank too
        self.prefix = "loaderbench doctor: " + (f"rank {rank}: " if rank is not None else "")

    def watch_for(self, loader: Any, site: str) -> LoaderWatch | None:
        """The watch of loaders iterated at ``site`` over this kind of dataset; a new one for a new place."""
        key = (site, type(getattr(loader, "dataset", None)).__qualname__)
        w = self.watches.get(key)
        if w is None:
            if len(self.watches) >= MAX_LOADERS:
                return None
            name = f"#{len(self.watches) + 1} ({site})"
            w = self.watches[key] = LoaderWatch(
                loader, name, self.plan, self._done, self.say if self.echo else None, self._agreement()
            )
            if self.echo:
                print(f"{self.prefix}watching loader {w.name}", file=sys.stderr, flush=True)
        elif w.state == DONE:
            return None
        return w

    def _agreement(self) -> Any:
        """Under several ranks with --tune, counted in steps (so that every rank reaches its search after the same
        steps), and a folder to meet in: how the ranks agree on one setting (loaderbench.doctor.agreement)."""
        info = _rank()
        world = int(info["world_size"]) if str(info["world_size"] or "").isdigit() else 1
        if not self.plan.tune or world < 2 or info["rank"] is None or self.plan.seconds is not None or not self.part:
            return None
        from loaderbench.doctor.agreement import agree

        folder, rank = self.part.parent / "agreement", info["rank"]
        return lambda loader, changes: agree(folder, loader, rank, world, changes)

    def say(self, text: str) -> None:
        print(f"{self.prefix}{text}", file=sys.stderr, flush=True)

    def _done(self, watch: LoaderWatch) -> None:
        report = loader_report(watch, timeline=False)
        if self.echo:
            print("\n".join(f"{self.prefix}{line}" for line in terminal_lines(report)), file=sys.stderr)
            sys.stderr.flush()
        self.write()
        if self.after_done is not None:
            self.after_done(self)
        if self.plan.stop and not self.stopping:
            self.stopping = True
            if self.echo:
                print("loaderbench doctor: --stop: ending the script after the diagnosis", file=sys.stderr)
            raise SystemExit(0)

    def reports(self) -> list[dict]:
        return [loader_report(w) for w in self.watches.values()]

    def finish(self, reason: str = "the script ended before the plan did") -> None:
        for w in self.watches.values():
            w.finish_early(reason)

    def to_json(self) -> dict:
        import torch

        return {
            "pid": self.pid,
            "argv": list(sys.argv),
            **_rank(),
            "process": {
                "cpus_allowed": sorted(os.sched_getaffinity(0)),
                "torch_threads": torch.get_num_threads(),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "sharing_strategy": torch.multiprocessing.get_sharing_strategy(),
                "cuda_initialized": torch.cuda.is_initialized(),
            },
            # the versions this script runs with, read off what it imported (no import paid for a version)
            "versions": package_versions(import_missing=False),
            "loaders": self.reports(),
        }

    def write(self) -> None:
        if self.part is None or (not self.watches and not self.always_write):
            return
        self.part.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.part.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json()))
        os.replace(tmp, self.part)

    def at_exit(self) -> None:
        if os.getpid() != self.pid:
            return
        self.finish()
        try:
            self.write()
        except Exception as exc:  # noqa: BLE001 - the script's own exit must go on
            print(f"loaderbench doctor: could not write {self.part}: {exc}", file=sys.stderr)


def register_exit(session: Session) -> None:
    atexit.register(session.at_exit)

"""What the doctor's `sitecustomize` runs in every Python process the watched command starts: decide whether
this process is one to watch (the script, or each rank of torchrun or srun; never a loader's worker), and if so
start a session there."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

#: The doctor's settings for the processes it starts (JSON: plan, parts folder, the doctor's pid).
ENV = "LOADERBENCH_DOCTOR"
#: ``pid:rank`` of the process that watches, inherited by its children, so that they do not watch again.
OWNER = "LOADERBENCH_DOCTOR_OWNER"


def _rank(env=os.environ) -> str:
    return env.get("RANK", env.get("SLURM_PROCID", ""))


def should_watch(argv: list[str], env: dict) -> bool:
    """A worker started by multiprocessing never watches; a process whose rank differs from its watching
    ancestor's does (torchrun's and srun's ranks); otherwise only the first Python process does."""
    if "--multiprocessing-fork" in argv or argv == ["-c"]:
        return False
    owner = env.get(OWNER)
    if not owner:
        return True
    owner_rank = owner.split(":", 1)[1] if ":" in owner else ""
    return _rank(env) not in (owner_rank, "")


def install_from_env() -> None:
    raw = os.environ.get(ENV)
    if not raw or not should_watch(list(sys.argv), dict(os.environ)):
        return
    from loaderbench.doctor.hooks import install
    from loaderbench.doctor.session import Session, register_exit
    from loaderbench.doctor.watch import WatchPlan

    conf = json.loads(raw)
    os.environ[OWNER] = f"{os.getpid()}:{_rank()}"
    parts = Path(conf["parts"])
    top = os.getppid() == conf["doctor_pid"]
    session = Session(WatchPlan(**conf["plan"]), part=parts / f"{os.getpid()}.json", always_write=top)
    install(session)
    register_exit(session)

"""Cluster profiles (slurm/<name>.toml): where and how cells run on Slurm, validated before anything is
submitted, with the same one-clear-error rule as study files."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from loaderbench.errors import ProfileError


class SlurmSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_min: Annotated[int, Field(ge=1, le=60 * 24 * 30)] = 30
    mem_per_cpu_mb: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    gpus_per_cell: Annotated[int, Field(ge=0, le=64)] = 0
    gres: str | None = None  # e.g. "gpu:a100:1"; overrides gpus_per_cell when set
    node_cores: Annotated[int, Field(ge=1, le=100_000)]  # the most cores one node has: the limit for `cores`
    array_parallelism: Annotated[int, Field(ge=1, le=100_000)] = 64
    extra_sbatch: list[Annotated[str, Field(pattern=r"^--[A-Za-z][\w-]*(=.*)?$")]] = []
    setup: list[str] = []  # shell lines run before the cell (module load ..., source ...)
    results: str | None = None  # shared folder for records (default: the RESULTS given to make)
    logs: str = "slurm-logs"  # submitit's folder (logs, pickles): must be on a shared filesystem
    max_requeues: Annotated[int, Field(ge=0, le=100)] = 3  # preemptions/timeouts a cell may be requeued for
    # DDP cells (rank_mode = "ddp"): ranks per node, one Slurm task each, the cell's cores split among them;
    # 0: all of a cell's ranks in one task on one node, started by the cell as on a workstation
    ddp_ranks_per_node: Annotated[int, Field(ge=0, le=1024)] = 0


class ContainerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    kind: Literal["none", "apptainer", "pyxis"] = "none"
    image: str | None = None  # SIF path (apptainer) or image reference (pyxis)
    binds: list[str] = []  # host paths mounted at the same place inside the container
    python: str = "python3"  # the interpreter inside the image


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    slurm: SlurmSettings
    container: ContainerSettings = ContainerSettings()


@dataclass(frozen=True)
class LoadedProfile:
    path: Path
    name: str
    settings: Profile


def load_profile(path: str | Path) -> LoadedProfile:
    path = Path(path)
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        others = sorted(p.stem for p in path.parent.glob("*.toml")) if path.parent.is_dir() else []
        raise ProfileError(
            f"{where}: no such cluster profile" + (f"; profiles here: {', '.join(others)}" if others else "")
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{where}: cannot read the profile: {exc}") from None
    try:
        settings = Profile.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                problems.append(f"{key}: unknown key")
            elif err["type"] == "missing":
                problems.append(f"{key}: missing")
            else:
                problems.append(f"{key} = {err.get('input')!r}: {err['msg']}")
        raise ProfileError(f"{where}: " + ("; ".join(problems))) from None
    c = settings.container
    if c.kind != "none" and not c.image:
        raise ProfileError(
            f"{where}: container.image: missing; allowed: the SIF path (apptainer) or image (pyxis) "
            f"when container.kind = {c.kind!r}"
        )
    return LoadedProfile(path=path, name=path.stem, settings=settings)

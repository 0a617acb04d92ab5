"""A study's repetitions come from one machine. A local run (`loaderbench run`, `loaderbench settle`) refuses to add
repetitions to a study whose records were measured on another machine, a results folder copied from elsewhere:
its cells' medians would mix two machines' speeds, and every new repetition would read as disturbed against the
study's reference speed (loaderbench.study.remeasure)."""

from __future__ import annotations

from loaderbench.errors import LoaderbenchError
from loaderbench.measure.fingerprint import host_fingerprint
from loaderbench.schema.store import Store

#: What makes a machine another one, with the word a user reads for it.
MACHINE_KEYS = (("cpu_model", "CPU"), ("logical_cpus", "logical CPUs"), ("gpus", "GPUs"))


def _gpu_names(gpus) -> list[str]:
    return sorted(str(g.get("name")) for g in gpus or [] if isinstance(g, dict))


def _machine(env: dict) -> dict:
    return {
        "cpu_model": env.get("cpu_model"),
        "logical_cpus": env.get("logical_cpus"),
        "gpus": _gpu_names(env.get("gpus")),
    }


def check_same_machine(study: str, store: Store) -> None:
    """Raise one clear error when an ok record of `study` in `store` was measured on a machine other than this one
    (its CPU model, logical CPU count or GPUs differ); records that do not say are taken as this machine's."""
    here = _machine(host_fingerprint(versions=False))
    for path, rec in store.records(study):
        if rec is None or not rec.ok or not rec.env:
            continue
        there = _machine(rec.env)
        for key, label in MACHINE_KEYS:
            if there[key] not in (None, []) and there[key] != here[key]:
                raise LoaderbenchError(
                    f"{path}: measured on another machine ({label}: {there[key]!r}; here: {here[key]!r}); adding "
                    f"repetitions here would mix two machines in the cells of study {study!r}. Measure into a new "
                    f"results folder (--results), or move that study's records out of {path.parent}"
                )

"""When a repetition was disturbed, and what its throughput is at the machine's own speed.

Every ok record carries the machine's speed beside its window (metrics `machine`, written by
loaderbench.measure.machine_speed). A repetition is disturbed when, by stated margins:

- the reference moved during it: the pure-Python reference after the window differs from the one before it by more
  than `speed_margin`. The JPEG reference's move is recorded but not judged: its reading before the window depends
  on the cell's own state (it reads 7-21% slower before the windows of cells with workers than after them, 0.5%
  without), so it would flag the cell, not the machine;
- the machine ran at another speed than during the rest of the study: the pure-Python reference differs from the
  study's median reference (of the repetitions measured so far) by more than `speed_margin`;
- other processes took more than `others_margin` of the cell's cores during the window.

A local run judges each repetition as it is written and measures the disturbed ones again within the study's
`remeasure_budget` (loaderbench.study.remeasure); the record keeps the earlier attempts. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# the reference may move this much (either way) before a repetition counts as disturbed. Sized from the reference's
# own noise: two readings back to back on a quiet 2-vCPU cloud VM differ by up to 11% (90th percentile 7%), so a
# tighter margin would flag the reference's noise, not the machine (`make bench` part 8 measures it here).
SPEED_MARGIN = 0.25
OTHERS_MARGIN = 0.10  # the share of the cell's cores other processes may take
#: a run began on a quiet machine ("alone") when the 1-minute load average was below this share of its logical CPUs
QUIET_LOAD_PER_CPU = 0.5
REMEASURE_BUDGET = 0.20  # extra repetitions a study may spend on disturbed ones, as a share of its repetitions
MAX_REMEASURES = 2  # attempts at one repetition beyond the first, whatever the budget
KEPT_METRICS = ("samples_per_s", "end_to_end_samples_per_s", "machine")  # of a disturbed attempt, when replaced


@dataclass(frozen=True)
class Margins:
    speed: float = SPEED_MARGIN
    others: float = OTHERS_MARGIN


def machine_of(metrics: Any) -> Mapping[str, Any] | None:
    """A record's `machine` block (metrics: a record's metrics, or None)."""
    machine = (metrics or {}).get("machine")
    return machine if isinstance(machine, Mapping) else None


def reasons(machine: Mapping[str, Any], study_reference: float | None, margins: Margins) -> list[str]:
    """Why a repetition with this `machine` block counts as disturbed; empty when it does not."""
    out = []
    change = machine.get("python_change")
    if isinstance(change, int | float) and abs(change) > margins.speed:
        out.append(
            f"the python reference moved {change:+.1%} from before the window to after it (margin {margins.speed:.0%})"
        )
    rate = machine.get("python_per_s")
    if study_reference and isinstance(rate, int | float) and rate > 0:
        off = rate / study_reference - 1.0
        if abs(off) > margins.speed:
            out.append(f"the python reference ran {off:+.1%} off the study's median (margin {margins.speed:.0%})")
    others = machine.get("others_share")
    if isinstance(others, int | float) and others > margins.others:
        out.append(f"other processes took {others:.0%} of the cell's cores (margin {margins.others:.0%})")
    return out


def judge(metrics: Any, study_reference: float | None, margins: Margins) -> bool | None:
    """Write the verdict into the record's `machine` block (disturbed, its reasons, the margins and the study's
    reference it was judged by); returns it, None when the record carries no machine speed."""
    machine = machine_of(metrics)
    if machine is None or metrics is None:
        return None
    why = reasons(machine, study_reference, margins)
    metrics["machine"] = {
        **machine,
        "study_python_per_s": study_reference,
        "margins": {"speed": margins.speed, "others": margins.others},
        "disturbed": bool(why),
        "disturbed_reasons": why,
    }
    return bool(why)


def is_disturbed(metrics: Any) -> bool:
    machine = machine_of(metrics)
    return bool(machine and machine.get("disturbed"))


def remeasures_of(previous_attempts: list[dict[str, Any]] | None) -> int:
    """How many earlier attempts at a repetition were ok but disturbed (replaced by a new measurement)."""
    return sum(1 for a in previous_attempts or () if a.get("status") == "ok")


#: workloads whose time a core's speed does not set: dividing them by the reference would only add its noise
NOT_CPU_BOUND = frozenset({"sleep"})


def normalizing_reference(config: Mapping[str, Any]) -> str | None:
    """Which reference a cell's throughput is divided by: the JPEG decode for the workloads that decode the study's
    images, the pure-Python loop for the other CPU-bound ones; None where the time goes elsewhere (a sleep-bound
    workload, remote storage), so normalizing is not sound."""
    from loaderbench.schema.workload_catalog import WORKLOADS

    workload = config.get("workload")
    if workload in NOT_CPU_BOUND or config.get("storage") == "http":
        return None
    w = WORKLOADS.get(workload or "")
    return "jpeg" if w is not None and w.reads_images else "python"


def normalized(samples_per_s: Any, config: Mapping[str, Any], machine: Mapping[str, Any] | None) -> float | None:
    """Samples per reference unit: the throughput divided by the rate of the cell's reference (units of the
    pure-Python loop, or decodes of the fixed JPEG, per second). None without both, or where normalizing is not
    sound (normalizing_reference)."""
    kind = normalizing_reference(config)
    if kind is None or machine is None or not isinstance(samples_per_s, int | float):
        return None
    rate = machine.get(f"{kind}_per_s")
    return samples_per_s / rate if isinstance(rate, int | float) and rate > 0 else None

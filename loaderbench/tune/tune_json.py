"""tune.json: what a tune run found, per scenario, as plain JSON (written atomically).

Per scenario: the answer (the setting, its median, its order-statistic interval with the coverage it really
has for its n: loaderbench.stats.intervals), the setting of highest median, every measured setting within the margin
of it (the cheapest first), the finalists with their comparison against the highest, what each rule of thumb
of loaderbench.analysis.report.recommend would have picked and what that gave (measured; or estimated from the measured
num_workers curve and said so: interpolated between two measured values of 1 worker or more, else bounded by
the linear ceiling, n x the one-process rate), the decisions on the other axes, every point explored, the
search's steps, and the cost: cell repetitions and cell-seconds spent against the full grid's estimate (its
cells x the study's repetitions x the mean cell-seconds seen in this scenario).

Schema history (SCHEMA):
  loaderbench.tune/1  first format.
  loaderbench.tune/2  rules_of_thumb: never interpolated from 0 workers; `at_most` and `ratio_at_most`, the
                      linear ceiling of a num_workers with no estimate, where it falls short of the answer.
  loaderbench.tune/3  rules_of_thumb: `bound` names what `at_most` is (the linear ceiling, or the one core 0
                      workers kept busy); scenario: `busy_core`, the share of its one core 0 workers kept busy
                      where that ruled every setting with workers out (else null).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from loaderbench.schema.record import now
from loaderbench.stats.intervals import pct
from loaderbench.stats.rules_of_thumb import RULE_LABELS, lookup, rules_of_thumb
from loaderbench.study.study_file import Study
from loaderbench.tune.evidence import Evidence
from loaderbench.tune.options import TuneOptions
from loaderbench.tune.outcome import ScenarioOutcome
from loaderbench.tune.search import one_process_rate
from loaderbench.tune.space import SETTING_AXES

SCHEMA = "loaderbench.tune/3"
#: the confidence asked of the answer's interval (n decides what it really has: 75% at 3, 93.75% at 5)
ANSWER_CONFIDENCE = 0.95


def _num(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _settings(e: Evidence) -> dict[str, Any]:
    return {a: v for a, v in e.candidate.settings if v is not None}


def setting_row(e: Evidence, against: Evidence | None = None) -> dict[str, Any]:
    """One measured setting: its values, repetitions, median, interval, memory, its median at the machine's own
    speed (samples per reference unit, loaderbench.schema.disturbance.normalized; None without it), and both
    medians' ratios to those of `against`."""
    iv = e.interval(ANSWER_CONFIDENCE)
    row = {
        "settings": _settings(e),
        "cell_id": e.candidate.key,
        "repetitions": e.n,
        "median": _num(e.median),
        "interval": {
            "low": _num(iv.low),
            "high": _num(iv.high),
            "coverage": _num(iv.coverage),
            "method": iv.method,
            "n": iv.n,
        },
        "memory_uss_bytes": _num(e.memory),
        "failed": e.failed,
        "cell_seconds": round(e.cell_s, 3),
        "median_normalized": _num(e.normalized_median),
    }
    if against is not None and against.median:
        row["ratio"] = _num(e.median / against.median)
        own, theirs = e.normalized_median, against.normalized_median
        row["ratio_normalized"] = _num(own / theirs) if own is not None and theirs else None
    return row


def _rules(out: ScenarioOutcome, ctx: dict[str, Any], gpus: int | None) -> list[dict[str, Any]]:
    """Each rule of thumb's num_workers, at the answer's other settings: measured, or estimated."""
    answer = out.answer
    cores = int(ctx.get("cores") or 1)
    picks = rules_of_thumb(cores, gpus=gpus or 0, local_world_size=int(ctx.get("ranks") or 1))
    others = {a: v for a, v in answer.candidate.settings if a != "num_workers"}
    curve = {}
    for n in out.scenario.workers:
        c = out.scenario.find({**others, "num_workers": n})
        e = out.evidence.get(c.key) if c is not None else None
        if e is not None and not e.failed and e.values:
            curve[n] = e.median
    # 0 workers is no anchor for an estimate: there the main process loads, with no transfer between processes,
    # a regime of its own (1 worker often gives less than both 0 and 2)
    anchors = {n: v for n, v in curve.items() if n > 0}
    rate = one_process_rate(curve, out.scenario.main_process_is_a_worker)
    rows = []
    for rule, label in RULE_LABELS.items():
        if rule == "4_per_gpu" and not gpus:
            continue
        n = picks[rule]
        c = out.scenario.find({**others, "num_workers": n})
        e = out.evidence.get(c.key) if c is not None else None
        row: dict[str, Any] = {
            "rule": rule,
            "label": label,
            "num_workers": n,
            "in_matrix": n in out.scenario.workers,
            "measured": bool(e and e.values),
        }
        if e is not None and e.values:
            row.update(value=_num(e.median), repetitions=e.n, source="measured")
        else:
            value, match, lo, hi = (
                lookup(list(anchors), list(anchors.values()), n) if anchors else (None, "none", None, None)
            )
            if match == "interpolated":
                row.update(
                    value=_num(value),
                    repetitions=0,
                    source=f"estimated: interpolated between num_workers {lo:g} and {hi:g}",
                )
            elif n > 0 and out.busy_core is not None and 0 in curve:
                row.update(
                    value=None,
                    repetitions=0,
                    at_most=_num(curve[0] / out.busy_core),
                    bound="its busy core",
                    source=f"not measured: 0 workers kept the one core {out.busy_core:.0%} busy, so workers "
                    f"give at most {1 / out.busy_core:.2f}x of 0 workers' rate",
                )
            elif n > 0 and rate is not None and n * rate < answer.median:
                # never extrapolated; the linear ceiling bounds it, worth saying where it falls short of the answer
                row.update(
                    value=None,
                    repetitions=0,
                    at_most=_num(n * rate),
                    bound="its linear ceiling",
                    source=f"not estimated: at most {n} x the one-process rate ({rate:,.0f}), the linear ceiling",
                )
            else:
                row.update(value=None, repetitions=0, source="not estimated: " + _outside(n, curve))
        row["ratio_to_answer"] = _num(row["value"] / answer.median) if row.get("value") else None
        if row.get("at_most"):
            row["ratio_at_most"] = _num(row["at_most"] / answer.median)
        rows.append(row)
    return rows


def _outside(n: int, curve: dict[int, float]) -> str:
    """Why n workers has no estimate: it lies outside the measured curve (of 1 worker or more, for n > 0)."""
    anchors = sorted(a for a in curve if a > 0 or n == 0)
    if not anchors:
        return "no num_workers of 1 or more measured"
    span = str(anchors[0]) if len(anchors) == 1 else f"{anchors[0]}-{anchors[-1]}"
    return f"outside the measured num_workers ({span})" + (", 0 workers aside" if n > 0 and 0 in curve else "")


def scenario_result(study: Study, options: TuneOptions, out: ScenarioOutcome, gpus: int | None) -> dict[str, Any]:
    s = out.scenario
    ctx = {a: v for a, v in s.context if v is not None}
    shown = {a: ctx[a] for a in s.varying_context if a in ctx}
    explored = sorted(out.evidence.values(), key=Evidence.cheapness)
    spent_s = sum(e.cell_s for e in explored)
    seen = [o.cell_s for e in explored for o in e.observations if o.cell_s > 0]
    mean_s = sum(seen) / len(seen) if seen else None
    grid_n = len(s.candidates) * study.settings.repetitions
    row: dict[str, Any] = {
        "scenario": shown,
        "context": ctx,
        "label": s.label,
        "tuned_axes": list(s.values),
        "stop": out.stop,
        "busy_core": _num(out.busy_core),
        "cost": {
            "measurements": out.measured,
            "measured_now": sum(not o.reused for e in explored for o in e.observations),
            "cell_seconds": round(spent_s, 3),
            "grid_cells": len(s.candidates),
            "grid_repetitions": study.settings.repetitions,
            "grid_measurements": grid_n,
            "grid_cell_seconds_estimate": round(grid_n * mean_s, 3) if mean_s else None,
            "fraction_of_grid_measurements": out.measured / grid_n if grid_n else None,
        },
    }
    est = row["cost"]["grid_cell_seconds_estimate"]
    row["cost"]["fraction_of_grid_cell_seconds"] = spent_s / est if est else None
    row["explored"] = [setting_row(e) for e in explored]
    row["axes"] = [
        {"axis": d.axis, "at_num_workers": d.at_workers, "values": d.values, "kept": d.kept, "note": d.note}
        for d in out.axes
    ]
    row["steps"] = [
        {
            "phase": st.phase,
            "candidate": st.candidate,
            "repetition": st.repetition,
            "value": _num(st.value),
            "note": st.note,
        }
        for st in out.steps
    ]
    if out.answer is None:
        row["answer"] = None
        errors = sorted({o.error for e in explored for o in e.observations if o.error})
        row["errors"] = errors[:20]
        return row
    top = out.highest.median
    row["answer"] = {**setting_row(out.answer, out.highest), "metric": options.metric}
    row["highest"] = setting_row(out.highest)
    within = [
        e
        for e in explored
        if not e.failed
        and e.values
        and not e.over_cap(options.max_memory_bytes)
        and e.median >= (1 - options.margin) * top
    ]
    row["within_margin"] = [{**setting_row(e, out.answer), "answer": e is out.answer} for e in within]
    row["finalists"] = []
    compared = {e.candidate.key: e for e in out.finalists} | {k: out.evidence[k] for k in out.comparisons}
    for e in sorted(compared.values(), key=Evidence.cheapness):
        cmp = out.comparisons.get(e.candidate.key)
        row["finalists"].append(
            {
                **setting_row(e, out.highest),
                "kept": e in out.finalists,
                "against_highest": None
                if cmp is None
                else {
                    "verdict": cmp.verdict,
                    "ratio": _num(cmp.ratio),
                    "low": _num(cmp.ci_low),
                    "high": _num(cmp.ci_high),
                    "coverage": _num(cmp.ci_coverage),
                    "text": cmp.interval_text(),
                    "reason": cmp.reason,
                },
            }
        )
    row["rules_of_thumb"] = _rules(out, ctx, gpus)
    return row


def build_result(
    study: Study,
    options: TuneOptions,
    outcomes: list[ScenarioOutcome],
    *,
    results: str | Path,
    rungs: tuple[int, ...],
    gpus: int | None,
    started_at: str,
    measured: int,
    reused: int,
) -> dict[str, Any]:
    from loaderbench.tune.trials import tune_study_name

    scenarios = [scenario_result(study, options, o, gpus) for o in outcomes]
    spent = sum(s["cost"]["cell_seconds"] for s in scenarios)
    ests = [s["cost"]["grid_cell_seconds_estimate"] for s in scenarios]
    grid_s = sum(ests) if all(e is not None for e in ests) else None
    grid_n = len(study.cells) * study.settings.repetitions
    n = sum(s["cost"]["measurements"] for s in scenarios)
    return {
        "schema": SCHEMA,
        "study": study.name,
        "study_file": str(study.path),
        "records": str(Path(results) / tune_study_name(study.name)),
        "started_at": started_at,
        "finished_at": now(),
        "options": options.describe(),
        "rungs": list(rungs),
        "gpus": gpus,
        "setting_axes": list(SETTING_AXES),
        "answered": sum(s["answer"] is not None for s in scenarios),
        "scenarios_total": len(scenarios),
        "cost": {
            "measurements": n,
            "measured_now": measured,
            "reused": reused,
            "cell_seconds": round(spent, 3),
            "grid_measurements": grid_n,
            "grid_cell_seconds_estimate": round(grid_s, 3) if grid_s is not None else None,
            "fraction_of_grid_measurements": n / grid_n if grid_n else None,
            "fraction_of_grid_cell_seconds": spent / grid_s if grid_s else None,
        },
        "interval_note": f"the answer's interval is the order-statistic interval of its median, asked at "
        f"{pct(ANSWER_CONFIDENCE)}; its coverage is what its n allows (75% at 3 repetitions, "
        f"93.75% at 5)",
        "scenarios": scenarios,
    }

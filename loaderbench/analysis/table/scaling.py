"""One study's tidy rows -> everything the figures, tables and report show, computed once.

Vocabulary
----------
* A **curve** is throughput against ``num_workers`` with every other axis fixed: one *panel*
  (the workload plus whichever other axes vary inside that workload, e.g. ``jpeg · decoder=pil``)
  on one ``cores`` value. Knee, rules of thumb and the USL fit are per curve.
* ``num_workers = 0`` cells (loading in the main process) have no start method, prefetch factor
  and so on (those axes are None there), so one such cell is the ``num_workers = 0`` point of every
  panel that agrees with it on the remaining axes.
* **Reference cells** are not curves: a ``jpeg`` cell with ``jpeg_stage = "decode"`` measures the
  decode-only rate (read + decode, no transforms, nothing sent back), from which the decode ceiling
  of the full ``jpeg`` curves is computed: best decode rate per core x cores.

Pure functions on tidy tables; no I/O, no figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from loaderbench.analysis.report.recommend import RULE_LABELS, evaluate_rules, knee_of_medians, medians_by_n
from loaderbench.analysis.table.environment import environment_table, provenance
from loaderbench.analysis.table.records import AXIS_COLUMNS, as_objects, ok_mask, ok_rows, plain
from loaderbench.analysis.table.summary import summarize
from loaderbench.analysis.table.usl import fit_usl_groups
from loaderbench.analysis.text import value_text
from loaderbench.schema.axes import WORKER_ONLY_AXES
from loaderbench.stats.comparison import Comparison, compare
from loaderbench.stats.verdicts import NOT_MEASURED

WORKLOAD_ORDER = ["sleep", "cpu", "jpeg"]
#: Axes that are not part of a panel's name: the curve's x axis, its colour, and the workload itself.
_OWN = ("workload", "num_workers", "cores")
CURVE_KEYS = ["panel", "cores"]
_WORKLOAD_PARAMS = (
    "sleep_ms",
    "cpu_work",
    "work_us",
    "sample_bytes",
    "decoder",
    "sample_kb",
    "tensors_per_sample",
    "fault",
    "fault_at",
)


@dataclass
class StudyAnalysis:
    """Everything derived from one study's records (one shape per table, documented per field)."""

    study: str
    rows: pd.DataFrame  # the study's tidy rows, every status, plus `panel` (N=0 rows repeated per panel)
    cells: pd.DataFrame  # one row per (panel, cell): axes, n, n_not_ok, median, interval + its coverage, unstable
    curves: pd.DataFrame  # one row per (panel, cores): best, knee, USL fit, ceilings, comparison with N=0
    rules: pd.DataFrame  # one row per (panel, cores, rule): evaluate_rules + comparison rule vs knee
    references: pd.DataFrame  # decode-only reference cells (summary rows), empty if none
    problems: pd.DataFrame  # unstable or failed cells with their reasons
    panels: list[str] = field(default_factory=list)  # panel names in drawing order
    has_jpeg: bool = False
    notes: list[str] = field(default_factory=list)  # what could not be computed, and why
    environment: pd.DataFrame = field(default_factory=pd.DataFrame)  # `what, value` (environment_table)
    provenance: str = ""  # one line naming the study, machine and versions, for figure footers
    n_records: int = 0
    status_counts: dict = field(default_factory=dict)
    claims: Any = None  # the study's StudyClaims (loaderbench.analysis.claims), set where the study is analysed

    @property
    def ok(self) -> pd.DataFrame:
        return ok_rows(self.rows)

    @property
    def no_gpu(self) -> bool:
        """Whether every record of the study says CUDA was not available (the environment's one value is False):
        rules of thumb that count GPUs (loaderbench.analysis.report.recommend.NEEDS_GPU) do not apply."""
        env = self.environment
        if env is None or env.empty:
            return False
        values = env.loc[env["what"] == "CUDA available", "value"]
        return len(values) == 1 and str(values.iloc[0]) == "False"


def is_reference(df: pd.DataFrame) -> pd.Series:
    """Rows of decode-only reference cells (`jpeg_stage == "decode"`)."""
    if "jpeg_stage" not in df:
        return pd.Series(False, index=df.index)
    return df["jpeg_stage"].astype(object).eq("decode")


def _axis_rows(frame: pd.DataFrame, axes: list[str]) -> list[dict]:
    """Each row's values of `axes` as plain Python (records.plain), one dict per row: read by column, not as a
    Series per row."""
    columns = [[plain(v) for v in frame[a].tolist()] for a in axes]
    return [dict(zip(axes, vals)) for vals in zip(*columns)] if axes else [{} for _ in range(len(frame))]


def assign_panels(cells: pd.DataFrame) -> pd.DataFrame:
    """`cells` (one row per cell_id, with axis columns) -> rows `cell_id, panel` (N=0 cells may map to several)."""
    # the workload's own parameters first in a panel's name ("jpeg · decoder=pil · start_method=spawn")
    axes = sorted(
        (a for a in AXIS_COLUMNS if a in cells and a not in _OWN),
        key=lambda a: (a not in _WORKLOAD_PARAMS, AXIS_COLUMNS.index(a)),
    )
    out: list[tuple[str, str]] = []
    for workload, sub in cells.groupby("workload", sort=False, dropna=False):
        sub = sub.copy()
        n = pd.to_numeric(sub["num_workers"], errors="coerce").fillna(0)
        with_workers = sub[n >= 1]
        basis = with_workers if not with_workers.empty else sub
        values = {a: [plain(v) for v in basis[a]] for a in axes}
        # an axis varies when it takes two values; None (it does not apply) comes from another axis that varies
        # (storage = "local" has no latency_ms), which already names the panel
        varying = [a for a in axes if len({repr(v) for v in values[a] if v is not None}) > 1]

        def label(vals: dict, varying=varying, workload=workload) -> str:
            parts = [f"{a}={value_text(vals[a])}" for a in varying if vals.get(a) is not None]
            return " · ".join([str(workload)] + parts)

        panel_of: dict[tuple, str] = {}
        for vals in _axis_rows(basis, varying):
            panel_of[tuple(vals[a] for a in varying)] = label(vals)
        has_workers = set(with_workers["cell_id"])
        for cell_id, vals in zip(sub["cell_id"].tolist(), _axis_rows(sub, varying)):
            if cell_id in has_workers or with_workers.empty:
                out.append((cell_id, label(vals)))
                continue
            # an N=0 cell: axes that mean nothing without workers (None here, or worker-only) match any value
            wild = {a for a in varying if vals[a] is None or a in WORKER_ONLY_AXES}
            matches = {p for key, p in panel_of.items() if all(a in wild or vals[a] == k for a, k in zip(varying, key))}
            if not matches:
                matches = {label({a: (None if a in wild else v) for a, v in vals.items()})}
            out += [(cell_id, p) for p in sorted(matches)]
    return pd.DataFrame(out, columns=["cell_id", "panel"])


def panel_order(panels) -> list[str]:
    def key(p: str):
        w = p.split(" · ")[0]
        return (WORKLOAD_ORDER.index(w) if w in WORKLOAD_ORDER else len(WORKLOAD_ORDER), w, p)

    return sorted(set(panels), key=key)


def _decode_rates(ref_cells: pd.DataFrame) -> pd.DataFrame:
    """Per decoder: the best decode-only rate per core among the reference cells."""
    if ref_cells.empty:
        return pd.DataFrame(columns=["decoder", "rate_per_core", "ref_cell", "ref_n"])
    r = ref_cells[ref_cells["n"] > 0].copy()
    if r.empty:
        return pd.DataFrame(columns=["decoder", "rate_per_core", "ref_cell", "ref_n"])
    nw = pd.to_numeric(r["num_workers"], errors="coerce").fillna(0)
    busy = np.maximum(1, np.minimum(nw, pd.to_numeric(r["cores"], errors="coerce").fillna(1)))
    r["rate_per_core"] = r["median"] / busy  # main-process decoding uses one core
    r["decoder"] = r["decoder"].astype(object).where(r["decoder"].notna(), None) if "decoder" in r else None
    best = r.sort_values("rate_per_core", ascending=False).drop_duplicates("decoder")
    return best.rename(columns={"cell_id": "ref_cell", "n": "ref_n"})[["decoder", "rate_per_core", "ref_cell", "ref_n"]]


#: The tidy columns this module reads (the rest is dropped first: filtering a narrow table is fast).
METRICS_USED = [
    "samples_per_s",
    "end_to_end_samples_per_s",
    "total_s",
    "time_to_first_batch_s",
    "uss_peak_bytes",
    "pss_peak_bytes",
    "ctx_involuntary",
    "processes_peak",
]
_ID_COLUMNS = ["study", "cell_id", "repetition", "status", "error_kind", "error_message", "path"]


def _narrow(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in [*_ID_COLUMNS, *AXIS_COLUMNS, *METRICS_USED] if c in df]
    out = as_objects(df[cols].copy())
    for c in METRICS_USED:
        if c in out:
            out[c] = pd.to_numeric(out[c], errors="coerce")
    return out


_EMPTY = np.array([])


def _at(values: dict, panel, cores, n) -> np.ndarray:
    """The ok values of `_value_index` at one (panel, cores, num_workers); none when nothing was measured there."""
    return values.get((panel, cores, n), _EMPTY)


def _value_index(rows: pd.DataFrame, col: str = "samples_per_s") -> dict[tuple, np.ndarray]:
    """(panel, cores, num_workers) -> finite values of `col` over ok repetitions."""
    ok = ok_rows(rows)
    out = {}
    for key, s in ok.groupby(["panel", "cores", "num_workers"], sort=False)[col]:
        v = s.to_numpy(dtype=float)
        out[key] = v[np.isfinite(v)]
    return out


def _problems(rows: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    c = cells.drop_duplicates("cell_id")
    bad = c[(c["n_not_ok"] > 0) | c["unstable"] | ((c["n"] == 0) & (c["n_not_ok"] == 0))]
    if bad.empty:
        return bad.assign(reason=pd.Series(dtype=str))
    failed = rows[rows["cell_id"].isin(bad["cell_id"]) & ~ok_mask(rows)].drop_duplicates(["cell_id", "repetition"])
    why = {}
    for cid, g in failed.groupby("cell_id"):
        kinds = g["error_kind"].fillna(g["status"]).value_counts()
        msg = g["error_message"].dropna()
        text = ", ".join(f"{k} x{v}" if v > 1 else str(k) for k, v in kinds.items())
        if not msg.empty:
            text += f": {msg.value_counts().index[0]}"
        why[cid] = text
    out = bad.copy()
    reasons = []
    for _, r in out.iterrows():
        parts = []
        if r["unstable"]:
            parts.append(f"unstable: IQR is {r['iqr_rel']:.0%} of the median (n = {r['n']})")
        if r["cell_id"] in why:
            parts.append(f"{r['n_not_ok']} of {r['n'] + r['n_not_ok']} repetitions not ok ({why[r['cell_id']]})")
        elif r["n"] == 0:
            parts.append("no repetition with a throughput value")
        reasons.append("; ".join(parts))
    out["reason"] = reasons
    return out


# ----------------------------------------------------------------------------------------------
# one study, phase by phase: select its rows, summarize its cells, then its curves, rules and problems


def _select(full: pd.DataFrame) -> pd.DataFrame:
    """The study's rows, every status, narrowed to the columns read here, num_workers and cores as numbers."""
    rows = _narrow(full)
    if "jpeg_stage" not in rows:
        rows["jpeg_stage"] = None
    for col in ("num_workers", "cores"):
        rows[col] = pd.to_numeric(rows[col], errors="coerce")
    return rows


def _summarize_cells(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: the summary of its throughput (loaderbench.analysis.table.summary.summarize), its axes, and the
    median of
    each other metric the report shows (`<metric>_median`)."""
    axes = [a for a in AXIS_COLUMNS if a in rows]
    cells = summarize(rows, by=["cell_id"], value="samples_per_s")
    first = rows.drop_duplicates("cell_id").set_index("cell_id")
    cells = cells.join(first[axes], on="cell_id")
    ok = ok_rows(rows)
    for extra in ("time_to_first_batch_s", "uss_peak_bytes", "pss_peak_bytes", "ctx_involuntary", "processes_peak"):
        if extra in rows:
            med = pd.to_numeric(ok[extra], errors="coerce").groupby(ok["cell_id"]).median().rename(f"{extra}_median")
            cells = cells.join(med, on="cell_id")
    return cells


#: A comparison's columns, as `vs_main_<name>` (the knee against main-process loading) and `vs_knee_<name>` (a
#: rule of thumb against the knee).
COMPARISON_COLUMNS = ("ratio", "ci_low", "ci_high", "ci_coverage", "n", "p", "verdict", "reason")


def _compared(c: Comparison | None, verdict: str = NOT_MEASURED) -> tuple:
    """The values of COMPARISON_COLUMNS for `c`; without a comparison, NaN and `verdict`."""
    if c is None:
        return np.nan, np.nan, np.nan, np.nan, "", np.nan, verdict, ""
    return c.ratio, c.ci_low, c.ci_high, c.ci_coverage, f"{c.n_a} v {c.n_b}", c.p_value, c.verdict, c.reason


def _decode_ceiling(g: pd.DataFrame, cores, rates: pd.DataFrame) -> dict:
    """The decode-only ceiling of a full jpeg curve `g`: the best decode rate per core of its decoder (else of a
    reference cell without one) times the cores; NaN for other workloads or without a reference cell."""
    out = {"decode_rate_per_core": np.nan, "decode_ceiling": np.nan}
    if g["workload"].iloc[0] != "jpeg" or rates.empty:
        return out
    dec = plain(g["decoder"].iloc[0]) if "decoder" in g else None
    match = rates[rates["decoder"].map(plain) == dec] if dec is not None else rates
    if match.empty and dec is not None:
        match = rates[rates["decoder"].isna()]
    if not match.empty:
        rate = float(match["rate_per_core"].max())
        out.update(decode_rate_per_core=rate, decode_ceiling=rate * float(cores))
    return out


def _curve(key: tuple, g: pd.DataFrame, cells: pd.DataFrame, rates: pd.DataFrame, values: dict, within: float) -> dict:
    """One curve, `key` = (panel, cores): its rows `g` and cells -> best, knee, the one-worker and main-process
    rates, the decode ceiling, and the knee compared with main-process loading (does using workers help at
    all?)."""
    panel, cores = key
    rec: dict = {
        "panel": panel,
        "cores": cores,
        "workload": g["workload"].iloc[0],
        "n_values": int(cells["num_workers"].nunique()),
        "cells_failed": int((cells["n"] == 0).sum()),
        "cells_unstable": int(cells["unstable"].sum()),
    }
    med = medians_by_n(g)
    if med.empty:
        rec.update(best_n=np.nan, best_x=np.nan, knee_n=np.nan, knee_x=np.nan)
    else:
        k = knee_of_medians(med, within)
        rec.update(best_n=k.best_n, best_x=k.best_x, knee_n=k.knee_n, knee_x=k.knee_x)
    one = med.get(1.0, med.get(1, np.nan)) if not med.empty else np.nan
    rec["x_one_worker"] = float(one) if one is not None else np.nan
    rec["x_main_process"] = float(med.get(0.0, med.get(0, np.nan))) if not med.empty else np.nan
    rec.update(_decode_ceiling(g, cores, rates))
    c = None
    if not med.empty and 0 in set(med.index) and rec["knee_n"] != 0:
        c = compare(_at(values, panel, cores, 0), _at(values, panel, cores, rec["knee_n"]))
    rec.update(zip([f"vs_main_{k}" for k in COMPARISON_COLUMNS], _compared(c)))
    return rec


def _with_usl(curves: pd.DataFrame, ok: pd.DataFrame) -> pd.DataFrame:
    """`curves` with the USL fit of each (`usl_<column>` of loaderbench.analysis.table.usl.fit_usl_groups) over the ok
    rows."""
    ok = _curve_columns(ok, "num_workers", "samples_per_s", "status")
    usl = fit_usl_groups(ok, by=CURVE_KEYS) if not ok.empty else pd.DataFrame(columns=[*CURVE_KEYS, "good", "reason"])
    if not usl.empty:
        usl_cols = usl.rename(columns={c: f"usl_{c}" for c in usl.columns if c not in CURVE_KEYS})
        curves = curves.merge(usl_cols, on=CURVE_KEYS, how="left")
    for c in ("usl_good", "usl_reason"):
        if c not in curves:
            curves[c] = False if c == "usl_good" else "no ok rows with num_workers >= 1"
    curves["usl_good"] = curves["usl_good"].fillna(False).astype(bool)
    curves["usl_reason"] = curves["usl_reason"].fillna("no ok rows with num_workers >= 1")
    return curves


def _curve_columns(rows: pd.DataFrame, *names: str) -> pd.DataFrame:
    """`rows` with the curve's keys and those of `names` it has alone: what a reader of one curve reads, so that
    cutting the rows by curve takes those columns only."""
    return rows[[c for c in dict.fromkeys([*CURVE_KEYS, *names]) if c in rows]]


def _curves(
    rows: pd.DataFrame, cells: pd.DataFrame, references: pd.DataFrame, values: dict, order: dict, within: float
) -> tuple[pd.DataFrame, list[str]]:
    """One row per curve (knee and best over ok rows, N=0 included; USL over N >= 1), in panel order; and a note
    when nothing was measured."""
    rates = _decode_rates(references)
    cell_groups = dict(list(cells.groupby(CURVE_KEYS, sort=False)))
    read = _curve_columns(rows, "workload", "decoder", "num_workers", "samples_per_s", "status")
    curves = pd.DataFrame(
        [_curve(key, g, cell_groups[key], rates, values, within) for key, g in read.groupby(CURVE_KEYS, sort=False)]
    )
    notes = []
    if curves.empty:
        curves = cells[CURVE_KEYS].drop_duplicates().sort_values(CURVE_KEYS).assign(best_x=np.nan, knee_n=np.nan)
        notes.append("no repetition of this study has a throughput value: nothing to fit or recommend")
    curves = _with_usl(curves, ok_rows(rows))
    curves = curves.assign(_o=curves["panel"].map(order)).sort_values(["_o", "cores"]).drop(columns="_o")
    return curves.reset_index(drop=True), notes


def _rules(ok: pd.DataFrame, values: dict, order: dict, within: float) -> pd.DataFrame:
    """Each rule of thumb on each curve (loaderbench.analysis.report.recommend.evaluate_rules), compared with the
    knee by a
    test,
    not a ratio of two runs."""
    ok = _curve_columns(ok, "num_workers", "samples_per_s", "status", "uss_peak_bytes")
    rules = (
        evaluate_rules(ok, by=CURVE_KEYS, within=within)
        if not ok.empty
        else pd.DataFrame(columns=[*CURVE_KEYS, "rule", "rule_label"])
    )
    verdicts = []
    for _, r in rules.iterrows():
        if r["match"] != "exact" or r["rule_n"] == r["knee_n"]:
            verdicts.append(
                _compared(None, "same as knee" if r["rule_n"] == r["knee_n"] else f"{NOT_MEASURED} ({r['match']})")
            )
            continue
        verdicts.append(
            _compared(
                compare(
                    _at(values, r["panel"], r["cores"], r["knee_n"]), _at(values, r["panel"], r["cores"], r["rule_n"])
                )
            )
        )
    cols = [f"vs_knee_{k}" for k in COMPARISON_COLUMNS]
    rules[cols] = pd.DataFrame(verdicts, index=rules.index) if verdicts else pd.DataFrame(columns=range(len(cols)))
    if not rules.empty:
        rules = rules.assign(_o=rules["panel"].map(order), _r=rules["rule"].map(list(RULE_LABELS).index))
        rules = rules.sort_values(["_o", "cores", "_r"]).drop(columns=["_o", "_r"]).reset_index(drop=True)
    return rules


def _ceiling_notes(has_jpeg: bool, references: pd.DataFrame) -> list[str]:
    if not has_jpeg:
        return ["no jpeg workload in this study: no decode ceiling to draw"]
    if references.empty:
        return [
            "decode ceiling not measured: the study has no decode-only reference cell "
            '(a jpeg cell with jpeg_stage = "decode")'
        ]
    return []


def analyze_study(df: pd.DataFrame, study: str, *, within: float = 0.05) -> StudyAnalysis:
    """Summaries, curves, fits, rules and problems of one study (`df` may hold other studies too)."""
    full = df[df["study"] == study]
    rows_all = _select(full)
    cells = _summarize_cells(rows_all)
    ref_mask = is_reference(cells)
    references, main_cells = cells[ref_mask].copy(), cells[~ref_mask]
    has_jpeg = bool((main_cells["workload"] == "jpeg").any())
    panels_map = assign_panels(main_cells)  # jpeg_stage names a panel only where it varies (read vs full)
    cells_p = main_cells.merge(panels_map, on="cell_id", how="inner")
    rows = rows_all[~is_reference(rows_all)].merge(panels_map, on="cell_id", how="inner")
    panels = panel_order(cells_p["panel"])
    order = {p: i for i, p in enumerate(panels)}
    values = _value_index(rows)
    curves, notes = _curves(rows, cells_p, references, values, order, within)
    rules = _rules(ok_rows(rows), values, order, within)
    problems = _problems(rows_all, pd.concat([cells_p, references.assign(panel="decode-only reference")]))
    return StudyAnalysis(
        study=study,
        rows=rows,
        cells=cells_p,
        curves=curves,
        rules=rules,
        references=references,
        problems=problems,
        panels=panels,
        has_jpeg=has_jpeg,
        notes=notes + _ceiling_notes(has_jpeg, references),
        environment=environment_table(full),
        provenance=provenance(full, study),
        n_records=len(rows_all),
        status_counts=rows_all["status"].value_counts().to_dict(),
    )

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

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.environment import environment_table, provenance
from analysis.recommend import RULE_LABELS, evaluate_rules, knee, medians_by_n
from analysis.records import AXIS_COLUMNS, WORKER_ONLY_AXES
from analysis.intervals import pct
from analysis.stats import compare, summarize
from analysis.verdicts import NOT_MEASURED
from analysis.usl import fit_usl_groups

WORKLOAD_ORDER = ["sleep", "cpu", "jpeg"]
#: Axes that are not part of a panel's name: the curve's x axis, its colour, and the workload itself.
_OWN = ("workload", "num_workers", "cores")
CURVE_KEYS = ["panel", "cores"]
_WORKLOAD_PARAMS = ("sleep_ms", "cpu_work", "decoder", "sample_kb", "tensors_per_sample", "fault", "fault_at")


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

    @property
    def ok(self) -> pd.DataFrame:
        return self.rows[self.rows["status"] == "ok"]


def _norm(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def _fmt_value(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def is_reference(df: pd.DataFrame) -> pd.Series:
    """Rows of decode-only reference cells (`jpeg_stage == "decode"`)."""
    if "jpeg_stage" not in df:
        return pd.Series(False, index=df.index)
    return df["jpeg_stage"].astype(object).eq("decode")


def assign_panels(cells: pd.DataFrame) -> pd.DataFrame:
    """`cells` (one row per cell_id, with axis columns) -> rows `cell_id, panel` (N=0 cells may map to several)."""
    # the workload's own parameters first in a panel's name ("jpeg · decoder=pil · start_method=spawn")
    axes = sorted((a for a in AXIS_COLUMNS if a in cells and a not in _OWN),
                  key=lambda a: (a not in _WORKLOAD_PARAMS, AXIS_COLUMNS.index(a)))
    out: list[tuple[str, str]] = []
    for workload, sub in cells.groupby("workload", sort=False, dropna=False):
        sub = sub.copy()
        n = pd.to_numeric(sub["num_workers"], errors="coerce").fillna(0)
        with_workers = sub[n >= 1]
        basis = with_workers if not with_workers.empty else sub
        values = {a: [_norm(v) for v in basis[a]] for a in axes}
        varying = [a for a in axes if len({repr(v) for v in values[a]}) > 1]

        def label(vals: dict) -> str:
            parts = [f"{a}={_fmt_value(vals[a])}" for a in varying if vals.get(a) is not None]
            return " · ".join([str(workload)] + parts)

        panel_of: dict[tuple, str] = {}
        for _, r in basis.iterrows():
            vals = {a: _norm(r[a]) for a in varying}
            panel_of[tuple(vals[a] for a in varying)] = label(vals)
        has_workers = set(with_workers["cell_id"])
        for _, r in sub.iterrows():
            vals = {a: _norm(r[a]) for a in varying}
            if r["cell_id"] in has_workers or with_workers.empty:
                out.append((r["cell_id"], label(vals)))
                continue
            # an N=0 cell: axes that mean nothing without workers (None here, or worker-only) match any value
            wild = {a for a in varying if vals[a] is None or a in WORKER_ONLY_AXES}
            matches = {p for key, p in panel_of.items()
                       if all(a in wild or vals[a] == k for a, k in zip(varying, key))}
            if not matches:
                matches = {label({a: (None if a in wild else v) for a, v in vals.items()})}
            out += [(r["cell_id"], p) for p in sorted(matches)]
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
METRICS_USED = ["samples_per_s", "end_to_end_samples_per_s", "total_s", "time_to_first_batch_s", "uss_peak_bytes",
                "pss_peak_bytes", "ctx_involuntary", "processes_peak"]
_ID_COLUMNS = ["study", "cell_id", "repetition", "status", "error_kind", "error_message", "path"]


def _narrow(df: pd.DataFrame) -> pd.DataFrame:
    cols = [c for c in [*_ID_COLUMNS, *AXIS_COLUMNS, *METRICS_USED] if c in df]
    out = df[cols].copy()
    for c in cols:  # Arrow-backed strings are slow to filter row by row; plain objects are not
        if out[c].dtype == "str" or str(out[c].dtype).startswith("string"):
            out[c] = out[c].astype(object).where(out[c].notna(), None)
    for c in METRICS_USED:
        if c in out:
            out[c] = pd.to_numeric(out[c], errors="coerce")
    return out


def _value_index(rows: pd.DataFrame, col: str = "samples_per_s") -> dict[tuple, np.ndarray]:
    """(panel, cores, num_workers) -> finite values of `col` over ok repetitions."""
    ok = rows[rows["status"] == "ok"]
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
    failed = rows[(rows["status"] != "ok") & rows["cell_id"].isin(bad["cell_id"])].drop_duplicates(["cell_id", "repetition"])
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


def analyze_study(df: pd.DataFrame, study: str, *, within: float = 0.05) -> StudyAnalysis:
    """Summaries, curves, fits, rules and problems of one study (`df` may hold other studies too)."""
    full = df[df["study"] == study]
    environment, prov = environment_table(full), provenance(full, study)
    rows_all = _narrow(full)
    notes: list[str] = []
    if "jpeg_stage" not in rows_all:
        rows_all["jpeg_stage"] = None
    for col in ("num_workers", "cores"):
        rows_all[col] = pd.to_numeric(rows_all[col], errors="coerce")
    axes = [a for a in AXIS_COLUMNS if a in rows_all]

    cells = summarize(rows_all, by=["cell_id"], value="samples_per_s")
    first = rows_all.drop_duplicates("cell_id").set_index("cell_id")
    cells = cells.join(first[axes], on="cell_id")
    for extra in ("time_to_first_batch_s", "uss_peak_bytes", "pss_peak_bytes", "ctx_involuntary",
                  "processes_peak"):
        if extra in rows_all:
            ok = rows_all[rows_all["status"] == "ok"]
            med = pd.to_numeric(ok[extra], errors="coerce").groupby(ok["cell_id"]).median().rename(f"{extra}_median")
            cells = cells.join(med, on="cell_id")

    ref_mask = is_reference(cells)
    references = cells[ref_mask].copy()
    main_cells = cells[~ref_mask]
    has_jpeg = bool((main_cells["workload"] == "jpeg").any())
    panels_map = assign_panels(main_cells.drop(columns=["jpeg_stage"], errors="ignore"))
    cells_p = main_cells.merge(panels_map, on="cell_id", how="inner")
    rows = rows_all[~is_reference(rows_all)].merge(panels_map, on="cell_id", how="inner")
    panels = panel_order(cells_p["panel"])

    # --- per curve: knee and best over ok rows (N=0 included), USL over N >= 1 ---
    ok_rows = rows[rows["status"] == "ok"]
    keys_all = cells_p[CURVE_KEYS].drop_duplicates().sort_values(CURVE_KEYS)
    usl = (fit_usl_groups(ok_rows, by=CURVE_KEYS) if not ok_rows.empty
           else pd.DataFrame(columns=[*CURVE_KEYS, "good", "reason"]))
    rates = _decode_rates(references)
    values = _value_index(rows)
    empty = np.array([])

    def vals(panel, cores, n) -> np.ndarray:
        return values.get((panel, cores, n), empty)

    cell_groups = dict(list(cells_p.groupby(CURVE_KEYS, sort=False)))
    curve_rows = []
    for (panel, cores), g in rows.groupby(CURVE_KEYS, sort=False):
        rec: dict = {"panel": panel, "cores": cores, "workload": g["workload"].iloc[0]}
        c_cells = cell_groups[(panel, cores)]
        rec["n_values"] = int(c_cells["num_workers"].nunique())
        rec["cells_failed"] = int((c_cells["n"] == 0).sum())
        rec["cells_unstable"] = int(c_cells["unstable"].sum())
        med = medians_by_n(g)
        if med.empty:
            rec.update(best_n=np.nan, best_x=np.nan, knee_n=np.nan, knee_x=np.nan)
        else:
            k = knee(g, within=within)
            rec.update(best_n=k.best_n, best_x=k.best_x, knee_n=k.knee_n, knee_x=k.knee_x)
        one = med.get(1.0, med.get(1, np.nan)) if not med.empty else np.nan
        rec["x_one_worker"] = float(one) if one is not None else np.nan
        rec["x_main_process"] = float(med.get(0.0, med.get(0, np.nan))) if not med.empty else np.nan
        # decode ceiling for the full jpeg pipeline
        rec["decode_rate_per_core"] = np.nan
        rec["decode_ceiling"] = np.nan
        if rec["workload"] == "jpeg" and not rates.empty:
            dec = _norm(g["decoder"].iloc[0]) if "decoder" in g else None
            match = rates[rates["decoder"].map(_norm) == dec] if dec is not None else rates
            if match.empty and dec is not None:
                match = rates[rates["decoder"].isna()]
            if not match.empty:
                rate = float(match["rate_per_core"].max())
                rec["decode_rate_per_core"] = rate
                rec["decode_ceiling"] = rate * float(cores)
        # does using workers help at all? the knee against main-process loading, with a test
        rec.update(vs_main_ratio=np.nan, vs_main_ci_low=np.nan, vs_main_ci_high=np.nan, vs_main_ci_coverage=np.nan,
                   vs_main_n="", vs_main_p=np.nan, vs_main_verdict=NOT_MEASURED, vs_main_reason="")
        if not med.empty and 0 in set(med.index) and rec["knee_n"] != 0:
            c = compare(vals(panel, cores, 0), vals(panel, cores, rec["knee_n"]))
            rec.update(vs_main_ratio=c.ratio, vs_main_ci_low=c.ci_low, vs_main_ci_high=c.ci_high,
                       vs_main_ci_coverage=c.ci_coverage, vs_main_n=f"{c.n_a} v {c.n_b}", vs_main_p=c.p_value,
                       vs_main_verdict=c.verdict, vs_main_reason=c.reason)
        curve_rows.append(rec)
    curves = pd.DataFrame(curve_rows)
    if curves.empty:
        curves = keys_all.assign(best_x=np.nan, knee_n=np.nan)
        notes.append("no repetition of this study has a throughput value: nothing to fit or recommend")
    if not usl.empty:
        usl_cols = usl.rename(columns={c: f"usl_{c}" for c in usl.columns if c not in CURVE_KEYS})
        curves = curves.merge(usl_cols, on=CURVE_KEYS, how="left")
    for c in ("usl_good", "usl_reason"):
        if c not in curves:
            curves[c] = False if c == "usl_good" else "no ok rows with num_workers >= 1"
    curves["usl_good"] = curves["usl_good"].fillna(False).astype(bool)
    curves["usl_reason"] = curves["usl_reason"].fillna("no ok rows with num_workers >= 1")
    order = {p: i for i, p in enumerate(panels)}
    curves = curves.assign(_o=curves["panel"].map(order)).sort_values(["_o", "cores"]).drop(columns="_o")
    curves = curves.reset_index(drop=True)

    # --- rules of thumb, each compared with the knee (a test, not a ratio of two runs) ---
    rules = (evaluate_rules(ok_rows, by=CURVE_KEYS, within=within) if not ok_rows.empty
             else pd.DataFrame(columns=[*CURVE_KEYS, "rule", "rule_label"]))
    verdicts = []
    for _, r in rules.iterrows():
        if r["match"] != "exact" or r["rule_n"] == r["knee_n"]:
            verdicts.append((np.nan, np.nan, np.nan, np.nan, "", np.nan, "same as knee" if r["rule_n"] == r["knee_n"]
                             else f"{NOT_MEASURED} ({r['match']})", ""))
            continue
        c = compare(vals(r["panel"], r["cores"], r["knee_n"]), vals(r["panel"], r["cores"], r["rule_n"]))
        verdicts.append((c.ratio, c.ci_low, c.ci_high, c.ci_coverage, f"{c.n_a} v {c.n_b}", c.p_value, c.verdict,
                         c.reason))
    cols = ["vs_knee_ratio", "vs_knee_ci_low", "vs_knee_ci_high", "vs_knee_ci_coverage", "vs_knee_n", "vs_knee_p",
            "vs_knee_verdict", "vs_knee_reason"]
    rules[cols] = (pd.DataFrame(verdicts, index=rules.index) if verdicts else pd.DataFrame(columns=range(len(cols))))
    if not rules.empty:
        rules = rules.assign(_o=rules["panel"].map(order), _r=rules["rule"].map(list(RULE_LABELS).index))
        rules = rules.sort_values(["_o", "cores", "_r"]).drop(columns=["_o", "_r"]).reset_index(drop=True)

    problems = _problems(rows_all, pd.concat([cells_p, references.assign(panel="decode-only reference")]))
    if not has_jpeg:
        notes.append("no jpeg workload in this study: no decode ceiling to draw")
    elif references.empty:
        notes.append("decode ceiling not measured: the study has no decode-only reference cell "
                     "(a jpeg cell with jpeg_stage = \"decode\")")
    return StudyAnalysis(study=study, rows=rows, cells=cells_p, curves=curves, rules=rules, references=references,
                         problems=problems, panels=panels, has_jpeg=has_jpeg, notes=notes, environment=environment,
                         provenance=prov, n_records=len(rows_all),
                         status_counts=rows_all["status"].value_counts().to_dict())


def _plural(n, word: str) -> str:
    n = int(n)
    return f"{n} {word}{'' if n == 1 else 's'}"


def reading(curve: pd.Series) -> str:
    """One line a reader can check against the figure, e.g.
    "cpu on 2 cores: best 812 samples/s at 3 workers; knee at 2 workers"."""
    head = f"{curve['panel']} on {_plural(curve['cores'], 'core')}"
    if not np.isfinite(curve.get("best_x", np.nan)):
        return f"{head}: every repetition failed, no throughput measured"
    def at(n) -> str:
        return _plural(n, "worker") + (" (main-process loading)" if int(n) == 0 else "")

    text = f"{head}: best {curve['best_x']:,.0f} samples/s at {at(curve['best_n'])}; knee at {at(curve['knee_n'])}"
    if curve.get("n_values", 2) < 2:
        text += " (only one num_workers value measured: no curve)"
    ratio = curve.get("vs_main_ratio", np.nan)
    if np.isfinite(ratio):
        verdict = curve["vs_main_verdict"]
        text += f"; {ratio:.2f}x the main-process rate ({verdict}"
        lo, hi = curve.get("vs_main_ci_low", np.nan), curve.get("vs_main_ci_high", np.nan)
        if np.isfinite(lo) and np.isfinite(hi):
            text += (f": interval {lo:.2f}-{hi:.2f}x, {pct(curve.get('vs_main_ci_coverage', np.nan))} coverage, "
                     f"{curve.get('vs_main_n', '')} repetitions")
        text += ")"
    if curve.get("usl_good", False):
        pn = curve["usl_peak_n"]
        text += (f"; USL σ {curve['usl_sigma']:.3f}, κ {curve['usl_kappa']:.2g}, "
                 + (f"peak at N* = {pn:.1f}" if np.isfinite(pn) else "no peak (kappa = 0)"))
    elif isinstance(curve.get("usl_reason"), str) and curve.get("usl_reason"):
        text += f"; no USL fit shown ({curve['usl_reason'].replace('r2 =', 'R² =')})"
    ceiling = curve.get("decode_ceiling", np.nan)
    if np.isfinite(ceiling):
        share = curve["best_x"] / ceiling
        text += f"; decode ceiling {ceiling:,.0f} samples/s, best reaches {share:.0%} of it"
        if share > 1.05:
            text += " (above the ceiling: the ceiling or the curve was disturbed, see the unstable cells)"
    return text

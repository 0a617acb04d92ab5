"""The report's text, computed from a study's analysis: numbers as strings (every formatter below turns a
missing value into "–"), one table of strings per kind (curves, rules of thumb, USL fits, ceilings, problems,
cells), and the one-line reading of a curve. loaderbench.analysis.report.page puts them into sections;
loaderbench.analysis.report.layout lays
the sections out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from loaderbench.analysis.table.records import ok_rows
from loaderbench.analysis.table.scaling import StudyAnalysis
from loaderbench.analysis.text import fmt_coverage, fmt_int, fmt_interval, fmt_mib, fmt_num, fmt_pct, fmt_test, plural
from loaderbench.stats.intervals import pct
from loaderbench.stats.rules_of_thumb import NEEDS_GPU, NO_GPU

MAX_TABLE_ROWS = 300  # longer tables are cut (the CSV next to the figures has every row)


# ----------------------------------------------------------------------------------------------
# numbers as text


def cut_rows(frame: pd.DataFrame, csv_name: str) -> tuple[pd.DataFrame, str]:
    """The first MAX_TABLE_ROWS rows of `frame`, and a note naming the CSV that has every row ("" when none
    were cut)."""
    if len(frame) <= MAX_TABLE_ROWS:
        return frame, ""
    return frame.head(MAX_TABLE_ROWS), f"first {MAX_TABLE_ROWS} of {len(frame)} rows; every row is in {csv_name}"


# ----------------------------------------------------------------------------------------------
# tables of strings, one row per curve, rule or cell


def usl_table(a: StudyAnalysis) -> pd.DataFrame:
    c = a.curves
    rows = []
    for _, r in c.iterrows():
        good = bool(r.get("usl_good", False))
        has = np.isfinite(r.get("usl_lam", np.nan))
        rows.append(
            {
                "curve": r["panel"],
                "cores": fmt_int(r["cores"]),
                "λ (1 worker, samples/s)": fmt_num(r.get("usl_lam")) if has else "–",
                "σ contention": fmt_num(r.get("usl_sigma")) if has else "–",
                "κ crosstalk": fmt_num(r.get("usl_kappa")) if has else "–",
                "peak N*": fmt_num(r.get("usl_peak_n")) if has else "–",
                "X(N*) samples/s": fmt_num(r.get("usl_peak_x")) if has else "–",
                "R²": fmt_num(r.get("usl_r2")) if has else "–",
                "points (distinct N)": f"{fmt_int(r.get('usl_n_points'))} ({fmt_int(r.get('usl_n_distinct'))})",
                "fit": "good"
                if good
                else "poor, not drawn: " + str(r.get("usl_reason") or "no data").replace("r2 =", "R² ="),
            }
        )
    return pd.DataFrame(rows)


def curve_table(a: StudyAnalysis) -> pd.DataFrame:
    rows = []
    for _, r in a.curves.iterrows():
        rows.append(
            {
                "curve": r["panel"],
                "cores": fmt_int(r["cores"]),
                "best: num_workers": fmt_int(r.get("best_n")),
                "best samples/s": fmt_num(r.get("best_x")),
                "knee: num_workers": fmt_int(r.get("knee_n")),
                "knee samples/s": fmt_num(r.get("knee_x")),
                "main process (0) samples/s": fmt_num(r.get("x_main_process")),
                "knee / main process [interval] (coverage, n)": (
                    f"{fmt_num(r.get('vs_main_ratio'))} "
                    f"[{fmt_interval(r.get('vs_main_ci_low'), r.get('vs_main_ci_high'))}] "
                    f"({fmt_coverage(r.get('vs_main_ci_coverage'))}, {r.get('vs_main_n', '')})"
                    if np.isfinite(r.get("vs_main_ratio", np.nan))
                    else "–"
                ),
                "test": fmt_test(r.get("vs_main_verdict", ""), r.get("vs_main_reason", "")),
            }
        )
    return pd.DataFrame(rows)


#: the columns of the rules table after the curve, its cores and the rule
_RULE_COLUMNS = (
    "num_workers",
    "samples/s",
    "lost vs best",
    "processes vs knee",
    "memory vs knee (MiB)",
    "rule vs knee (test)",
)


def rules_table(a: StudyAnalysis) -> pd.DataFrame:
    rows = []
    no_gpu = a.no_gpu  # once: it reads the environment table
    for _, r in a.rules.iterrows():
        row = {"curve": r["panel"], "cores": fmt_int(r["cores"]), "rule": r["rule_label"]}
        if no_gpu and r.get("rule") in NEEDS_GPU:
            rows.append({**row, **dict.fromkeys(_RULE_COLUMNS, "–"), "samples/s": NO_GPU})
            continue
        approx = {"exact": "", "interpolated": " (interpolated)", "nearest": " (nearest measured)"}.get(r["match"], "")
        test = fmt_test(r.get("vs_knee_verdict", ""), r.get("vs_knee_reason", ""))
        if np.isfinite(r.get("vs_knee_ratio", np.nan)):
            test += (
                f" ({fmt_num(r['vs_knee_ratio'])}x the knee, interval "
                f"{fmt_interval(r['vs_knee_ci_low'], r['vs_knee_ci_high'])}, "
                f"{fmt_coverage(r.get('vs_knee_ci_coverage'))} coverage, {r.get('vs_knee_n', '')}; "
                f"p = {fmt_num(r['vs_knee_p'], 2)})"
            )
        rows.append(
            {
                **row,
                "num_workers": fmt_int(r["rule_n"]),
                "samples/s": fmt_num(r["x_at_rule"]) + approx,
                "lost vs best": fmt_pct(r["loss_vs_best"]),
                "processes vs knee": f"{int(r['extra_procs_vs_knee']):+d}",
                "memory vs knee (MiB)": fmt_mib(r.get("extra_mem_bytes")),
                "rule vs knee (test)": test or "–",
            }
        )
    return pd.DataFrame(rows)


def ceiling_table(a: StudyAnalysis) -> pd.DataFrame:
    rows = []
    for _, r in a.curves.iterrows():
        x1, cores = r.get("x_one_worker", np.nan), float(r["cores"])
        ideal = x1 * cores if np.isfinite(x1) else np.nan
        ceiling = r.get("decode_ceiling", np.nan)
        if r["workload"] == "jpeg":
            dec = (
                f"{fmt_num(ceiling)} ({fmt_num(r['decode_rate_per_core'])}/core x {int(cores)})"
                if np.isfinite(ceiling)
                else "ceiling not measured"
            )
        else:
            dec = "n/a (not jpeg)"
        best = r.get("best_x", np.nan)
        rows.append(
            {
                "curve": r["panel"],
                "cores": fmt_int(cores),
                "1 worker samples/s": fmt_num(x1),
                "1-worker rate x cores": fmt_num(ideal),
                "best / (1-worker rate x cores)": fmt_pct(best / ideal) if np.isfinite(ideal) else "–",
                "decode-only ceiling samples/s": dec,
                "best / decode ceiling": fmt_pct(best / ceiling) if np.isfinite(ceiling) else "–",
            }
        )
    return pd.DataFrame(rows)


def problem_table(a: StudyAnalysis) -> pd.DataFrame:
    p = a.problems
    rows = []
    for _, r in p.sort_values(["panel", "cores", "num_workers"]).drop_duplicates("cell_id").iterrows():
        rows.append(
            {
                "curve": r.get("panel", ""),
                "cores": fmt_int(r["cores"]),
                "num_workers": fmt_int(r["num_workers"]),
                "ok": fmt_int(r["n"]),
                "not ok": fmt_int(r["n_not_ok"]),
                "median samples/s": fmt_num(r["median"]),
                "IQR/median": fmt_pct(r["iqr_rel"]),
                "reason": r["reason"],
                "cell": r["cell_id"],
            }
        )
    return pd.DataFrame(rows)


def cells_table(a: StudyAnalysis) -> pd.DataFrame:
    c = a.cells.drop_duplicates("cell_id").sort_values(["panel", "cores", "num_workers"])
    ref = a.references.assign(panel="decode-only reference") if not a.references.empty else None
    if ref is not None:
        c = pd.concat([c, ref])
    return pd.DataFrame(
        {
            "curve": c["panel"],
            "cores": c["cores"].map(fmt_int),
            "num_workers": c["num_workers"].map(fmt_int),
            "n": c["n"].map(fmt_int),
            "failed": c["n_not_ok"].map(fmt_int),
            "median samples/s": c["median"].map(fmt_num),
            "interval of the median": [fmt_interval(lo, hi) for lo, hi in zip(c["ci_low"], c["ci_high"])],
            "its coverage": c.get("ci_coverage", pd.Series(np.nan, index=c.index)).map(fmt_coverage),
            "IQR/median": c["iqr_rel"].map(fmt_pct),
            "unstable": np.where(c["unstable"], "UNSTABLE", ""),
            "first batch (s)": c.get("time_to_first_batch_s_median", pd.Series(np.nan, index=c.index)).map(fmt_num),
            "USS peak (MiB)": (c.get("uss_peak_bytes_median", pd.Series(np.nan, index=c.index)) / 2**20).map(
                lambda v: fmt_num(v)
            ),
        }
    )


def machine_noise(rows: pd.DataFrame) -> str | None:
    """The noise the machine showed during a study, from the reference timed beside every repetition: the spread
    of its rates, how far it moved within repetitions, others' and the hypervisor's share of the cells' cores, and
    how many repetitions were disturbed and measured again. None when no record carries the reference."""
    ok = ok_rows(rows)
    if "ref_python_per_s" not in ok:
        return None
    rate = pd.to_numeric(ok["ref_python_per_s"], errors="coerce").dropna()
    if rate.empty:
        return None
    med = float(rate.median())
    q1, q3 = rate.quantile([0.25, 0.75])

    def col(name: str) -> pd.Series:
        return pd.to_numeric(ok[name], errors="coerce").dropna() if name in ok else pd.Series(dtype=float)

    moved, others, steal = col("ref_python_change").abs(), col("others_share"), col("steal_fraction")
    disturbed = int(ok["disturbed"].map(lambda v: v is True).sum()) if "disturbed" in ok else 0
    remeasured = int(col("remeasured").sum())
    text = (
        f"Machine noise: the reference loop timed beside each of {len(rate)} repetitions ran at {fmt_num(med)} "
        f"units/s (median), its interquartile range {fmt_pct((q3 - q1) / med)} and its full range "
        f"{fmt_pct((rate.min() - med) / med, signed=True)} to {fmt_pct((rate.max() - med) / med, signed=True)} of the "
        f"median"
    )
    if not moved.empty:
        text += f"; within a repetition it moved {fmt_pct(moved.median())} (median), {fmt_pct(moved.max())} at most"
    if not others.empty:
        text += f"; other processes took up to {fmt_pct(others.max())} of a cell's cores"
    if not steal.empty:
        text += f", the hypervisor up to {fmt_pct(steal.max())}"
    return (
        text + f". {plural(remeasured, 'disturbed repetition')} measured again; {disturbed} of the "
        f"{len(ok)} kept ones still disturbed (the summary's 'samples/ref' columns divide each throughput by the "
        f"reference's rate)."
    )


def probe_cost(rows: pd.DataFrame) -> str | None:
    """What the probe that sampled each cell's processes from outside took: its CPU as a share of one CPU over the
    repetitions, and where it ran (CPUs the cell did not use, or the cell's own). None when no record says."""
    ok = ok_rows(rows)
    share = pd.to_numeric(ok["probe_cpu_share"], errors="coerce").dropna() if "probe_cpu_share" in ok else None
    if share is None or share.empty:
        return None
    text = (
        f"The probe that sampled each cell's processes from outside took {fmt_pct(share.median())} of one CPU "
        f"(median over {plural(len(share), 'repetition')}; {fmt_pct(share.max())} at most)"
    )
    if "probe_off_cell_cpus" in ok:
        where = ok.loc[share.index, "probe_off_cell_cpus"].dropna().astype(str)
        off = int((~where.isin(["[]", ""])).sum())
        if len(where):
            text += (
                f"; it ran on CPUs the cell did not use in {off} of {len(where)}, and shared the cell's cores in "
                f"the rest"
            )
    return text + "."


# ----------------------------------------------------------------------------------------------
# one line per curve


def reading(curve: pd.Series) -> str:
    """One line a reader can check against the figure, e.g.
    "cpu on 2 cores: best 812 samples/s at 3 workers; knee at 2 workers"."""
    head = f"{curve['panel']} on {plural(curve['cores'], 'core')}"
    if not np.isfinite(curve.get("best_x", np.nan)):
        return f"{head}: every repetition failed, no throughput measured"

    def at(n) -> str:
        return plural(n, "worker") + (" (main-process loading)" if int(n) == 0 else "")

    text = f"{head}: best {curve['best_x']:,.0f} samples/s at {at(curve['best_n'])}; knee at {at(curve['knee_n'])}"
    if curve.get("n_values", 2) < 2:
        text += " (only one num_workers value measured: no curve)"
    ratio = curve.get("vs_main_ratio", np.nan)
    if np.isfinite(ratio):
        verdict = curve["vs_main_verdict"]
        text += f"; {ratio:.2f}x the main-process rate ({verdict}"
        lo, hi = curve.get("vs_main_ci_low", np.nan), curve.get("vs_main_ci_high", np.nan)
        if np.isfinite(lo) and np.isfinite(hi):
            text += (
                f": interval {lo:.2f}-{hi:.2f}x, {pct(curve.get('vs_main_ci_coverage', np.nan))} coverage, "
                f"{curve.get('vs_main_n', '')} repetitions"
            )
        text += ")"
    if curve.get("usl_good", False):
        pn = curve["usl_peak_n"]
        text += f"; USL σ {curve['usl_sigma']:.3f}, κ {curve['usl_kappa']:.2g}, " + (
            f"peak at N* = {pn:.1f}" if np.isfinite(pn) else "no peak (kappa = 0)"
        )
    elif isinstance(curve.get("usl_reason"), str) and curve.get("usl_reason"):
        text += f"; no USL fit shown ({curve['usl_reason'].replace('r2 =', 'R² =')})"
    ceiling = curve.get("decode_ceiling", np.nan)
    if np.isfinite(ceiling):
        share = curve["best_x"] / ceiling
        text += f"; decode ceiling {ceiling:,.0f} samples/s, best reaches {share:.0%} of it"
        if share > 1.05:
            text += " (above the ceiling: the ceiling or the curve was disturbed, see the unstable cells)"
    return text

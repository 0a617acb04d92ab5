"""The report: one self-contained HTML file (figures inlined, no external reference, mailable) and the
same content as Markdown (figures linked by relative path), written next to the figures.

Built in two steps that never mix: `build_report` (here) turns the analyses into a list of sections
made of plain blocks (paragraphs, bullet lists, tables of strings, figures); `analysis.render` only
lays those blocks out, as Markdown or as HTML.
"""

from __future__ import annotations

import datetime as dt
import importlib
import math
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from analysis.aggregate import StudyAnalysis, reading
from analysis.intervals import (
    n_for_median,
    n_for_shift,
    order_coverage,
    order_k,
    pct,
    widest_shift_coverage,
)
from analysis.records import LoadReport
from analysis.render import (  # noqa: F401  (re-exported: the report's public API)
    Bullets,
    Code,
    Figure,
    Paragraph,
    Section,
    Table,
    slug,
    render_html,
    render_markdown,
)
from analysis.stats import coverage_text
from analysis.usl import MIN_DISTINCT_N, MIN_R2
from analysis.verdicts import CLAIM_CONFIDENCE, MIN_EFFECT

REPO = Path(__file__).resolve().parent.parent
#: The confidence every per-cell interval and comparison is asked for (its real coverage is printed beside it).
NOMINAL = 0.95
MAX_TABLE_ROWS = 300  # longer tables are cut (the CSV next to the figures has every row)
MAX_READINGS = 80


# ----------------------------------------------------------------------------------------------
# formatting helpers


def _num(v, digits: int = 3) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "" if v is None else str(v)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v != 0 and (abs(v) >= 10 ** (digits + 2) or abs(v) < 10 ** -(digits - 1)):
        return f"{v:.{digits}g}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def _int(v) -> str:
    try:
        return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{int(v)}"
    except (TypeError, ValueError):
        return str(v)


def _pct(v, signed: bool = False) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "–"
    if math.isnan(v):
        return "–"
    return f"{v:+.1%}" if signed else f"{v:.1%}"


def _mib(v) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "–"
    return "–" if math.isnan(v) else f"{v / 2**20:+,.0f}"


def _ci(lo, hi, fmt: Callable = _num) -> str:
    try:
        if math.isnan(float(lo)) or math.isnan(float(hi)):
            return "–"
    except (TypeError, ValueError):
        return "–"
    return f"{fmt(lo)} – {fmt(hi)}"


def _cov(c) -> str:
    try:
        return pct(float(c)) if np.isfinite(float(c)) else "–"
    except (TypeError, ValueError):
        return "–"


def _test(verdict, reason) -> str:
    verdict = verdict or "–"
    return f"{verdict}: {reason}" if isinstance(reason, str) and reason else verdict


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"



def _cut(frame: pd.DataFrame, csv_name: str) -> tuple[pd.DataFrame, str]:
    if len(frame) <= MAX_TABLE_ROWS:
        return frame, ""
    return frame.head(MAX_TABLE_ROWS), f"first {MAX_TABLE_ROWS} of {len(frame)} rows; every row is in {csv_name}"


# ----------------------------------------------------------------------------------------------
# content


FIGURE_CAPTIONS = {
    "throughput_vs_workers": (
        "Throughput against num_workers, one panel per workload variant, one colour per core count: "
        "median over repetitions with its order-statistic interval ({interval}); hollow markers are unstable cells "
        "(IQR over 10% of the median); squares at 0 are main-process loading; the dashed line is ideal "
        "linear scaling from the one-worker rate, the dotted vertical the core count, the dash-dot "
        "horizontal the decode-only ceiling (jpeg, where measured); the triangle marks the knee."),
    "usl_fit": (
        "Scaling model: every repetition with num_workers ≥ 1 as a dot and the fitted Universal Scalability "
        "Law where the fit is good (R² ≥ 0.9 over at least 4 distinct num_workers); the diamond is the "
        "fitted peak N*. Where the fit is poor the curve is not drawn and the panel says why."),
    "oversubscription": (
        "Past the cores: throughput as a share of each curve's best, involuntary context switches per "
        "1000 samples, and memory (USS of the main process plus workers) as workers are added."),
    "rules_of_thumb": (
        "What each rule of thumb would have cost on this machine: per curve, the num_workers each rule "
        "picks and the share of the best measured throughput it gives up (darker is worse)."),
}
FIGURE_ORDER = ["throughput_vs_workers", "usl_fit", "rules_of_thumb", "oversubscription"]


def caption(name: str, a: StudyAnalysis) -> str:
    """The caption of one of this study's figures, with the real coverage and n of its intervals."""
    text = FIGURE_CAPTIONS.get(name) or _caption_of(name)
    return text.replace("{interval}", coverage_text(a.cells["n"]) if "n" in a.cells else "no interval")


def _caption_of(name: str) -> str:
    """A figure drawn by another module: the first sentence of the docstring of the function named after it."""
    for module in ("analysis.figures.questions", "analysis.figures.gpu_feed"):
        try:
            fn = getattr(importlib.import_module(module), name, None)
        except Exception:  # noqa: BLE001
            continue
        doc = " ".join((getattr(fn, "__doc__", None) or "").split())
        if doc:
            return doc.split(". ")[0].rstrip(".") + "."
    return name.replace("_", " ")


def study_file(study: str, repo: Path = REPO) -> Path | None:
    """The study file in this repository whose `[study] name` is `study` (or named `<study>.toml`)."""
    folder = repo / "suite" / "studies"
    direct = folder / f"{study}.toml"
    if direct.exists():
        return direct
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        return None
    for path in sorted(folder.glob("*.toml")):
        try:
            if tomllib.loads(path.read_text()).get("study", {}).get("name") == study:
                return path
        except (OSError, ValueError):
            continue
    return None


def _rel(path: Path, repo: Path = REPO) -> str:
    try:
        return str(path.resolve().relative_to(repo))
    except ValueError:
        return str(path)


def _reproduce(a: StudyAnalysis, results: Path, figures: Path, full: pd.DataFrame) -> list:
    blocks: list = []
    path = study_file(a.study)
    commit = full["env_git_commit"].dropna().astype(str).unique() if "env_git_commit" in full else []
    image = full["env_container_image"].dropna().astype(str).unique() if "env_container_image" in full else []
    launchers = set(full["launcher"].dropna().astype(str)) if "launcher" in full else set()
    study_arg = _rel(path) if path else f"<the study file of '{a.study}'>"
    lines = []
    if len(commit) == 1:
        c = commit[0]
        clean = c.removesuffix("-dirty")
        lines.append(f"git checkout {clean}")
    lines.append(f"make local STUDY={study_arg} RESULTS={results} FIGURES={figures}")
    if "slurm" in launchers:
        lines.append(f"make submit CLUSTER=slurm STUDY={study_arg} RESULTS={results}   # on the cluster")
    lines.append(f"make figures RESULTS={results} FIGURES={figures}   # figures, tables and this report")
    text = (f"The records were measured with study '{a.study}'. "
            + (f"Its study file is {study_arg} in this repository. " if path else
               f"No study file named '{a.study}' is in this repository's suite/studies/: use the one the records "
               "came from. ")
            + "To measure it again and redraw everything:")
    blocks.append(Paragraph(text))
    blocks.append(Code("\n".join(lines)))
    notes = []
    if len(commit) == 1 and commit[0].endswith("-dirty"):
        notes.append(f"The working tree had uncommitted changes when measured (commit {commit[0]}).")
    elif len(commit) > 1:
        notes.append(f"The records come from {len(commit)} different commits: {', '.join(commit[:5])}.")
    if len(image):
        notes.append(f"Container image: {', '.join(image[:3])} (run inside it for the same versions).")
    if notes:
        blocks.append(Paragraph(" ".join(notes)))
    return blocks


def _usl_table(a: StudyAnalysis) -> pd.DataFrame:
    c = a.curves
    rows = []
    for _, r in c.iterrows():
        good = bool(r.get("usl_good", False))
        has = np.isfinite(r.get("usl_lam", np.nan))
        rows.append({
            "curve": r["panel"], "cores": _int(r["cores"]),
            "λ (1 worker, samples/s)": _num(r.get("usl_lam")) if has else "–",
            "σ contention": _num(r.get("usl_sigma")) if has else "–",
            "κ crosstalk": _num(r.get("usl_kappa")) if has else "–",
            "peak N*": _num(r.get("usl_peak_n")) if has else "–",
            "X(N*) samples/s": _num(r.get("usl_peak_x")) if has else "–",
            "R²": _num(r.get("usl_r2")) if has else "–",
            "points (distinct N)": f"{_int(r.get('usl_n_points'))} ({_int(r.get('usl_n_distinct'))})",
            "fit": "good" if good else
            "poor, not drawn: " + str(r.get("usl_reason") or "no data").replace("r2 =", "R² ="),
        })
    return pd.DataFrame(rows)


def _curve_table(a: StudyAnalysis) -> pd.DataFrame:
    rows = []
    for _, r in a.curves.iterrows():
        rows.append({
            "curve": r["panel"], "cores": _int(r["cores"]),
            "best: num_workers": _int(r.get("best_n")), "best samples/s": _num(r.get("best_x")),
            "knee: num_workers": _int(r.get("knee_n")), "knee samples/s": _num(r.get("knee_x")),
            "main process (0) samples/s": _num(r.get("x_main_process")),
            "knee / main process [interval] (coverage, n)": (
                f"{_num(r.get('vs_main_ratio'))} [{_ci(r.get('vs_main_ci_low'), r.get('vs_main_ci_high'))}] "
                f"({_cov(r.get('vs_main_ci_coverage'))}, {r.get('vs_main_n', '')})"
                if np.isfinite(r.get("vs_main_ratio", np.nan)) else "–"),
            "test": _test(r.get("vs_main_verdict", ""), r.get("vs_main_reason", "")),
        })
    return pd.DataFrame(rows)


def _rules_table(a: StudyAnalysis) -> pd.DataFrame:
    rows = []
    for _, r in a.rules.iterrows():
        approx = {"exact": "", "interpolated": " (interpolated)", "nearest": " (nearest measured)"}.get(r["match"], "")
        test = _test(r.get("vs_knee_verdict", ""), r.get("vs_knee_reason", ""))
        if np.isfinite(r.get("vs_knee_ratio", np.nan)):
            test += (f" ({_num(r['vs_knee_ratio'])}x the knee, interval "
                     f"{_ci(r['vs_knee_ci_low'], r['vs_knee_ci_high'])}, {_cov(r.get('vs_knee_ci_coverage'))} "
                     f"coverage, {r.get('vs_knee_n', '')}; "
                     f"p = {_num(r['vs_knee_p'], 2)})")
        rows.append({
            "curve": r["panel"], "cores": _int(r["cores"]), "rule": r["rule_label"], "num_workers": _int(r["rule_n"]),
            "samples/s": _num(r["x_at_rule"]) + approx, "lost vs best": _pct(r["loss_vs_best"]),
            "processes vs knee": f"{int(r['extra_procs_vs_knee']):+d}",
            "memory vs knee (MiB)": _mib(r.get("extra_mem_bytes")),
            "rule vs knee (test)": test or "–",
        })
    return pd.DataFrame(rows)


def _ceiling_table(a: StudyAnalysis) -> pd.DataFrame:
    rows = []
    for _, r in a.curves.iterrows():
        x1, cores = r.get("x_one_worker", np.nan), float(r["cores"])
        ideal = x1 * cores if np.isfinite(x1) else np.nan
        ceiling = r.get("decode_ceiling", np.nan)
        if r["workload"] == "jpeg":
            dec = (f"{_num(ceiling)} ({_num(r['decode_rate_per_core'])}/core x {int(cores)})"
                   if np.isfinite(ceiling) else "ceiling not measured")
        else:
            dec = "n/a (not jpeg)"
        best = r.get("best_x", np.nan)
        rows.append({
            "curve": r["panel"], "cores": _int(cores), "1 worker samples/s": _num(x1),
            "1-worker rate x cores": _num(ideal),
            "best / (1-worker rate x cores)": _pct(best / ideal) if np.isfinite(ideal) else "–",
            "decode-only ceiling samples/s": dec,
            "best / decode ceiling": _pct(best / ceiling) if np.isfinite(ceiling) else "–",
        })
    return pd.DataFrame(rows)


def _problem_table(a: StudyAnalysis) -> pd.DataFrame:
    p = a.problems
    rows = []
    for _, r in p.sort_values(["panel", "cores", "num_workers"]).drop_duplicates("cell_id").iterrows():
        rows.append({
            "curve": r.get("panel", ""), "cores": _int(r["cores"]), "num_workers": _int(r["num_workers"]),
            "ok": _int(r["n"]), "not ok": _int(r["n_not_ok"]),
            "median samples/s": _num(r["median"]), "IQR/median": _pct(r["iqr_rel"]),
            "reason": r["reason"], "cell": r["cell_id"],
        })
    return pd.DataFrame(rows)


def _cells_table(a: StudyAnalysis) -> pd.DataFrame:
    c = a.cells.drop_duplicates("cell_id").sort_values(["panel", "cores", "num_workers"])
    ref = a.references.assign(panel="decode-only reference") if not a.references.empty else None
    if ref is not None:
        c = pd.concat([c, ref])
    return pd.DataFrame({
        "curve": c["panel"], "cores": c["cores"].map(_int), "num_workers": c["num_workers"].map(_int),
        "n": c["n"].map(_int), "failed": c["n_not_ok"].map(_int), "median samples/s": c["median"].map(_num),
        "interval of the median": [_ci(lo, hi) for lo, hi in zip(c["ci_low"], c["ci_high"])],
        "its coverage": c.get("ci_coverage", pd.Series(np.nan, index=c.index)).map(_cov),
        "IQR/median": c["iqr_rel"].map(_pct), "unstable": np.where(c["unstable"], "UNSTABLE", ""),
        "first batch (s)": c.get("time_to_first_batch_s_median", pd.Series(np.nan, index=c.index)).map(_num),
        "USS peak (MiB)": (c.get("uss_peak_bytes_median", pd.Series(np.nan, index=c.index)) / 2**20).map(
            lambda v: _num(v)),
    })


def _claims(df: pd.DataFrame, table: pd.DataFrame | None = None) -> list:
    try:
        claims_module = importlib.import_module("analysis.claims")
    except ModuleNotFoundError as exc:
        if exc.name == "analysis.claims" or exc.name is None:
            return [Paragraph("Not available: this version of loaderbench has no claims module "
                              "(analysis/claims/ with claims_table(df)). Nothing is claimed beyond the tables above.")]
        return [Paragraph(f"The claims module could not be imported ({type(exc).__name__}: {exc}).")]
    except Exception as exc:  # noqa: BLE001 - another engineer's module must not take the report down
        return [Paragraph(f"The claims module could not be imported ({type(exc).__name__}: {exc}).")]
    fn = getattr(claims_module, "claims_table", None)
    if fn is None:
        return [Paragraph("Not available: analysis.claims has no claims_table(df).")]
    try:
        table = fn(df) if table is None else table
    except Exception as exc:  # noqa: BLE001
        return [Paragraph(f"claims_table(df) failed: {type(exc).__name__}: {exc}")]
    if table is None or len(table) == 0:
        return [Paragraph("claims_table(df) returned no claims for these records.")]
    table = pd.DataFrame(table)
    blocks: list = []
    vocabulary = getattr(claims_module, "vocabulary_lines", None)
    if callable(vocabulary):
        blocks.append(Bullets([line.replace("**", "") for line in vocabulary()]))
    shown, note = _cut(table.astype(object).map(lambda v: _num(v) if isinstance(v, float) else str(v)), "claims.csv")
    return blocks + [Table(shown, "Claims checked against these records (analysis/claims/): each decided once, on "
                                  "the study named in its row.", note)]


def what_n_buys(ns) -> str:
    """What the repetitions of these cells buy: the interval of one median and of a comparison, with coverage."""
    ns = sorted({int(n) for n in ns if n == n and n >= 3})
    if not ns:
        return "Fewer than 3 repetitions per cell: no interval is computed and nothing is decided."
    n = ns[0]
    text = (f"With {n} repetitions per cell{' (the fewest here)' if len(ns) > 1 else ''} each median has an "
            f"{coverage_text([n])}; a comparison of two such cells has a ratio interval of "
            f"{pct(widest_shift_coverage(n, n))} coverage at best.")
    need = n_for_median(NOMINAL)
    if order_coverage(n, order_k(n, NOMINAL)) < NOMINAL:
        text += (f" 5 repetitions give {pct(order_coverage(5))}, {need} give {pct(order_coverage(need))} (the "
                 f"first to reach the nominal {pct(NOMINAL)}); a comparison reaches it from {n_for_shift(NOMINAL)} "
                 "per side.")
    return text


def _methods() -> list:
    return [Bullets([
        "Throughput: samples over wall time of the steady-state window of one repetition (one fresh process); "
        "warm-up batches and the batches prefetched while workers start are excluded.",
        "Per cell: the median over repetitions and its distribution-free order-statistic interval "
        "[x(k), x(n−k+1)], whose coverage 1 − 2·P(Binom(n, ½) ≤ k−1) is exact for its n: the narrowest one "
        f"reaching the nominal {pct(NOMINAL)} where n allows, else [min, max] with its real coverage: "
        + ", ".join(f"n = {n}: {pct(order_coverage(n, order_k(n)))}" for n in (3, 4, 5, 6, 10))
        + ". Every interval is printed with that coverage and n. Fewer than 3 repetitions: no interval.",
        "Unstable: the interquartile range is more than 10% of the median (the threshold pyperf and asv use). "
        "Unstable cells are kept, flagged in every table and drawn hollow.",
        "Comparisons (knee vs main process, rule vs knee): the distribution-free interval of the ratio b/a that "
        "inverts the Mann-Whitney test (Moses; exact coverage for its n: "
        + ", ".join(f"{n} v {n}: {pct(widest_shift_coverage(n, n))}" for n in (3, 4, 5))
        + f" at most), asked for at a nominal {pct(NOMINAL)}. 'faster'/'slower' when the interval lies beyond a "
        f"{MIN_EFFECT:.0%} "
        "effect, 'equivalent' when it lies within it, 'inconclusive' when it reaches both or when n cannot "
        f"reach the nominal {pct(NOMINAL)} (3 v 3: 90% at most), with the reason. The Mann-Whitney p-value is "
        "printed for reference. "
        "A ratio of two single runs is never reported as a result.",
        f"Claims: decided on the same kind of interval at {pct(CLAIM_CONFIDENCE)} (each end errs at most "
        f"{pct((1 - CLAIM_CONFIDENCE) / 2)}), against the threshold each rule names; see the Claims section for "
        "the verdicts.",
        "Knee: the smallest num_workers whose median is within 5% of the best median of its curve "
        "(num_workers = 0, main-process loading, is a candidate).",
        f"USL: X(N) = λN / (1 + σ(N−1) + κN(N−1)) fitted by bounded least squares on relative residuals over "
        f"every repetition with num_workers ≥ 1; N* = sqrt((1−σ)/κ). A fit is shown only when it has at least "
        f"{MIN_DISTINCT_N} distinct num_workers, converged and R² ≥ {MIN_R2}.",
        "Rules of thumb: num_workers = cores, cores − 1, 2 × cores, 4 per GPU (one GPU assumed), and "
        "Lightning's cpus // local_world_size − 1 (floor 1, local_world_size 1). Their throughput is the "
        "measured median at that num_workers, interpolated between measured values when it was not measured.",
        "Ceilings: ideal linear scaling is the one-worker rate times num_workers; the decode-only ceiling is the "
        "best measured decode-only rate per core (a jpeg cell with jpeg_stage = \"decode\": read + decode, no "
        "transforms) times the cores.",
    ])]


def cells_n(a: StudyAnalysis) -> pd.Series:
    cells = pd.concat([a.cells, a.references]).drop_duplicates("cell_id") if len(a.references) else a.cells
    return cells["n"] if "n" in cells else pd.Series(dtype=float)


def build_report(analyses: list[StudyAnalysis], figures: dict[str, list[Path]], df: pd.DataFrame,
                 load: LoadReport, results: Path, out: Path, claims_table: pd.DataFrame | None = None
                 ) -> list[Section]:
    """The report's sections; `claims_table` (analysis.claims.claims_table(df)) is computed here when not given."""
    sections: list[Section] = []
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = Section("loaderbench report", level=1)
    counts = df["status"].value_counts().to_dict() if not df.empty else {}
    head.blocks.append(Paragraph(
        f"Generated {now} from {len(df)} records under {results} "
        f"({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}"
        + (f"; {len(load.skipped)} files skipped, listed at the end" if load.skipped else "")
        + f"). Studies: {', '.join(a.study for a in analyses)}."))
    head.blocks.append(Paragraph(
        "Every number below is computed from the records by loaderbench's analysis; the methods are at the end. "
        "Figures are PNG here and PDF in the same folder."))
    sections.append(head)

    for a in analyses:
        full = df[df["study"] == a.study]
        sec = Section(f"Study {a.study}", level=2, anchor=f"study-{slug(a.study)}")
        sc = ", ".join(f"{v} {k}" for k, v in sorted(a.status_counts.items()))
        ncell = a.cells["cell_id"].nunique() + len(a.references)
        reps = full.groupby("cell_id")["repetition"].nunique()
        lo, hi = (int(reps.min()), int(reps.max())) if len(reps) else (0, 0)
        sec.blocks.append(Paragraph(
            f"{a.n_records} records ({sc}) in {ncell} cells, " + (f"n = {lo}" if lo == hi else f"n = {lo} to {hi}")
            + f" repetitions per cell; {len(a.curves)} curves (workload variant x cores). "
            + what_n_buys(cells_n(a))))
        cells_u = pd.concat([a.cells, a.references]).drop_duplicates("cell_id")
        n_unstable, n_cells = int(cells_u["unstable"].sum()), len(cells_u)
        if n_cells and n_unstable / n_cells > 0.25:
            sec.blocks.append(Paragraph(
                f"Warning: {n_unstable} of {n_cells} cells are unstable (IQR over 10% of the median). Repetitions "
                "this far apart usually mean the machine was shared or throttled while measuring: read the knees, "
                "fits and rule comparisons below as indicative only, and measure again on an idle machine "
                "(or with more repetitions) before drawing conclusions."))
        for note in a.notes:
            sec.blocks.append(Paragraph(f"Note: {note}."))
        sections.append(sec)

        env = Section("Environment", level=3, anchor=f"env-{slug(a.study)}")
        env.blocks.append(Table(a.environment.rename(columns={"what": "", "value": "value"}) if not
                                a.environment.empty else pd.DataFrame({"": ["no env_* columns in the records"]})))
        sections.append(env)

        rd = Section("Readings and figures", level=3, anchor=f"fig-{slug(a.study)}")
        lines = [reading(c) for _, c in a.curves.iterrows() if "panel" in c]
        if lines:
            more = len(lines) - MAX_READINGS
            rd.blocks.append(Bullets(lines[:MAX_READINGS] + ([f"... and {more} more curves: see the tables below"]
                                                             if more > 0 else [])))
        pngs = {p.stem: p for p in figures.get(a.study, []) if p.suffix == ".png"}
        for name in FIGURE_ORDER + sorted(set(pngs) - set(FIGURE_ORDER)):
            if name in pngs:
                rd.blocks.append(Figure(pngs[name], caption(name, a)))
        if not pngs:
            rd.blocks.append(Paragraph("No figure: no repetition of this study has a throughput value."))
        sections.append(rd)

        if len(a.curves) and "panel" in a.curves:
            rec = Section("Recommendations: knee, best and the rules of thumb", level=3, anchor=f"rec-{slug(a.study)}")
            t, note = _cut(_curve_table(a), "curves.csv")
            rec.blocks.append(Table(t, "Per curve: the best measured num_workers, the knee (smallest num_workers "
                                       "within 5% of the best) and how the knee compares with main-process "
                                       "loading (num_workers = 0).", note))
            if not a.rules.empty:
                t, note = _cut(_rules_table(a), "rules.csv")
                rec.blocks.append(Table(t, "What each rule of thumb picks on the same data, the throughput it "
                                           "gives up against the best, and the processes and memory it adds "
                                           "(or saves, negative) against the knee.", note))
            sections.append(rec)

            model = Section("Scaling model (USL)", level=3, anchor=f"usl-{slug(a.study)}")
            t, note = _cut(_usl_table(a), "curves.csv")
            model.blocks.append(Table(t, "Universal Scalability Law per curve; σ is contention (serial share), "
                                         "κ crosstalk; N* the num_workers where the fitted curve peaks "
                                         "(∞: no peak). Poor fits are reported, not drawn.", note))
            sections.append(model)

            ceil = Section("Physical ceilings", level=3, anchor=f"ceil-{slug(a.study)}")
            t, note = _cut(_ceiling_table(a), "curves.csv")
            ceil.blocks.append(Table(t, "How close the best measured throughput comes to ideal linear scaling "
                                        "at num_workers = cores and, for jpeg, to the decode-only ceiling.", note))
            if not a.has_jpeg:
                ceil.blocks.append(Paragraph("No jpeg workload in this study: no decode-only ceiling applies."))
            elif a.references.empty:
                ceil.blocks.append(Paragraph(
                    "Decode ceiling not measured: the study has no decode-only reference cell. Add a jpeg cell "
                    "with jpeg_stage = \"decode\" (num_workers = 0, cores = 1) to the study to measure it."))
            else:
                refs = a.references
                ceil.blocks.append(Paragraph("Decode-only reference cells: " + "; ".join(
                    f"decoder {r.get('decoder')}: {_num(r['median'])} samples/s at num_workers = "
                    f"{_int(r['num_workers'])}, cores = {_int(r['cores'])} (n = {_int(r['n'])})"
                    for _, r in refs.iterrows()) + "."))
            sections.append(ceil)

        prob = Section("Unstable and failed cells", level=3, anchor=f"problems-{slug(a.study)}")
        if a.problems.empty:
            prob.blocks.append(Paragraph("None: every cell has all repetitions ok and an IQR within 10% of its median."))
        else:
            t, note = _cut(_problem_table(a), "problems.csv")
            n_unst = int(a.problems["unstable"].sum())
            n_fail = int((a.problems["n_not_ok"] > 0).sum())
            prob.blocks.append(Table(t, f"{_count(n_unst, 'unstable cell')} and {_count(n_fail, 'cell')} with failed "
                                        "or timed-out repetitions, with the reasons the suite recorded.", note))
        sections.append(prob)

        cells = Section("Every cell", level=3, anchor=f"cells-{slug(a.study)}")
        t, note = _cut(_cells_table(a), "summary.csv")
        cells.blocks.append(Table(t, "Median of the steady-state throughput per cell with its order-statistic interval "
                                     f"({coverage_text(cells_n(a))}); n and each interval's coverage are columns.",
                                  note))
        sections.append(cells)

        rep = Section("How to reproduce", level=3, anchor=f"repro-{slug(a.study)}")
        rep.blocks += _reproduce(a, results, out, full)
        sections.append(rep)

    claims = Section("Claims", level=2, anchor="claims")
    claims.blocks += _claims(df, claims_table)
    sections.append(claims)

    if load.skipped:
        sk = Section("Skipped files", level=2, anchor="skipped")
        frame = pd.DataFrame(load.skipped, columns=["file", "why"])
        t, note = _cut(frame, "the analysis output (stderr)")
        sk.blocks.append(Table(t, "Files under the results folder that are not usable records.", note))
        sections.append(sk)

    meth = Section("Methods", level=2, anchor="methods")
    meth.blocks += _methods()
    sections.append(meth)
    return sections


def write_tables(a: StudyAnalysis, folder: Path) -> list[Path]:
    """Machine-readable companions of the report's tables (every row), next to the figures."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in (("curves", a.curves), ("rules", a.rules), ("problems", a.problems)):
        p = folder / f"{name}.csv"
        frame.to_csv(p, index=False)
        paths.append(p)
    return paths


def write_report(sections: list[Section], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md, page = out / "report.md", out / "report.html"
    md.write_text(render_markdown(sections, out))
    page.write_text(render_html(sections))
    return [page, md]

"""The report: one self-contained HTML file (figures inlined, no external reference, mailable) and the
same content as Markdown (figures linked by relative path), written next to the figures.

Built in two steps that never mix: `build_report` (here) turns the analyses into a list of sections
made of plain blocks (paragraphs, bullet lists, tables of strings, figures), one function per section;
`loaderbench.analysis.report.tables` formats the numbers and tables those blocks hold;
`loaderbench.analysis.report.layout` only lays the
blocks out, as Markdown or as HTML.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import tomllib
from pathlib import Path

import pandas as pd

from loaderbench.analysis.claims import claims_table as decide_claims
from loaderbench.analysis.claims import counts_line, numbered, sources_lines, vocabulary_lines
from loaderbench.analysis.report.layout import (
    Bullets,
    Code,
    Figure,
    Paragraph,
    Section,
    Table,
    render_html,
    render_markdown,
    slug,
)
from loaderbench.analysis.report.tables import (
    MAX_TABLE_ROWS,
    ceiling_table,
    cells_table,
    curve_table,
    cut_rows,
    machine_noise,
    probe_cost,
    problem_table,
    reading,
    rules_table,
    usl_table,
)
from loaderbench.analysis.table.records import LoadReport
from loaderbench.analysis.table.scaling import StudyAnalysis
from loaderbench.analysis.table.usl import MIN_DISTINCT_N, MIN_R2
from loaderbench.analysis.text import fmt_int, fmt_num, plural
from loaderbench.locations import shipped_studies
from loaderbench.stats.intervals import (
    coverage_text,
    n_for_median,
    n_for_shift,
    order_coverage,
    order_k,
    pct,
    widest_shift_coverage,
)
from loaderbench.stats.verdicts import CLAIM_CONFIDENCE, MIN_EFFECT

#: The confidence every per-cell interval and comparison is asked for (its real coverage is printed beside it).
NOMINAL = 0.95
MAX_READINGS = 80


# ----------------------------------------------------------------------------------------------
# figure captions and the study file


FIGURE_CAPTIONS = {
    "throughput_vs_workers": (
        "Throughput against num_workers, one panel per workload variant, one colour per core count: "
        "median over repetitions with its order-statistic interval ({interval}); hollow markers are unstable cells "
        "(IQR over 10% of the median); squares at 0 are main-process loading; the dashed line is ideal "
        "linear scaling from the one-worker rate, the dotted vertical the core count, the dash-dot "
        "horizontal the decode-only ceiling (jpeg, where measured); the triangle marks the knee."
    ),
    "usl_fit": (
        "Scaling model: every repetition with num_workers ≥ 1 as a dot and the fitted Universal Scalability "
        "Law where the fit is good (R² ≥ 0.9 over at least 4 distinct num_workers); the diamond is the "
        "fitted peak N*. Where the fit is poor the curve is not drawn and the panel says why."
    ),
    "oversubscription": (
        "Past the cores: throughput as a share of each curve's best, involuntary context switches per "
        "1000 samples, and memory (USS of the main process plus workers), all against workers per core."
    ),
    "rules_of_thumb": (
        "What each rule of thumb would have cost on this machine: per curve, the num_workers each rule "
        "picks and the share of the best measured throughput it gives up (darker is worse)."
    ),
}
FIGURE_ORDER = ["throughput_vs_workers", "usl_fit", "rules_of_thumb", "oversubscription"]


def caption(name: str, a: StudyAnalysis) -> str:
    """The caption of one of this study's figures, with the real coverage and n of its intervals."""
    text = FIGURE_CAPTIONS.get(name) or _caption_of(name)
    return text.replace("{interval}", coverage_text(a.cells["n"]) if "n" in a.cells else "no interval")


def _caption_of(name: str) -> str:
    """A figure drawn by another module: the first sentence of the docstring of the function named after it."""
    from loaderbench.analysis.figures.accelerator_busy import (
        accelerator_utilization_vs_workers,  # matplotlib, only when needed
    )
    from loaderbench.analysis.figures.questions import figures

    drawn_by = {fn.__name__: fn for fn in (*figures().values(), accelerator_utilization_vs_workers)}
    doc = " ".join((getattr(drawn_by.get(name), "__doc__", None) or "").split())
    return doc.split(". ")[0].rstrip(".") + "." if doc else name.replace("_", " ")


def study_file(study: str) -> Path | None:
    """The shipped study file (package data) named `study`, or whose `[study] name` is `study`."""
    shipped = shipped_studies()
    if study in shipped:
        return shipped[study]
    for path in shipped.values():
        try:
            if tomllib.loads(path.read_text()).get("study", {}).get("name") == study:
                return path
        except (OSError, ValueError):
            continue
    return None


def _reproduce(a: StudyAnalysis, results: Path, figures: Path, full: pd.DataFrame) -> list:
    blocks: list = []
    path = study_file(a.study)
    commit = full["env_git_commit"].dropna().astype(str).unique() if "env_git_commit" in full else []
    image = full["env_container_image"].dropna().astype(str).unique() if "env_container_image" in full else []
    launchers = set(full["launcher"].dropna().astype(str)) if "launcher" in full else set()
    study_arg = path.stem if path else f"<the study file of '{a.study}'>"  # a shipped study runs by its name
    lines = []
    if len(commit) == 1:
        lines.append(f"git checkout {commit[0].removesuffix('-dirty')}")
    lines.append(f"make local STUDY={study_arg} RESULTS={results} FIGURES={figures}")
    if "slurm" in launchers:
        lines.append(f"make submit CLUSTER=slurm STUDY={study_arg} RESULTS={results}   # on the cluster")
    lines.append(f"make figures RESULTS={results} FIGURES={figures}   # figures, tables and this report")
    text = (
        f"The records were measured with study '{a.study}'. "
        + (
            f"It is the shipped study '{study_arg}'. "
            if path
            else f"No shipped study is named '{a.study}': use the study file the records came from. "
        )
        + "To measure it again and redraw everything:"
    )
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


# ----------------------------------------------------------------------------------------------
# the fixed text: what the repetitions buy, and the methods


def what_n_buys(ns) -> str:
    """What the repetitions of these cells buy: the interval of one median and of a comparison, with coverage."""
    ns = sorted({int(n) for n in ns if n == n and n >= 3})
    if not ns:
        return "Fewer than 3 repetitions per cell: no interval is computed and nothing is decided."
    n = ns[0]
    text = (
        f"With {n} repetitions per cell{' (the fewest here)' if len(ns) > 1 else ''} each median has an "
        f"{coverage_text([n])}; a comparison of two such cells has a ratio interval of "
        f"{pct(widest_shift_coverage(n, n))} coverage at best."
    )
    need = n_for_median(NOMINAL)
    if order_coverage(n, order_k(n, NOMINAL)) < NOMINAL:
        text += (
            f" 5 repetitions give {pct(order_coverage(5))}, {need} give {pct(order_coverage(need))} (the "
            f"first to reach the nominal {pct(NOMINAL)}); a comparison reaches it from {n_for_shift(NOMINAL)} "
            "per side."
        )
    return text


def _methods() -> list:
    return [
        Bullets(
            [
                "Throughput: samples over wall time of the steady-state window of one repetition (one fresh process); "
                "warm-up batches and the batches prefetched while workers start are excluded.",
                "Per cell: the median over repetitions and its distribution-free order-statistic interval "
                "[x(k), x(n−k+1)], whose coverage 1 − 2·P(Binom(n, ½) ≤ k−1) is exact for its n: the narrowest one "
                f"reaching the nominal {pct(NOMINAL)} where n allows, else [min, max] with its real coverage: "
                + ", ".join(f"n = {n}: {pct(order_coverage(n, order_k(n)))}" for n in (3, 4, 5, 6, 10))
                + ". Every interval is printed with that coverage and n. Fewer than 3 repetitions: no interval.",
                "Unstable: the interquartile range is more than 10% of the median (the threshold pyperf and asv use). "
                "Unstable cells are kept, flagged in every table and drawn hollow.",
                "Comparisons (knee vs main process, rule vs knee): the distribution-free interval of the ratio b/a "
                "that "
                "inverts the Mann-Whitney test (Moses; exact coverage for its n: "
                + ", ".join(f"{n} v {n}: {pct(widest_shift_coverage(n, n))}" for n in (3, 4, 5))
                + f" at most), decided at {pct(CLAIM_CONFIDENCE)} two-sided (each end errs at most "
                f"{pct((1 - CLAIM_CONFIDENCE) / 2)}; 3 v 3 reaches exactly that). 'faster'/'slower' when the interval "
                f"lies beyond a {MIN_EFFECT:.0%} effect, 'equivalent' when it lies within it, 'inconclusive' when it "
                "reaches both sides or when n is too small for the interval, with the reason. The Mann-Whitney p-value "
                "is printed for reference. "
                "A ratio of two single runs is never reported as a result.",
                f"Claims: decided on the same kind of interval at {pct(CLAIM_CONFIDENCE)} (each end errs at most "
                f"{pct((1 - CLAIM_CONFIDENCE) / 2)}), against the threshold each rule names; see the Claims section "
                f"for "
                "the verdicts.",
                "Knee: the smallest num_workers whose median is within 5% of the best median of its curve "
                "(num_workers = 0, main-process loading, is a candidate).",
                f"USL: X(N) = λN / (1 + σ(N−1) + κN(N−1)) fitted by bounded least squares on relative residuals over "
                f"every repetition with num_workers ≥ 1; N* = sqrt((1−σ)/κ). A fit is shown only when it has at least "
                f"{MIN_DISTINCT_N} distinct num_workers, converged and R² ≥ {MIN_R2}.",
                "Rules of thumb: num_workers = cores, cores − 1, 2 × cores, 4 per GPU (one GPU assumed), and "
                "Lightning's cpus // local_world_size − 1 (floor 1, local_world_size 1). Their throughput is the "
                "measured median at that num_workers, interpolated between measured values when it was not measured.",
                "Ceilings: ideal linear scaling is the one-worker rate times num_workers; the decode-only ceiling is "
                "the "
                'best measured decode-only rate per core (a jpeg cell with jpeg_stage = "decode": read + decode, no '
                "transforms) times the cores.",
            ]
        )
    ]


def cells_n(a: StudyAnalysis) -> pd.Series:
    cells = pd.concat([a.cells, a.references]).drop_duplicates("cell_id") if len(a.references) else a.cells
    return cells["n"] if "n" in cells else pd.Series(dtype=float)


# ----------------------------------------------------------------------------------------------
# the sections, in the order a reader meets them


def _table(frame: pd.DataFrame, caption: str, csv_name: str) -> Table:
    """A table block of `frame`, cut to the first rows with a note naming the CSV that has them all."""
    shown, note = cut_rows(frame, csv_name)
    return Table(shown, caption, note)


def _first_rows(a: StudyAnalysis, table: str, write, caption: str) -> Table:
    """The table block `write(a)` makes of one row per row of `a`'s `table` (curves, rules), written out for the
    rows shown only (a cluster's study has thousands), with the note naming the CSV that has them all."""
    frame, csv_name = getattr(a, table), f"{table}.csv"
    if len(frame) <= MAX_TABLE_ROWS:
        return _table(write(a), caption, csv_name)
    shown = write(dataclasses.replace(a, **{table: frame.head(MAX_TABLE_ROWS)}))
    return Table(shown, caption, f"first {MAX_TABLE_ROWS} of {len(frame)} rows; every row is in {csv_name}")


def _head(analyses: list[StudyAnalysis], df: pd.DataFrame, load: LoadReport, results: Path) -> Section:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = Section("loaderbench report", level=1)
    counts = df["status"].value_counts().to_dict() if not df.empty else {}
    head.blocks.append(
        Paragraph(
            f"Generated {now} from {len(df)} records under {results} "
            f"({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}"
            + (f"; {len(load.skipped)} files skipped, listed at the end" if load.skipped else "")
            + f"). Studies: {', '.join(a.study for a in analyses)}."
        )
    )
    head.blocks.append(
        Paragraph(
            "Every number below is computed from the records by loaderbench's analysis; the methods are at the end. "
            "Figures are PNG here; they, and any PDF or SVG copies asked for (--formats), are in the same folder."
        )
    )
    return head


def _study(a: StudyAnalysis, full: pd.DataFrame) -> Section:
    """What was measured: records, cells, repetitions and what they buy; a warning when too many cells are
    unstable; the analysis' notes."""
    sec = Section(f"Study {a.study}", level=2, anchor=f"study-{slug(a.study)}")
    sc = ", ".join(f"{v} {k}" for k, v in sorted(a.status_counts.items()))
    ncell = a.cells["cell_id"].nunique() + len(a.references)
    reps = full.groupby("cell_id")["repetition"].nunique()
    lo, hi = (int(reps.min()), int(reps.max())) if len(reps) else (0, 0)
    sec.blocks.append(
        Paragraph(
            f"{a.n_records} records ({sc}) in {ncell} cells, "
            + (f"n = {lo}" if lo == hi else f"n = {lo} to {hi}")
            + f" repetitions per cell; {len(a.curves)} curves (workload variant x cores). "
            + what_n_buys(cells_n(a))
        )
    )
    cells_u = pd.concat([a.cells, a.references]).drop_duplicates("cell_id")
    n_unstable, n_cells = int(cells_u["unstable"].sum()), len(cells_u)
    if n_cells and n_unstable / n_cells > 0.25:
        sec.blocks.append(
            Paragraph(
                f"Warning: {n_unstable} of {n_cells} cells are unstable (IQR over 10% of the median). Repetitions "
                "this far apart usually mean the machine was shared or throttled while measuring: read the knees, "
                "fits and rule comparisons below as indicative only, and measure again on an idle machine "
                "(or with more repetitions) before drawing conclusions."
            )
        )
    for text in (machine_noise(full), probe_cost(full)):
        if text:
            sec.blocks.append(Paragraph(text))
    for note in a.notes:
        sec.blocks.append(Paragraph(f"Note: {note}."))
    return sec


def _part(a: StudyAnalysis, title: str, anchor: str, *blocks) -> Section:
    """One of a study's sections (level 3), its anchor made unique by the study's name."""
    return Section(title, level=3, anchor=f"{anchor}-{slug(a.study)}", blocks=list(blocks))


def _environment(a: StudyAnalysis) -> Section:
    return _part(
        a,
        "Environment",
        "env",
        Table(
            a.environment.rename(columns={"what": "", "value": "value"})
            if not a.environment.empty
            else pd.DataFrame({"": ["no env_* columns in the records"]})
        ),
    )


def _readings(a: StudyAnalysis, figures: list[Path]) -> Section:
    """One reading per curve, then the study's figures, the scaling ones first."""
    rd = _part(a, "Readings and figures", "fig")
    # only the readings shown are written out: a cluster's study has hundreds of curves
    lines = [reading(c) for _, c in a.curves.head(MAX_READINGS).iterrows()] if "panel" in a.curves else []
    if lines:
        more = len(a.curves) - MAX_READINGS
        rd.blocks.append(
            Bullets(lines[:MAX_READINGS] + ([f"... and {more} more curves: see the tables below"] if more > 0 else []))
        )
    pngs = {p.stem: p for p in figures if p.suffix == ".png"}
    for name in FIGURE_ORDER + sorted(set(pngs) - set(FIGURE_ORDER)):
        if name in pngs:
            rd.blocks.append(Figure(pngs[name], caption(name, a)))
    if not pngs:
        rd.blocks.append(Paragraph("No figure: no repetition of this study has a throughput value."))
    return rd


def _recommendations(a: StudyAnalysis) -> Section:
    blocks = [
        _first_rows(
            a,
            "curves",
            curve_table,
            "Per curve: the best measured num_workers, the knee (smallest num_workers "
            "within 5% of the best) and how the knee compares with main-process loading "
            "(num_workers = 0).",
        )
    ]
    if not a.rules.empty:
        blocks.append(
            _first_rows(
                a,
                "rules",
                rules_table,
                "What each rule of thumb picks on the same data, the throughput it gives "
                "up against the best, and the processes and memory it adds (or saves, "
                "negative) against the knee.",
            )
        )
    return _part(a, "Recommendations: knee, best and the rules of thumb", "rec", *blocks)


def _scaling_model(a: StudyAnalysis) -> Section:
    return _part(
        a,
        "Scaling model (USL)",
        "usl",
        _first_rows(
            a,
            "curves",
            usl_table,
            "Universal Scalability Law per curve; σ is contention (serial share), κ crosstalk; N* the "
            "num_workers where the fitted curve peaks (∞: no peak). Poor fits are reported, not drawn.",
        ),
    )


def _decode_reference(a: StudyAnalysis) -> Paragraph:
    """Which decode-only ceiling applies: none (no jpeg), not measured (no reference cell), or the cells'."""
    if not a.has_jpeg:
        return Paragraph("No jpeg workload in this study: no decode-only ceiling applies.")
    if a.references.empty:
        return Paragraph(
            "Decode ceiling not measured: the study has no decode-only reference cell. Add a jpeg cell "
            'with jpeg_stage = "decode" (num_workers = 0, cores = 1) to the study to measure it.'
        )
    return Paragraph(
        "Decode-only reference cells: "
        + "; ".join(
            f"decoder {r.get('decoder')}: {fmt_num(r['median'])} samples/s at num_workers = "
            f"{fmt_int(r['num_workers'])}, cores = {fmt_int(r['cores'])} (n = {fmt_int(r['n'])})"
            for _, r in a.references.iterrows()
        )
        + "."
    )


def _ceilings(a: StudyAnalysis) -> Section:
    return _part(
        a,
        "Physical ceilings",
        "ceil",
        _first_rows(
            a,
            "curves",
            ceiling_table,
            "How close the best measured throughput comes to ideal linear scaling at num_workers = "
            "cores and, for jpeg, to the decode-only ceiling.",
        ),
        _decode_reference(a),
    )


def _problems(a: StudyAnalysis) -> Section:
    if a.problems.empty:
        shown = Paragraph("None: every cell has all repetitions ok and an IQR within 10% of its median.")
    else:
        n_unst = int(a.problems["unstable"].sum())
        n_fail = int((a.problems["n_not_ok"] > 0).sum())
        shown = _table(
            problem_table(a),
            f"{plural(n_unst, 'unstable cell')} and {plural(n_fail, 'cell')} with failed or timed-out "
            "repetitions, with the reasons the suite recorded.",
            "problems.csv",
        )
    return _part(a, "Unstable and failed cells", "problems", shown)


def _every_cell(a: StudyAnalysis) -> Section:
    return _part(
        a,
        "Every cell",
        "cells",
        _table(
            cells_table(a),
            f"Median of the steady-state throughput per cell with its order-statistic interval "
            f"({coverage_text(cells_n(a))}); n and each interval's coverage are columns.",
            "summary.csv",
        ),
    )


def _how_to_reproduce(a: StudyAnalysis, results: Path, out: Path, full: pd.DataFrame) -> Section:
    return _part(a, "How to reproduce", "repro", *_reproduce(a, results, out, full))


def study_sections(
    a: StudyAnalysis, figures: list[Path], full: pd.DataFrame, results: Path, out: Path
) -> list[Section]:
    """The sections of one study; `full` is its rows of the tidy table, `figures` the files drawn for it."""
    sections = [_study(a, full), _environment(a), _readings(a, figures)]
    if len(a.curves) and "panel" in a.curves:
        sections += [_recommendations(a), _scaling_model(a), _ceilings(a)]
    return sections + [_problems(a), _every_cell(a), _how_to_reproduce(a, results, out, full)]


def _claims(df: pd.DataFrame, table: pd.DataFrame | None) -> Section:
    claims = Section("Claims", level=2, anchor="claims")
    table = decide_claims(df) if table is None else pd.DataFrame(table)
    text = table.astype(object).map(lambda v: fmt_num(v) if isinstance(v, float) else str(v))
    index = numbered(table) if "number" in table else None
    claims.blocks += [Bullets([line.replace("**", "") for line in vocabulary_lines() + sources_lines()])]
    if index is not None:
        claims.blocks.append(
            _table(
                index.astype(str),
                f"The {len(index)} numbered claims, each with the verdict of its rules together "
                f"({counts_line(index['verdict'])}).",
                "claims.md",
            )
        )
    claims.blocks.append(
        _table(
            text,
            "Claims checked against these records (loaderbench/analysis/questions/): each decided once, on "
            "the study named in its row.",
            "claims.csv",
        )
    )
    return claims


def _skipped(load: LoadReport) -> Section:
    sk = Section("Skipped files", level=2, anchor="skipped")
    sk.blocks.append(
        _table(
            pd.DataFrame(load.skipped, columns=["file", "why"]),
            "Files under the results folder that are not usable records.",
            "the analysis output (stderr)",
        )
    )
    return sk


def build_report(
    analyses: list[StudyAnalysis],
    figures: dict[str, list[Path]],
    df: pd.DataFrame,
    load: LoadReport,
    results: Path,
    out: Path,
    claims_table: pd.DataFrame | None = None,
    studies: dict[str, list[Section]] | None = None,
) -> list[Section]:
    """The report's sections; `claims_table` (loaderbench.analysis.claims.claims_table(df)) is computed here when not
    given, as are the sections of each study that `studies` (study_sections, by study) does not hold."""
    sections = [_head(analyses, df, load, results)]
    for a in analyses:
        if studies is not None and a.study in studies:
            sections += studies[a.study]
        else:
            sections += study_sections(a, figures.get(a.study, []), df[df["study"] == a.study], results, out)
    sections.append(_claims(df, claims_table))
    if load.skipped:
        sections.append(_skipped(load))
    return sections + [Section("Methods", level=2, anchor="methods", blocks=_methods())]


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

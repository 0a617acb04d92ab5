"""Draw everything from whatever records exist: per study its figures and tables, then one report.

    python -m loaderbench.analysis RESULTS --figures DIR [--formats png,pdf,svg]

writes DIR/<study>/{throughput_vs_workers,usl_fit,rules_of_thumb,oversubscription}.png (and .pdf, .svg when asked),
DIR/<study>/{summary,curves,rules,problems}.csv (+ summary.md), and DIR/report.html (self-contained)
with DIR/report.md.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import pickle
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import pandas as pd

from loaderbench.analysis.figures.formats import DEFAULT, HELP, drawing_in, parse_formats
from loaderbench.analysis.figures.stages import Stages
from loaderbench.analysis.figures.study_cache import (
    cached_study,
    file_digest,
    remove_formats_not_drawn,
    save_pickle,
    save_study_cache,
    study_key,
)
from loaderbench.analysis.table.code_version import code_version
from loaderbench.analysis.table.records import col, load_records
from loaderbench.analysis.table.results_folder import not_a_results_folder
from loaderbench.cores import allowed_cores
from loaderbench.errors import LoaderbenchError


def _drawn(a, what: str, draw: Callable[[], list[Path]]) -> list[Path]:
    """The files `draw()` wrote. A figure that fails is reported (stderr, and a note in the study's section of
    the report) and draws nothing: one broken figure must not hide the others or the report."""
    try:
        return draw()
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the other figures and the report go on
        print(f"{a.study}: {what} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exc()
        a.notes.append(f"{what} could not be drawn ({type(exc).__name__}: {exc})")
        return []


def _scaling_figure(name: str):
    """The part drawing one of the scaling figures every study has (none when no repetition is ok)."""

    def draw(a, df: pd.DataFrame, folder: Path) -> list[Path]:
        from loaderbench.analysis.figures import rule_cost, scaling, usl_fit

        fn = {
            "throughput_vs_workers": scaling.throughput_vs_workers,
            "usl_fit": usl_fit.usl_fit,
            "rules_of_thumb": rule_cost.rules_of_thumb,
            "oversubscription": scaling.oversubscription,
        }[name]
        return [] if a.ok.empty else _drawn(a, f"figure {fn.__name__}", lambda: fn(a, folder))

    return draw


def _tables(a, df: pd.DataFrame, folder: Path) -> list[Path]:
    from loaderbench.analysis.report.page import write_tables
    from loaderbench.analysis.table.summary import cell_summary, write_summary

    return write_summary(cell_summary(df), folder, a.study) + write_tables(a, folder)


def _other_figures(a, df: pd.DataFrame, folder: Path) -> list[Path]:
    """The figures that read the tidy rows themselves: the question a study answers, and accelerator feeding where
    a consumer was busy."""
    from loaderbench.analysis.figures.accelerator_busy import accelerator_utilization_vs_workers
    from loaderbench.analysis.figures.questions import draw_question_figures

    paths = _drawn(a, "question figures", lambda: draw_question_figures(df, a.study, folder))
    # only where a consumer was busy (a model step or a simulated one): an idle consumer reads 0 everywhere
    busy = pd.to_numeric(col(df, "accelerator_busy_fraction"), errors="coerce")
    if (busy > 0).any():
        paths += _drawn(a, "accelerator figure", lambda: accelerator_utilization_vs_workers(df, a.study, folder))
    return paths


#: What is drawn of one study, in the order its files are listed: each part is independent of the others, so the
#: parts of every study to draw are spread over the worker processes together.
PARTS = (
    ("tables", _tables),
    ("throughput_vs_workers", _scaling_figure("throughput_vs_workers")),
    ("usl_fit", _scaling_figure("usl_fit")),
    ("rules_of_thumb", _scaling_figure("rules_of_thumb")),
    ("oversubscription", _scaling_figure("oversubscription")),
    ("other figures", _other_figures),
)


#: What the workers read: the tidy table ("df") and the analyses to draw ("analyses", by study). Set before the pool
#: forks, so that a task names a study (and a part) instead of carrying the study's rows through a pipe, and the
#: rows are not copied per study in this process.
_SHARED: dict = {}
_ROWS: dict = {}  # per process: the rows of the studies it worked on last
#: Studies whose rows a process keeps: tasks come study by study, so the one before is the most ever asked for again,
#: and each study's rows kept would be a copy of its share of the table (a worker that kept all of them grew by half).
_ROWS_KEPT = 2


def _rows(study: str) -> pd.DataFrame:
    df = _SHARED["df"]
    if _ROWS.get("of") is not df:
        _ROWS.clear()
        _ROWS["of"] = df
    rows = _ROWS.pop(study, None)
    if rows is None:
        rows = df[df["study"] == study]
    _ROWS[study] = rows  # the newest last
    while len(_ROWS) > _ROWS_KEPT + 1:  # "of" stays first
        del _ROWS[next(k for k in _ROWS if k != "of")]
    return rows


def _analyze(task: tuple):
    """One task of analysing a study (run in a worker process when there are several): ("claims", study) is what
    the study's rows say about every claim, ("analysis", study) the rest of its analysis; apart, so that a study's
    two halves go to two processes."""
    from loaderbench.analysis.claims import study_claims
    from loaderbench.analysis.table.scaling import analyze_study

    what, study = task
    rows = _rows(study)
    return study_claims(rows) if what == "claims" else analyze_study(rows, study)


#: The modules the parts import as they draw.
_DRAWING = (
    "loaderbench.analysis.figures.accelerator_busy",
    "loaderbench.analysis.figures.questions",
    "loaderbench.analysis.figures.rule_cost",
    "loaderbench.analysis.figures.scaling",
    "loaderbench.analysis.figures.usl_fit",
    "loaderbench.analysis.report.layout",
    "loaderbench.analysis.report.page",
    "loaderbench.analysis.table.summary",
)


def _imported_before_forking(*modules: str) -> None:
    """`modules` imported in this process, before it forks its workers: each worker would import them again."""
    import importlib

    for name in modules:
        importlib.import_module(name)


def _work(task: tuple):
    """One task (run in a worker process when there are several): ("claims", study, keys) decides those claims on
    the study's rows; ("draw", study, part, out) draws one part of one study and returns the files it wrote, the
    notes it added to the analysis (a figure that could not be drawn) and the CPU seconds matplotlib's `savefig`
    took."""
    from loaderbench.analysis.claims import decide_claims
    from loaderbench.analysis.figures.style import after_png, apply_theme, savefig_cpu_s
    from loaderbench.analysis.report.layout import write_embed_copy

    if task[0] == "claims":
        return decide_claims(_rows(task[1]), task[2])
    _, study, part, out = task
    a = _SHARED["analyses"][study]
    apply_theme()
    rendering = savefig_cpu_s()
    before = len(a.notes)
    copied: set[Path] = set()

    def copy(path: Path, pixels) -> None:  # from the pixels just written, not the file read back
        write_embed_copy(path, pixels)
        copied.add(path)

    # the report's 256-colour copies, here, in parallel, rather than in the report (when the page is too heavy)
    with drawing_in(_SHARED["formats"]), after_png(copy):
        paths = PARTS[part][1](a, _rows(study), out / study)
    for p in paths:
        if p.suffix == ".png" and p not in copied:
            write_embed_copy(p)
    notes = a.notes[before:]
    del a.notes[before:]  # in one process the analysis is shared by every part: the caller adds them in order
    return paths, notes, savefig_cpu_s() - rendering


def map_tasks(fn, tasks: list, jobs: int, tick: Callable[[int], None] | None = None, **shared) -> list:
    """`fn` over `tasks`, in `jobs` forked processes when there are several, with `shared` in _SHARED; `tick`, when
    given, is told how many tasks are done each time one finishes."""
    _SHARED.clear()
    _SHARED.update(shared)
    tick = tick or (lambda n: None)
    try:
        if jobs > 1 and len(tasks) > 1:
            # the objects that exist now are left out of the workers' garbage collections, which would otherwise
            # touch (and copy) every page of this process's heap that holds one
            gc.freeze()
            try:
                with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=_fork()) as pool:
                    futures = [pool.submit(fn, t) for t in tasks]
                    for n, _ in enumerate(as_completed(futures), 1):
                        tick(n)
                    return [f.result() for f in futures]
            finally:
                gc.unfreeze()
        out = []
        for t in tasks:
            out.append(fn(t))
            tick(len(out))
        return out
    finally:
        _SHARED.clear()
        _ROWS.clear()


def _fork():
    """Workers forked from this process, so they see `_SHARED` (the platform's default start method otherwise)."""
    import multiprocessing

    return multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def default_jobs() -> int:
    """Every core this process may use: its affinity, its cgroup's CPU quota and Slurm's CPUs per task, the
    smallest of those set (loaderbench.cores); a quota of 2.5 CPUs draws in 2 processes."""
    return max(1, int(allowed_cores()["cores"]))


def analyze_all(
    df: pd.DataFrame, jobs: int = 1, studies: list[str] | None = None, progress: Stages | None = None
) -> list:
    """One StudyAnalysis per study (`studies`, default all), studies in parallel processes when `jobs` > 1;
    reported to `progress` when given."""
    studies = sorted(df["study"].unique()) if studies is None else studies
    tick = (
        progress.stage(f"analysing {_studies(len(studies))}", 2 * len(studies), "parts")
        if progress and studies
        else None
    )
    _imported_before_forking("loaderbench.analysis.claims", "loaderbench.analysis.table.scaling")
    tasks = [(what, s) for s in studies for what in ("analysis", "claims")]
    # one study (one changed since the last run): in this process, where two forked ones would each copy the
    # pages of the table they touch and send their half back through a pipe
    done = map_tasks(_analyze, tasks, jobs if len(studies) > 1 else 1, tick, df=df)
    analyses = done[0::2]
    for a, claims in zip(analyses, done[1::2]):
        a.claims = claims
    return analyses


def _studies(n: int) -> str:
    return f"{n} stud{'ies' if n != 1 else 'y'}"


def draw_all(
    analyses: list,
    df: pd.DataFrame,
    out: Path,
    jobs: int = 1,
    drawn: tuple = (),
    costs: dict | None = None,
    progress: Stages | None = None,
    formats: tuple[str, ...] = DEFAULT,
) -> tuple[list, dict[str, list[Path]]]:
    """Tables and figures of every study of `analyses`, and the claims bound to any study (those and the `drawn`
    ones, cached) that it has not decided yet: every part of every study and each study's claims are spread over
    `jobs` processes together. Returns the analyses (with any drawing notes and the outcomes added to their claims;
    their rows, read by the figures only, let go) and the files written per study, in PARTS order, each figure in
    `formats` (figures.formats: PNG always, first). `costs`, when
    given, receives "savefig_cpu_s": the CPU seconds matplotlib's `savefig` took in all processes together. The
    tasks are reported to `progress` when given."""
    from loaderbench.analysis.claims import bind
    from loaderbench.analysis.figures.style import apply_theme

    apply_theme()
    _imported_before_forking(*_DRAWING)
    by_study = {a.study: a for a in analyses}
    facts = {a.study: a.claims for a in (*drawn, *analyses) if a.claims is not None}
    missing: dict[str, list] = {}
    for key, study in bind(facts).items():
        if key not in facts[study].outcomes:
            missing.setdefault(study, []).append(key)
    # the claims first: a study's claims take longer than one of its figures
    tasks = [("claims", s, keys) for s, keys in missing.items()]
    tasks += [("draw", a.study, i, out) for a in analyses for i in range(len(PARTS))]
    what = f"drawing {_studies(len(analyses))}" if analyses else f"deciding the claims of {_studies(len(missing))}"
    tick = progress.stage(what, len(tasks), "parts") if progress and tasks else None
    done = map_tasks(_work, tasks, jobs, tick, df=df, analyses=by_study, formats=parse_formats(list(formats)))
    paths: dict[str, list[Path]] = {a.study: [] for a in analyses}
    rendering = 0.0
    for task, result in zip(tasks, done):
        if task[0] == "claims":
            facts[task[1]].outcomes.update(result)
        else:
            files, notes, cpu = result
            paths[task[1]] += files
            by_study[task[1]].notes.extend(notes)
            rendering += cpu
    if costs is not None:
        costs["savefig_cpu_s"] = rendering
    for a in analyses:  # drawn: nothing reads the rows again, and the report is built in less memory without them
        a.rows = a.rows.iloc[0:0]
    return analyses, paths


# ---- per-study cache: a study whose records (and this code) did not change is not analysed or drawn again


def process_all(
    df: pd.DataFrame,
    out: Path,
    jobs: int = 1,
    use_cache: bool = True,
    keys: dict | None = None,
    progress: Stages | None = None,
    formats: tuple[str, ...] = DEFAULT,
    costs: dict | None = None,
):
    """Analyse and draw every study, its figures in `formats` (figures.formats), reusing the results of studies
    whose records did not change and that were drawn in the same formats. `keys`, when given, receives each study's
    cache key (study_key; none without the cache). The stages are reported to `progress` when given; `costs`, when
    given, receives what draw_all puts there.

    Returns (analyses, figure paths per study, names of the studies reused from the cache)."""
    studies = sorted(df["study"].unique())
    formats = parse_formats(list(formats))
    done: dict[str, tuple] = {}
    keys = {} if keys is None else keys
    # the key reads the digest of each record (or every column where the table has none), never a study's full rows
    keyed = df[["study", "path", "record_digest"]] if "record_digest" in df else df
    for s, rows in keyed.groupby("study", sort=True) if use_cache else []:
        keys[s] = study_key(rows.drop(columns="study") if "record_digest" in df else rows)
        hit = cached_study(out / s, keys[s], formats)
        if hit is not None:
            done[s] = hit
    todo = [s for s in studies if s not in done]
    reused = sorted(done)
    cached = [done[s][0] for s in reused]
    decided = {a.study: len(a.claims.outcomes) for a in cached if a.claims is not None}
    analysed = analyze_all(df, jobs, todo, progress) if todo else []
    analyses, paths = draw_all(
        analysed, df, out, jobs, drawn=tuple(cached), costs=costs, progress=progress, formats=formats
    )
    for a in analyses:
        remove_formats_not_drawn(out / a.study, paths[a.study])
        save_study_cache(out / a.study, keys.get(a.study), a, paths[a.study], formats)
        done[a.study] = (a, paths[a.study])
    for a in cached:  # a claim newly bound to an unchanged study (another study changed): remember its outcome
        if a.claims is not None and len(a.claims.outcomes) != decided[a.study]:
            save_study_cache(out / a.study, keys.get(a.study), a, done[a.study][1], formats)
    analyses = [done[s][0] for s in studies]
    return analyses, {s: done[s][1] for s in studies}, reused


def known_claims(analyses: list) -> dict:
    """The StudyClaims computed with (or cached with) each study's analysis, for claims_table."""
    return {a.study: a.claims for a in analyses if a.claims is not None}


# ---- the report and the claims: kept when no study changed

REPORT_CACHE = ".report-cache.json"


def report_key(keys: dict, df: pd.DataFrame, load, results: Path, out: Path) -> str | None:
    """Fingerprint of everything the report and the claims files are made of: every study's key (its records and
    the analysis code), the files skipped, and the folders the report names; None when a study has no key."""
    studies = sorted(df["study"].unique())
    if any(keys.get(s) is None for s in studies):
        return None
    h = hashlib.sha256(code_version().encode())
    for part in (*(f"{s}={keys[s]}" for s in studies), *map(str, load.skipped), str(results), str(out)):
        h.update(part.encode() + b"\x1f")
    return h.hexdigest()


def _report_current(out: Path, key: str | None) -> list[Path] | None:
    """The report and claims files when they were written for `key` and none has changed since; None otherwise."""
    if key is None:
        return None
    try:
        saved = json.loads((out / REPORT_CACHE).read_text())
        if saved.get("key") != key:
            return None
        files = [Path(p) for p in saved["files"]]
        if any(file_digest(p) != d for p, d in zip(files, saved["digests"])):
            return None
        return files
    except Exception:  # noqa: BLE001 - missing, torn or a file gone: written again
        return None


SECTIONS_CACHE = ".report-sections.pkl"


def _sections_key(study_key: str | None, files: list[Path], results: Path, out: Path) -> str | None:
    """Fingerprint of what one study's report sections show: its records and the code (its key), the files drawn
    for it (a figure that could not be drawn is missing, and noted) and the folders its commands name."""
    if study_key is None:
        return None
    parts = (study_key, str(results), str(out), *map(str, files))
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def study_sections_kept(
    analyses: list, figures: dict, df: pd.DataFrame, results: Path, out: Path, study_keys: dict
) -> dict[str, list]:
    """The report sections of each study (loaderbench.analysis.report.page.study_sections): read back from the study's
    folder where they were written for the same _sections_key, made and written there otherwise. A study changed
    among many then costs the report its own sections only."""
    from loaderbench.analysis.report.page import study_sections

    made: dict[str, list] = {}
    for a in analyses:
        files = figures.get(a.study, [])
        key = _sections_key(study_keys.get(a.study), files, results, out)
        path = out / a.study / SECTIONS_CACHE
        try:
            with open(path, "rb") as fh:
                saved = pickle.load(fh)
            if key is not None and saved.get("key") == key:
                made[a.study] = saved["sections"]
                continue
        except Exception:  # noqa: BLE001 - missing, torn or from another version: made again
            pass
        made[a.study] = study_sections(a, files, df[df["study"] == a.study], results, out)
        save_pickle(path, {"key": key, "sections": made[a.study]} if key is not None else None)
    return made


def report_all(
    analyses: list,
    figures: dict,
    df: pd.DataFrame,
    load,
    results: Path,
    out: Path,
    key: str | None,
    reused: bool = True,
    study_keys: dict | None = None,
) -> tuple[list[Path], bool]:
    """The claims table (once), the report (HTML and Markdown) and claims.csv / claims.md: ([report.html, report.md,
    claims.csv, claims.md], kept). Kept as they are when every study came from its cache (`reused`: none was drawn
    again, e.g. for a damaged figure) and they were written for `key` (report_key) and are intact. Otherwise
    written again, with the sections of each study whose key is in `study_keys` (study_key) taken from the last
    report where nothing they show changed (study_sections_kept)."""
    kept = _report_current(out, key) if reused else None
    if kept is not None:
        return kept, True
    from loaderbench.analysis.claims import claims_table, write_claims
    from loaderbench.analysis.report.page import build_report, write_report

    table = claims_table(df, known_claims(analyses))  # once, for the report and for claims.csv / claims.md
    studies = study_sections_kept(analyses, figures, df, results, out, study_keys or {})
    files = write_report(build_report(analyses, figures, df, load, results, out, table, studies), out)
    files += write_claims(df, out, table=table)
    cache = out / REPORT_CACHE
    if key is None:
        cache.unlink(missing_ok=True)
    else:
        digests = [file_digest(p) for p in files]
        tmp = out / f".{REPORT_CACHE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"key": key, "files": [str(p) for p in files], "digests": digests}))
        os.replace(tmp, cache)
    return files, False


def run(
    results: Path,
    out: Path,
    use_cache: bool = True,
    jobs: int | None = None,
    quiet: bool = False,
    formats: tuple[str, ...] = DEFAULT,
):
    """Load, analyse, draw (figures in `formats`, PNG always: the report shows it) and report; each long stage
    reported on stderr unless `quiet`. Returns (exit code, analyses, report paths). A folder of results folders
    (results/reference) is a LoaderbenchError saying which to pass."""
    progress = None if quiet else Stages()
    df, load = load_records(results, use_cache=use_cache, progress=progress)
    for path, why in load.skipped:
        print(f"skipped {path}: {why}", file=sys.stderr)
    if df.empty:
        nested = not_a_results_folder(results)
        if nested:
            raise LoaderbenchError(nested)
        print(f"no usable records under {results}", file=sys.stderr)
        return 1, [], []
    jobs = default_jobs() if jobs is None else max(1, jobs)
    keys: dict[str, str | None] = {}
    analyses, figures, reused = process_all(df, out, jobs, use_cache, keys=keys, progress=progress, formats=formats)
    for a in analyses:
        if not quiet:
            shown = [p for p in figures[a.study] if p.suffix == ".png"]
            again = " (unchanged: figures kept)" if a.study in reused else ""
            print(f"{a.study}: {a.n_records} records -> {len(shown)} figures in {out / a.study}{again}")
    key = report_key(keys, df, load, results, out) if use_cache else None
    files, kept = report_all(
        analyses, figures, df, load, results, out, key, reused=len(reused) == len(analyses), study_keys=keys
    )
    if not quiet:
        again = " (unchanged: kept)" if kept else ""
        print(f"report: {files[0]} (self-contained) and {files[1]}; claims: {files[2]}{again}")
    return 0, analyses, files[:2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m loaderbench.analysis", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("results", nargs="?", default="results")
    p.add_argument("--figures", default="figures")
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="re-read every record instead of the Parquet cache, and redraw studies whose records did not change",
    )
    p.add_argument("--jobs", type=int, default=None, help="studies processed in parallel (default: CPUs allowed)")
    p.add_argument("--formats", default=",".join(DEFAULT), help=HELP)
    args = p.parse_args(argv)
    results = Path(args.results)
    if not results.is_dir():
        print(f"error: {results}: no such results folder (run a study first: make local)", file=sys.stderr)
        return 2
    try:
        formats = parse_formats(args.formats)
        code, _, _ = run(results, Path(args.figures), use_cache=not args.no_cache, jobs=args.jobs, formats=formats)
    except LoaderbenchError as exc:  # bad input: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())

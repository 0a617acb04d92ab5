"""Does the analysis stay fast at scale? Times every stage of `python -m loaderbench.analysis` on N synthetic records.

    python -m loaderbench.analysis.stage_costs --records 100000 [--folder DIR] [--jobs N] [--formats png] [--json FILE]

Stages, each timed on its own: first load (parse every JSON record, write the Parquet cache),
cached load (read the cache, check every file's size and mtime), aggregate (per-cell medians and
intervals, knees, rules of thumb, USL fits, comparisons), draw (tables + every figure of every study in the
formats asked for, PNG alone by default as in `make figures`), report (HTML with inlined figures + Markdown), and
the whole of `make figures` run again with no record changed (cached load, every study reused from its cache, the
report kept), and once more with one record of one study changed (that study alone analysed and drawn again, and
the report). The cold stages (first load to report) add up to what `make figures` costs from nothing; they and
the unchanged re-run
are printed against TARGETS. Each stage loads the table afresh without the previous one's beside it, as a run of
`make figures` would. The floor under the cold stages is what the libraries alone cost, with no code of ours:
`json.loads` of every record (its per-batch `raw` times cut out, as the load cuts them; after the first load, so
from a warm page cache) and matplotlib's `savefig` of every figure drawn (in each format drawn, timed inside the draw
stage),
in CPU seconds, spread over the worker processes. Peak memory is the high-water resident set (getrusage maxrss) of
this process, after the cold stages and at the end, and of the largest worker process (a forked worker's counts the
pages it shares with this process).

The records are generated once into DIR (default: a folder under the system temp dir) and reused
by later runs with the same --records and --seed; generating is not part of the timings.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from loaderbench.analysis.figures.formats import DEFAULT, parse_formats
from loaderbench.errors import LoaderbenchError


def _ensure_records(folder: Path, n: int, seed: int) -> tuple[int, float]:
    from loaderbench.fake_records.studies import write_synthetic_records

    marker = folder / f".synthetic-{n}-{seed}"
    if marker.exists():
        return n, 0.0
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    t = time.perf_counter()
    paths = write_synthetic_records(folder, n, seed)
    marker.write_text(str(len(paths)))
    return len(paths), time.perf_counter() - t


def _cpu() -> float:
    """CPU seconds of this process and its finished workers: unlike wall time, not inflated by other load."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class _Stage:
    def __init__(self, res: dict, name: str):
        self.res, self.name = res, name

    def __enter__(self):
        self.t, self.c = time.perf_counter(), _cpu()

    def __exit__(self, *exc):
        self.res[f"{self.name}_s"] = time.perf_counter() - self.t
        self.res[f"{self.name}_cpu_s"] = _cpu() - self.c


def _fresh() -> None:
    """Between stages: what the last stage freed, collected and handed back, as a new `make figures` process would
    start without it."""
    from loaderbench.processes import trim_memory

    gc.collect()
    trim_memory()


def _maxrss_bytes(who: int) -> int:
    return resource.getrusage(who).ru_maxrss * 1024  # KiB on Linux


#: What `make figures` must do on 100,000 records of a 2-core machine (docs/bench.md): a cold start (no cache) within
#: `cold_over_floor` times the floor measured in the same run (what the suite's own work may add to what the libraries
#: cost: a target in seconds would read the machine), a re-run with no record changed within `unchanged_s`, peak memory
#: (the larger of the main process and its largest worker) within `peak_gib`, what it was before the drawing was made
#: faster. A re-run after one study changed is held to the same multiple of that study's own floor
#: (`one_study_over_floor`).
TARGETS = {"unchanged_s": 3.0, "peak_gib": 1.06, "cold_over_floor": 1.5, "one_study_over_floor": 1.5}
#: The stages that make up a cold `make figures`.
COLD = ("first_load", "aggregate", "draw", "report")


def _parse_only(paths: list[str]) -> int:
    """`json.loads` of each file and nothing else (the `raw` times cut out, as the load does): parsing's floor."""
    from loaderbench.analysis.table.records import without_raw

    for path in paths:
        with open(path, "rb") as fh:
            json.loads(without_raw(fh.read().decode()))
    return len(paths)


def parse_floor(folder: Path, jobs: int) -> int:
    """Every record under `folder` parsed by `_parse_only`, in `jobs` forked processes; returns how many."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(".json"))
    if jobs <= 1:
        return _parse_only(paths)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("fork")) as pool:
        return sum(pool.map(_parse_only, [paths[i::jobs] for i in range(jobs)]))


def _change_one_record(folder: Path, study: str) -> tuple[Path, bytes]:
    """One record of `study` with one throughput changed, as a re-measured cell would leave it; returns the file
    and its bytes before, to put back."""
    path = sorted((folder / study).glob("*.json"))[0]
    before = path.read_bytes()
    path.write_bytes(before.replace(b'"samples_per_s": ', b'"samples_per_s": 1', 1))
    return path, before


def bench(
    n: int,
    folder: Path,
    seed: int = 0,
    jobs: int | None = None,
    figures: Path | None = None,
    formats: tuple[str, ...] = DEFAULT,
) -> dict:
    """Every stage timed on `n` synthetic records under `folder`, the figures drawn in `formats` (figures.formats)."""
    from loaderbench.analysis.figures.draw_all import (
        analyze_all,
        default_jobs,
        draw_all,
        process_all,
        report_all,
        report_key,
    )
    from loaderbench.analysis.figures.study_cache import save_study_cache, study_key
    from loaderbench.analysis.table.records import CACHE_NAME, load_records

    def report(analyses, figs, df, load, keys: dict, reused: list) -> tuple[list[Path], bool]:  # as draw_all.run
        key = report_key(keys, df, load, folder, out)
        return report_all(
            analyses, figs, df, load, folder, out, key, reused=len(reused) == len(analyses), study_keys=keys
        )

    jobs = default_jobs() if jobs is None else jobs
    written, gen_s = _ensure_records(folder, n, seed)
    out = figures or Path(tempfile.mkdtemp(prefix="loaderbench-bench-figures-"))
    (folder / CACHE_NAME).unlink(missing_ok=True)

    formats = parse_formats(list(formats))
    res: dict = {
        "records": written,
        "jobs": jobs,
        "generate_s": round(gen_s, 2),
        "targets": TARGETS,
        "formats": list(formats),
    }
    with _Stage(res, "first_load"):
        df, load = load_records(folder, workers=jobs)
    res["parsed"] = load.parsed
    del df, load  # each stage loads as `make figures` would, without the last one's table beside it
    _fresh()
    with _Stage(res, "parse_floor"):
        res["parsed_floor"] = parse_floor(folder, jobs)
    with _Stage(res, "cached_load"):
        df, load = load_records(folder, workers=jobs)
    res["parsed_when_cached"] = load.parsed
    res["studies"] = int(df["study"].nunique())
    res["cells"] = int(df["cell_id"].nunique())

    with _Stage(res, "aggregate"):
        analyses = analyze_all(df, jobs)
    res["curves"] = int(sum(len(a.curves) for a in analyses))

    costs: dict = {}
    with _Stage(res, "draw"):
        analyses, figs = draw_all(analyses, df, out, jobs, costs=costs, formats=formats)
    res["savefig_cpu_s"] = costs["savefig_cpu_s"]
    res["figures"] = int(sum(1 for paths in figs.values() for p in paths if p.suffix == ".png"))

    cold_keys = {a.study: study_key(df[df["study"] == a.study]) for a in analyses}
    with _Stage(res, "report"):
        page = report(analyses, figs, df, load, cold_keys, [])[0][0]
    res["cold_s"] = sum(res[f"{k}_s"] for k in COLD)
    res["cold_cpu_s"] = sum(res[f"{k}_cpu_s"] for k in COLD)
    res["floor_cpu_s"] = res["parse_floor_cpu_s"] + res["savefig_cpu_s"]
    res["floor_s"] = res["floor_cpu_s"] / max(1, jobs)
    res["cold_over_floor"] = res["cold_s"] / res["floor_s"] if res["floor_s"] > 0 else math.nan
    res["peak_rss_cold_main_bytes"] = _maxrss_bytes(resource.RUSAGE_SELF)

    # `make figures` again with no record changed: every study comes from its cache, and the report is kept
    for a in analyses:
        save_study_cache(out / a.study, cold_keys[a.study], a, figs[a.study], formats)
    del df, load, analyses, figs
    _fresh()
    with _Stage(res, "unchanged_rerun"):
        df, load = load_records(folder, workers=jobs)
        keys: dict = {}
        analyses, figs, reused = process_all(df, out, jobs, keys=keys, formats=formats)
        kept = report(analyses, figs, df, load, keys, reused)[1]
    res["unchanged_rerun_reused_studies"] = len(reused)
    res["unchanged_rerun_report_kept"] = kept
    res["report_html_bytes"] = page.stat().st_size
    res["png_bytes"] = sum(p.stat().st_size for paths in figs.values() for p in paths if p.suffix == ".png")

    # one record of one study changed: that study alone is analysed and drawn again
    study = sorted(df["study"].unique())[-1]
    changed, before = _change_one_record(folder, study)
    del df, load, analyses, figs
    _fresh()
    one: dict = {}
    try:
        with _Stage(res, "one_study_changed"):
            df, load = load_records(folder, workers=jobs)
            keys = {}
            analyses, figs, reused = process_all(df, out, jobs, keys=keys, formats=formats, costs=one)
            report(analyses, figs, df, load, keys, reused)
    finally:
        changed.write_bytes(before)  # the records stay the generated ones, for the next run
    res["one_study_changed_redrawn"] = res["studies"] - len(reused)
    # that study's own floor: json.loads of its records and savefig of its figures, over the worker processes
    with _Stage(res, "one_study_parse_floor"):
        parse_floor(folder / study, jobs)
    res["one_study_savefig_cpu_s"] = one.get("savefig_cpu_s", 0.0)
    res["one_study_floor_s"] = (res["one_study_parse_floor_cpu_s"] + res["one_study_savefig_cpu_s"]) / max(1, jobs)

    res["peak_rss_main_bytes"] = _maxrss_bytes(resource.RUSAGE_SELF)
    res["peak_rss_largest_child_bytes"] = _maxrss_bytes(resource.RUSAGE_CHILDREN)
    res["figures_folder"] = str(out)
    return res


def verdicts(r: dict) -> dict[str, bool]:
    """Each target of TARGETS met or not by one bench result."""
    peak = max(r["peak_rss_main_bytes"], r["peak_rss_largest_child_bytes"]) / 2**30
    t = {**TARGETS, **r.get("targets", {})}
    return {
        "unchanged_s": r["unchanged_rerun_s"] <= t["unchanged_s"],
        "peak_gib": peak <= t["peak_gib"],
        "cold_over_floor": cold_over_floor(r) <= t["cold_over_floor"],
        "one_study_over_floor": one_study_over_floor(r) <= t["one_study_over_floor"],
    }


def one_study_over_floor(r: dict) -> float:
    """The re-run after one study changed as a multiple of that study's own floor (nan without one)."""
    return r["one_study_changed_s"] / r["one_study_floor_s"] if r.get("one_study_floor_s") else math.nan


def cold_over_floor(r: dict) -> float:
    """The cold total as a multiple of the floor of the same run (nan for a result without a floor)."""
    return r["cold_s"] / r["floor_s"] if r.get("floor_s") else math.nan


def _gib(b: int) -> str:
    return f"{b / 2**30:.2f} GiB"


def formats_text(r: dict) -> str:
    """The formats the figures of one bench result were drawn in, as the rows name them ("PNG", "PNG + PDF"); PNG
    + PDF for a result from before the formats were a choice (every figure was drawn in both then)."""
    return " + ".join(f.upper() for f in r.get("formats", ("png", "pdf")))


def floor_text(r: dict) -> str:
    """What the floor row says: its two parts and the formats the figures were drawn in."""
    if "floor_s" not in r:
        return "not measured"
    return (
        f"the libraries alone: json.loads of every record {r['parse_floor_cpu_s']:.1f} CPU-s + matplotlib's savefig "
        f"of every figure as {formats_text(r)} {r['savefig_cpu_s']:.1f} CPU-s, over {r['jobs']} processes"
    )


def stage_lines(r: dict) -> list[str]:
    """The stages of one bench result, each cold stage and the totals against TARGETS, as printed lines."""
    met = verdicts(r)
    t = r.get("targets", TARGETS)

    def mark(ok: bool) -> str:
        return "met" if ok else "MISSED"

    rows = [
        ("first load", "parse JSON, write Parquet cache", "first_load"),
        ("aggregate", "medians, CIs, knees, rules, USL fits, tests", "aggregate"),
        ("draw", f"{r['figures']} figures, {formats_text(r)}, + CSV tables; the claims decided", "draw"),
        ("report", f"claims, HTML {r['report_html_bytes'] / 2**20:.1f} MiB with figures inlined, Markdown", "report"),
        ("cold total", "the four above: make figures from nothing", "cold"),
        ("floor", floor_text(r), "floor"),
        ("cached load", f"Parquet cache, stat every file; {r['parsed_when_cached']} re-parsed", "cached_load"),
        (
            "unchanged rerun",
            f"make figures again, no record changed: {r['unchanged_rerun_reused_studies']} of {r['studies']} studies "
            f"from the cache, the report {'kept' if r.get('unchanged_rerun_report_kept') else 'written again'}; "
            f"target <= {t['unchanged_s']:g} s, {mark(met['unchanged_s'])}",
            "unchanged_rerun",
        ),
        (
            "one study changed",
            f"one record changed: {r['one_study_changed_redrawn']} of {r['studies']} studies drawn again",
            "one_study_changed",
        ),
    ]
    r = {**r, "floor_s": r.get("floor_s", math.nan), "floor_cpu_s": r.get("floor_cpu_s", math.nan)}
    lines = [f"{'stage':18s} {'wall s':>8s} {'CPU s':>8s}  what"]
    lines += [f"{label:18s} {r[key + '_s']:8.2f} {r[key + '_cpu_s']:8.2f}  {what}" for label, what, key in rows]
    lines.insert(
        7,
        f"{'cold / floor':18s} {cold_over_floor(r):7.2f}x {'':8s}  the cold total over the floor of this run: target "
        f"<= {t.get('cold_over_floor', TARGETS['cold_over_floor']):g}x, "
        + (mark(met["cold_over_floor"]) if math.isfinite(cold_over_floor(r)) else "not measured"),
    )
    one = one_study_over_floor(r)
    lines.append(
        f"{'one study / floor':18s} {one:7.2f}x {'':8s}  the re-run after one study changed over that study's floor "
        + (
            f"({r['one_study_parse_floor_cpu_s']:.1f} CPU-s json.loads + {r['one_study_savefig_cpu_s']:.1f} CPU-s "
            f"savefig, over {r['jobs']} processes: {r['one_study_floor_s']:.2f} s): target <= "
            f"{t.get('one_study_over_floor', TARGETS['one_study_over_floor']):g}x, {mark(met['one_study_over_floor'])}"
            if math.isfinite(one)
            else "not measured"
        )
    )
    lines.append(
        f"peak memory (maxrss): main process {_gib(r['peak_rss_main_bytes'])}"
        + (f" ({_gib(r['peak_rss_cold_main_bytes'])} after the cold stages)" if "peak_rss_cold_main_bytes" in r else "")
        + ", largest worker "
        f"{_gib(r['peak_rss_largest_child_bytes'])}; target <= {t['peak_gib']:g} GiB, {mark(met['peak_gib'])}"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m loaderbench.analysis.stage_costs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--folder",
        type=Path,
        default=None,
        help="where the synthetic records live (reused across runs; default: under the temp dir)",
    )
    p.add_argument("--figures", type=Path, default=None, help="where figures and report go (default: a temp dir)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: the CPUs allowed)")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers here as JSON")
    p.add_argument("--formats", default=",".join(DEFAULT), help="the figures' formats, as make figures FORMATS=...")
    args = p.parse_args(argv)
    try:
        formats = parse_formats(args.formats)
    except LoaderbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    folder = args.folder or Path(tempfile.gettempdir()) / f"loaderbench-synthetic-{args.records}-{args.seed}"
    print(f"records: {args.records} synthetic under {folder} (generated once, reused)", flush=True)
    r = bench(args.records, folder, args.seed, args.jobs, args.figures, formats)
    if r["generate_s"]:
        print(f"  generated in {r['generate_s']:.1f} s (not part of the timings)")
    print(
        f"  {r['records']} records, {r['studies']} studies, {r['cells']} cells, {r['curves']} curves, "
        f"{r['jobs']} worker processes"
    )
    for line in stage_lines(r):
        print(line)
    print(f"figures and report: {r['figures_folder']}")
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

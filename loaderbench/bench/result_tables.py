"""The bench's results as rich tables, one function per experiment; `render(result, console)` draws all of
those present in `result` (the dict `loaderbench.bench.run_all` writes as JSON). Reads results only: measures nothing.
"""

from __future__ import annotations

import math
import os

from rich.table import Table

from loaderbench.bench.common import CONFIDENCE
from loaderbench.bench.overhead import drift_text, probe_cpu_text, rounds_for_goal_text
from loaderbench.stats.intervals import pct


def fmt(x, spec: str = ".2f", none: str = "n/a") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return none
    return format(x, spec)


def fmt_interval(r: dict | None, spec: str = ".4f") -> str:
    """An interval (loaderbench.stats.bootstrap.EstimateInterval as a dict) as 'estimate [low, high]', with its
    confidence when it is not the bench's 95%."""
    if not r or r.get("estimate") is None or not math.isfinite(r["estimate"]):
        return "n/a"
    if r.get("low") is None or not math.isfinite(r["low"]):
        return f"{r['estimate']:{spec}} (no interval: {r.get('method')})"
    conf = r.get("confidence")
    note = f" ({pct(conf)})" if conf is not None and abs(conf - CONFIDENCE) > 1e-9 else ""
    return f"{r['estimate']:{spec}} [{r['low']:{spec}}, {r['high']:{spec}}]{note}"


def _table(title: str, columns: list[str], left: tuple[str, ...] = ()) -> Table:
    """Numbers right-aligned; the first column and those in `left` (words) left-aligned."""
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i == 0 or col in left else "right")
    return t


def header(result: dict, console) -> None:
    host = result["host"]
    console.print(
        f"[bold]loaderbench bench[/bold]  {host.get('cpu_model')}, {host.get('logical_cpus')} CPUs "
        f"({len(host.get('cpus_allowed') or os.sched_getaffinity(0))} allowed), "
        f"{(host.get('mem_total') or 0) / 2**30:.0f} GiB, torch {host.get('torch')}, "
        f"python {host.get('python')}, git {host.get('git_commit')}"
    )
    console.print(f"load average (1, 5, 15 min): at start {result['load']['start']}, at end {result['load']['end']}")


def overhead(ov: dict, console) -> None:
    lc = ov["loop_cost"]
    c = lc["cost_ns_per_batch"]
    console.print(
        f"1. Harness overhead. The loop alone (in-memory batches, {lc['rounds']} ABAB rounds of "
        f"{lc['batches']}): bare {lc['bare_ns_per_batch']:.0f} ns/batch, run_loop + consumer "
        f"{lc['harness_ns_per_batch']:.0f} ns/batch: the harness adds, in ns per batch, "
        f"{fmt_interval(c, '.0f')} (median paired difference)"
    )
    t = _table(
        f"   In a real cell: rounds of two short windows (bare | run_loop) while the probe samples the cell every "
        f"{ov['probe_interval_s']} s; throughput ratios with 95% bootstrap intervals (harness: paired over rounds; "
        f"probe: what its samples added to the windows they touched, against their untouched neighbours); "
        f"goal: suite/bare at least 0.98, its interval reaching 0.99",
        [
            "cell",
            "rounds x batches",
            "bare samples/s",
            "loop cost (from ns/batch)",
            "harness/bare",
            "probe on/off",
            "suite/bare (harness+probe)",
            "goal",
            "rounds for ±1%",
            "loop CPU/batch bare | harness",
            "probe CPU/sample",
            "probe share of 1 CPU",
            "speed: any two windows | neighbours (IQR)",
            "load",
        ],
    )
    for row in ov["cells"]:
        if "error" in row:
            t.add_row(row["cell"], "[red]" + row["error"][:80] + "[/red]", *[""] * 12)
            continue
        r = row.get("ratios", {})
        p = row.get("probe") or {}
        thr = row.get("bare_batches_per_s", float("nan")) * row["config"]["batch_size"]
        frac = row.get("loop_cost_fraction")
        ks = row["window_batches"] or [0]
        kspan = f"{min(ks)}" if min(ks) == max(ks) else f"{min(ks)}-{max(ks)}"
        t.add_row(
            row["cell"],
            f"{row['rounds']} x {kspan}",
            fmt(thr, ".0f"),
            f"{frac * 100:.3f}%" if frac is not None else "n/a",
            fmt_interval(r.get("harness_over_bare")),
            fmt_interval(r.get("probe_on_over_off")),
            fmt_interval(r.get("suite_over_bare")),
            row.get("goal", "n/a"),
            rounds_for_goal_text(row),
            " | ".join(fmt(v, ".1f") for v in (row.get("loop_cpu_us_per_batch") or {}).values()) + " µs",
            probe_cpu_text(p),
            f"{p['cpu_share_of_one_cpu'] * 100:.1f}%" if p.get("cpu_share_of_one_cpu") is not None else "n/a",
            drift_text(row.get("speed_drift")),
            f"{row['load_before'][0]:.1f}" if row.get("load_before") else "",
        )
    console.print(t)


def precision(pr: dict, console) -> None:
    target = pr["target_precision"]
    t = _table(
        f"2. Precision per second spent: adaptive measuring to a 95% half-width of {target:.0%} "
        "(windows of 10 batches, real runner)",
        [
            "cell",
            "runs",
            "reached",
            "seconds measured (median, range)",
            "windows",
            "half-width",
            "cell wall s",
            f"est. s for ±{target:.0%}",
        ],
    )
    for name, s in pr["cells"].items():
        rs = [r for r in s["runs"] if r["status"] == "ok"]
        rng = s["measured_s_range"]
        t.add_row(
            name,
            str(s["of"]),
            f"{s['reached']}/{s['of']}",
            f"{fmt(s['measured_s_median'], '.1f')} ({fmt(rng[0], '.1f')}-{fmt(rng[1], '.1f')})" if rng else "n/a",
            ", ".join(str(w) for w in s["windows"]),
            ", ".join(f"{h * 100:.1f}%" for h in s["half_width"] if h is not None and math.isfinite(h)),
            fmt(s["cell_wall_s_median"], ".1f"),
            ", ".join(fmt(r["est_s_for_target"], ".1f") for r in rs),
        )
    console.print(t)


def _window_label(runs: list[dict], n: int, arm: str) -> str:
    """The window a loaderbench arm actually measured: warm-up + window + tail batches."""
    for r in runs:
        if r["num_workers"] == n and r["arm"] == arm and r.get("window"):
            w = r["window"]
            return f"{w['warmup_batches']}+{w['measure_batches']}+{w['tail_batches']}"
    return "?"


def window_bias(wb: dict, console) -> None:
    short, long_ = (str(w) for w in wb["windows"])
    iv = lambda r: fmt_interval(r, ".3f")
    t = _table(
        f"3. Window bias: cpu (cpu_work={wb['cpu_work']}), batch {wb['batch_size']}, one core; bare DataLoader "
        f"loop ({wb['bare_batches']} batches after max(4, 2 x workers x prefetch)) vs loaderbench cells "
        f"(real runner, warmup_batches {wb['warmup_batches']}, measure_batches {short} | {long_}); medians "
        f"of {wb['repetitions']} interleaved repetitions, samples/s; ratios: per repetition, their median with its "
        f"order-statistic interval",
        [
            "workers",
            "bare loop",
            f"lb {short} (warm-up+window+tail)",
            f"lb {short} / bare",
            f"lb {long_} (warm-up+window+tail)",
            f"lb {long_} / bare",
            f"{short} / {long_}",
            f"lb {long_}: its first {short}-batch window / the rest",
        ],
    )
    for n, p in wb["per_workers"].items():
        n = int(n)
        t.add_row(
            str(n),
            fmt(p["bare_samples_per_s"], ".0f"),
            f"{fmt(p[f'lb{short}_samples_per_s'], '.0f')} ({_window_label(wb['runs'], n, short)})",
            iv(p[f"lb{short}_over_bare"]),
            f"{fmt(p[f'lb{long_}_samples_per_s'], '.0f')} ({_window_label(wb['runs'], n, long_)})",
            iv(p[f"lb{long_}_over_bare"]),
            iv(p["short_over_long"]),
            iv(p.get("first_over_rest")),
        )
    e = wb.get("eight_over_zero") or {}
    x = wb.get("eight_over_zero_over_bare") or {}
    if e:
        w = wb["workers"]
        t.add_row(f"{max(w)} / {min(w)} workers", iv(e.get("bare")), iv(e.get(short)), "", iv(e.get(long_)), "", "", "")
        t.add_row("  over the bare loop's", "", iv(x.get(short)), "", iv(x.get(long_)), "", "", "")
    console.print(t)
    failed = [r for r in wb["runs"] if r.get("error")]
    if failed:
        console.print(f"   [red]{len(failed)} runs failed[/red]: {str(failed[0]['error'])[:200]}")
    marks = {"met": "[green]MET[/green]", "missed": "[red]MISSED[/red]", "undecided": "[yellow]UNDECIDED[/yellow]"}
    for v in wb["verdicts"]:
        console.print(f"   {marks.get(v['status'], '[yellow]n/a[/yellow]')} {v['claim']} ({v['detail']})")


def coverage(ac: dict, console) -> None:
    t = _table(
        f"4. Adaptive coverage: the stopping rule on synthetic window times (sd {ac['sd']:.0%}, "
        f"{ac['trials']} seeded trials per row, windows of {ac['window_batches']} batches, "
        f"{ac['min_windows']}-{ac['max_windows']} windows); nominal {ac['confidence']:.0%}",
        ["stream", "target", "coverage", "coverage when reached", "median windows", "reached target", "no interval"],
    )
    for r in ac["rows"]:
        t.add_row(
            r["stream"],
            f"±{r['target']:.0%}",
            fmt(r["coverage"], ".3f"),
            fmt(r["coverage_when_reached"], ".3f"),
            fmt(r["windows_median"], ".0f"),
            fmt(r["reached_fraction"], ".1%"),
            fmt(r["no_interval_fraction"], ".1%"),
        )
    console.print(t)


def time_to_answer(tta: dict, console) -> None:
    t = _table(
        f"5. Time to answer: {len(tta['cells'])} cells x {tta['repetitions']} repetitions "
        f"({tta['warmup_batches']}+{tta['measure_batches']} batches each), wall seconds",
        ["approach", "total s", "fixed s", "per run s", "speedup (wrapped/suite), 95% interval"],
    )
    t.add_row(
        "suite (python -m loaderbench run: torch imported once, forked cells)",
        fmt(tta["suite_wall_s"], ".1f"),
        fmt(tta.get("suite_fixed_s"), ".1f"),
        fmt(tta.get("suite_cell_s_mean"), ".2f"),
        fmt_interval(tta.get("speedup")),
    )
    t.add_row(
        "wrapped (one python loaderbench/bench/script.py per run)",
        fmt(tta["wrapped_wall_s"], ".1f"),
        "0",
        fmt(tta.get("wrapped_run_s_mean"), ".2f"),
        f"start-up {fmt(tta.get('wrapped_startup_s_mean'), '.2f')} s/run "
        f"(imports {fmt(tta.get('wrapped_import_s_mean'), '.2f')})",
    )
    console.print(t)
    m = tta.get("quick_study_model", {})
    console.print(
        f"   same answer? suite/wrapped median throughput, median over cells: "
        f"{fmt_interval(tta.get('throughput_agreement'))}; failed runs: {tta['failed']}"
    )
    if "speedup" in m:
        console.print(
            f"   model for all of quick.toml ({m['runs']} runs): suite {m['suite_s']:.0f} s, "
            f"wrapped {m['wrapped_s']:.0f} s, {m['speedup']:.1f}x"
        )


def scale(sc: dict, console) -> None:
    from loaderbench.bench.analysis_scale import STAGES

    if sc.get("skipped"):
        console.print("6. Analysis at scale: skipped (--skip-scale)")
        return
    if not sc.get("available"):
        console.print(
            f"6. Analysis at scale ({sc.get('records')} records): not available (no loaderbench.analysis.stage_costs)"
        )
        return
    if "error" in sc:
        console.print(f"6. Analysis at scale: [red]failed[/red]: {sc['error'][-300:]}")
        return
    r = sc["result"]
    t = _table(
        f"6. Analysis at scale: {sc['command']} ({r.get('records')} records, {r.get('studies')} studies, "
        f"{r.get('jobs')} worker processes; {sc['wall_s']:.1f} s wall, record generation included the "
        f"first time)",
        ["stage", "wall s", "CPU s", "what"],
        left=("what",),
    )
    targets = r.get("targets") or {}
    goal = {"unchanged_rerun": targets.get("unchanged_s")}
    drawn = " + ".join(f.upper() for f in r.get("formats", ("png", "pdf")))  # both before the formats were a choice
    for label, key, what in STAGES:
        seconds = r.get(f"{key}_s")
        if goal.get(key) is not None and seconds is not None:
            what += f"; target <= {goal[key]:g} s: " + ("met" if seconds <= goal[key] else "[red]missed[/red]")
        if key == "draw":
            what += f" ({drawn})"
        if key == "floor" and seconds is not None:
            what += f" as {drawn} ({fmt(r.get('parse_floor_cpu_s'))} + {fmt(r.get('savefig_cpu_s'))} CPU-s)"
        t.add_row(label, fmt(seconds), fmt(r.get(f"{key}_cpu_s")), what)
        if key == "one_study_changed" and seconds is not None and r.get("one_study_floor_s"):
            ratio, most = seconds / r["one_study_floor_s"], targets.get("one_study_over_floor", 1.5)
            t.add_row(
                "one study / floor",
                f"{ratio:.2f}x",
                "",
                f"over that study's own floor ({fmt(r['one_study_floor_s'])} s); target <= {most:g}x: "
                + ("met" if ratio <= most else "[red]missed[/red]"),
            )
        if key == "floor" and seconds and r.get("cold_s") is not None:
            ratio, most = r["cold_s"] / seconds, targets.get("cold_over_floor", 1.5)
            t.add_row(
                "cold / floor",
                f"{ratio:.2f}x",
                "",
                f"the cold total over the floor of the same run; target <= {most:g}x: "
                + ("met" if ratio <= most else "[red]missed[/red]"),
            )
    console.print(t)
    peak = max(r.get("peak_rss_main_bytes") or 0, r.get("peak_rss_largest_child_bytes") or 0) / 2**30
    console.print(
        f"   peak memory (maxrss): main process {fmt((r.get('peak_rss_main_bytes') or 0) / 2**30)} GiB, "
        f"largest worker {fmt((r.get('peak_rss_largest_child_bytes') or 0) / 2**30)} GiB"
        + (
            f"; target <= {targets['peak_gib']:g} GiB: "
            + ("met" if peak <= targets["peak_gib"] else "[red]missed[/red]")
            if "peak_gib" in targets
            else ""
        )
    )
    rows = sc.get("scaling") or []
    if rows:
        console.print(
            "   scaling, cold make figures (each size in a fresh process): "
            + "; ".join(
                f"{x['records']:,} records {fmt(x['cold_s'])} s ({fmt(1000 * x['cold_s'] / x['records'])} s per "
                f"1000 records), unchanged {fmt(x['unchanged_rerun_s'])} s"
                for x in rows
            )
        )


def tune_vs_grid(tg: dict, console) -> None:
    runs = tg["runs"]
    for i, run in enumerate(runs):
        _tune_run(tg, run, f"run {i + 1} of {len(runs)}, " if len(runs) > 1 else "", console)
    if len(runs) > 1:
        _tune_over_runs(tg, console)


def _tune_run(tg: dict, run: dict, which: str, console) -> None:
    tgt = tg["targets"]
    load = run.get("load") or {}
    loads = f"; load average {fmt((load.get('start') or [None])[0], '.1f')} at its start" if load else ""
    t = _table(
        f"7. tune against the grid, same matrices, same run ({which}targets: >= "
        f"{tgt['fraction_of_best']:.0%} of the grid's best for <= {tgt['fraction_of_cost']:.0%} of its "
        f"cell-seconds); where the two chose differently, both settings measured again "
        f"({tg.get('holdout_repetitions')} fresh repetitions each, compared at {pct(tg['confidence'])}){loads}",
        [
            "matrix",
            "scenario",
            "tuned",
            "grid's best",
            "of best",
            "tuned vs best",
            "in grid",
            "grid's best read high",
            "tune cell-s",
            "grid cell-s",
            "of cost",
            "runs",
        ]
        + (["2nd grid", "2nd grid of best"] if tg.get("control") else []),
        left=("scenario", "tuned", "grid's best", "tuned vs best", "2nd grid"),
    )
    for m in run["matrices"]:
        for r in m["scenarios"]:
            tuned = r.get("tuned") or {}
            control = r.get("control") or {}
            t.add_row(
                m["workload"],
                r["scenario"],
                f"w={tuned.get('num_workers', '?')}",
                f"w={r.get('grid_best_num_workers', '?')}",
                fmt(r.get("fraction_of_best"), ".3f"),
                f"{r['verdict']} {r.get('comparison', '')}".strip(),
                fmt(r.get("fraction_of_best_in_grid"), ".3f"),
                fmt(r.get("grid_best_over_holdout"), ".3f"),
                fmt(r["tune_cell_seconds"], ".0f"),
                fmt(r["grid_cell_seconds"], ".0f"),
                fmt(r.get("fraction_of_cost"), ".2f"),
                f"{r['tune_measurements']}/{r['grid_measurements']}",
                *(
                    [f"w={control.get('num_workers', '?')}", fmt(control.get("fraction_of_best"), ".3f")]
                    if tg.get("control")
                    else []
                ),
            )
    console.print(t)
    s = run["summary"]
    console.print(
        f"   {s['met_best']} of {s['scenarios']} scenarios at >= {tgt['fraction_of_best']:.0%} of the "
        f"grid's best (median {fmt(s['median_fraction_of_best'], '.3f')}, lowest "
        f"{fmt(s['min_fraction_of_best'], '.3f')}; on the grid's own records, lowest "
        f"{fmt(s.get('min_fraction_of_best_in_grid'), '.3f')}); {s['met_cost']} at <= "
        f"{tgt['fraction_of_cost']:.0%} of its cell-seconds (over all: "
        f"{fmt(s['fraction_of_cost_overall'], '.2f')}, {s['tune_cell_seconds']:.0f} of "
        f"{s['grid_cell_seconds']:.0f} cell-s)"
    )
    for workload, pm in (s.get("per_matrix") or {}).items():
        control = (
            f" (a second grid: {fmt(pm['control_min_fraction_of_best'], '.3f')})"
            if "control_min_fraction_of_best" in pm
            else ""
        )
        console.print(
            f"   {workload}: {fmt(pm['fraction_of_cost'], '.2f')} of the grid's cell-seconds, lowest "
            f"fraction of the grid's best {fmt(pm['min_fraction_of_best'], '.3f')}{control}"
        )


def _tune_over_runs(tg: dict, console) -> None:
    o, tgt = tg["over_runs"], tg["targets"]
    t = _table(
        f"7. tune against the grid over {o['runs']} runs, per matrix: cost (of the grid's cell-seconds) "
        f"and lowest fraction of the grid's best, each run, and the runs that met both targets",
        ["matrix", "of cost, each run", "of best, each run", "median of cost", "median of best", "met both"],
        left=("of cost, each run", "of best, each run"),
    )
    for workload, pm in o["per_matrix"].items():
        t.add_row(
            workload,
            " ".join(fmt(x, ".2f") for x in pm["fraction_of_cost"]),
            " ".join(fmt(x, ".3f") for x in pm["min_fraction_of_best"]),
            fmt(pm["median_fraction_of_cost"], ".2f"),
            fmt(pm["median_min_fraction_of_best"], ".3f"),
            f"{pm['runs_met_both']} of {pm['runs']}",
        )
    console.print(t)
    for workload, pm in o["per_matrix"].items():
        if "control_min_fraction_of_best" in pm:
            console.print(
                f"   {workload}: a second grid reached {tgt['fraction_of_best']:.0%} of the first one's best "
                f"in {pm['control_runs_met_best']} of {pm['runs']} runs ("
                + " ".join(fmt(x, ".3f") for x in pm["control_min_fraction_of_best"])
                + ")"
            )
    console.print(
        f"   both targets (>= {tgt['fraction_of_best']:.0%} of the best, <= "
        f"{tgt['fraction_of_cost']:.0%} of the cost) for every matrix in {o['runs_met_both_everywhere']} "
        f"of {o['runs']} runs"
    )


def rerun_agreement(ra: dict, console) -> None:
    t = _table(
        f"8. rerun agreement: study {ra['study']} ({ra['cells']} cells x {ra['repetitions']} repetitions) run twice; "
        f"the second run's medians against the first's",
        ["throughput", "cells", "within 5%", "within 10%", "median deviation", "worst"],
        left=("throughput",),
    )
    names = {
        "raw_first": "raw, as first measured",
        "raw": "raw, disturbed ones measured again",
        "normalized": "at the machine's own speed (CPU-bound cells)",
        "combined": "normalized where sound, raw elsewhere",
    }
    for key, name in names.items():
        a = ra["agreement"][key]
        t.add_row(
            name,
            str(a["cells"]),
            fmt(a["within_5pct"], ".0%"),
            fmt(a["within_10pct"], ".0%"),
            fmt(a["median_deviation"], ".1%"),
            fmt(a["worst_deviation"], ".1%"),
        )
    console.print(t)
    n = _table(
        "8. the machine's noise, from the reference beside every repetition",
        [
            "run",
            "reference (units/s)",
            "IQR/median",
            "range/median",
            "moved within (median, max)",
            "disturbed kept",
            "measured again",
            "reference cost per repetition",
        ],
    )
    for i, run in enumerate(ra["runs"], 1):
        z = run["noise"]
        n.add_row(
            str(i),
            fmt(z.get("python_per_s_median"), ".1f"),
            fmt(z.get("iqr_rel"), ".1%"),
            fmt(z.get("range_rel"), ".1%"),
            f"{fmt(z.get('moved_within_median'), '.1%')}, {fmt(z.get('moved_within_max'), '.1%')}",
            str(z.get("disturbed_kept", 0)),
            str(z.get("remeasured", 0)),
            f"{fmt(z.get('reference_cost_s_median'), '.3f')} s ({fmt(z.get('reference_cost_share_median'), '.1%')})",
        )
    console.print(n)
    ratio = ra.get("reference_run2_over_run1")
    console.print(
        f"the reference ran {fmt((ratio - 1) if ratio else None, '+.1%')} faster in run 2 than in run 1 "
        f"(margins: speed {ra['margins']['speed']:.0%}, others {ra['margins']['others']:.0%}, remeasure budget "
        f"{ra['margins']['remeasure_budget']:.0%} of the repetitions)"
    )
    rep = ra.get("reference_repeatability")
    if rep:
        console.print(
            f"the reference's own noise, {rep['pairs']} pairs back to back on CPU {rep['cpu']}: python median "
            f"{fmt(rep['python']['median'], '.1%')}, p90 {fmt(rep['python']['p90'], '.1%')}, max "
            f"{fmt(rep['python']['max'], '.1%')}; jpeg median {fmt(rep['jpeg']['median'], '.1%')}, p90 "
            f"{fmt(rep['jpeg']['p90'], '.1%')}, max {fmt(rep['jpeg']['max'], '.1%')}"
        )


def doctor_hooks(dh: dict, console) -> None:
    t = _table(
        f"9. the doctor's watch on a loop that only loads (in-memory batches of 8): {dh['rounds']} interleaved rounds "
        f"of {dh['batches']} batches per arm",
        [
            "num_workers",
            "bare batches/s",
            "watched batches/s",
            "watched / bare (per round, median)",
            "watch's CPU per batch / bare period, plus its CPU samples' and its workers' sampler's share",
        ],
    )
    for loop in dh["loops"]:
        share, sampler = loop.get("cpu_share"), loop.get("sampler_share")
        t.add_row(
            str(loop["num_workers"]),
            fmt(loop["bare_batches_per_s"]["estimate"], ".0f"),
            fmt(loop["watched_batches_per_s"]["estimate"], ".0f"),
            fmt_interval(loop["ratio"]),
            (f"{100 * share:.2f}%" if share is not None else "n/a")
            + (f" (the sampler {100 * sampler:.2f}%)" if sampler is not None else "")
            + (f"; {loop['sampler_edge_ms']:.0f} ms at the window's edges" if "sampler_edge_ms" in loop else ""),
        )
    cost = dh.get("watch_cost")
    if cost:
        console.print(
            f"   the watch's own work, in the loop thread's CPU time ({cost['rounds']} ABAB rounds of "
            f"{cost['batches']:,} in-memory batches): bare {cost['bare_ns_per_batch']:.0f} ns/batch, watched "
            f"{cost['watched_ns_per_batch']:.0f} ns/batch: the watch adds "
            f"{fmt_interval(cost['cost_ns_per_batch'], '.0f')} ns per batch"
            + f"; a CPU sample {fmt_interval(cost.get('sample_ns'), '.0f')} ns, "
            f"{fmt(cost.get('samples_share_of_time'), '.2%')} of the loop's time"
        )
    console.print(t)
    for loop in dh["loops"]:
        r, share = loop["ratio"], loop.get("cpu_share")
        if share is None:  # a JSON file of an older bench: the wall-clock ratio alone
            verdict = "met" if r["high"] >= 0.99 and r["estimate"] >= 0.99 else "missed"
        else:  # the watch's own CPU per batch against the bare batch period: precise where the wall clock scatters
            verdict = "met" if share <= 0.01 else "missed"
        console.print(
            f"   {verdict}: watched loop within 1% of the bare one at {loop['num_workers']} workers"
            + (f" (the watch's CPU, {100 * share:.2f}% of the loop's time)" if share is not None else "")
            + f"; wall-clock median {r['estimate']:.3f}, interval reaching {r['high']:.3f}; load "
            f"{dh['load_start'][0]:.1f}"
        )


def doctor_vs_grid(dg: dict, console) -> None:
    t = _table(
        f"10. the doctor against a grid: each loop started at num_workers 0; the grid runs num_workers "
        f"{', '.join(map(str, dg['workers']))} x persistent_workers, one full run each; both choices run again "
        f"{dg['holdout']} times, interleaved; targets: at least 95% of the grid's best for at most 30% of its cost",
        ["loop", "grid's best", "doctor's choice", "doctor / grid's best", "doctor s", "grid s", "cost", "targets"],
        left=("grid's best", "doctor's choice"),
    )
    for kind, k in dg["kinds"].items():
        d = k["doctor"]
        t.add_row(
            kind,
            str(k.get("grid_choice")),
            str(d.get("choice")) + (" [red](doctor failed)[/red]" if d.get("error") else ""),
            fmt_interval(k.get("fraction_of_best"), ".3f"),
            fmt(d.get("wall_s"), ".0f"),
            fmt(k.get("grid_cost_s"), ".0f"),
            fmt(k.get("cost_ratio"), ".0%"),
            {True: "met", False: "[red]missed[/red]", None: "n/a"}[k.get("met")],
        )
    console.print(t)


def render(result: dict, console) -> None:
    header(result, console)
    for key, draw in (
        ("overhead", overhead),
        ("precision", precision),
        ("window_bias", window_bias),
        ("adaptive_coverage", coverage),
        ("time_to_answer", time_to_answer),
        ("analysis_scale", scale),
        ("tune_vs_grid", tune_vs_grid),
        ("rerun_agreement", rerun_agreement),
        ("doctor_hooks", doctor_hooks),
        ("doctor_vs_grid", doctor_vs_grid),
    ):
        if result.get(key) is not None:
            draw(result[key], console)
    console.print(f"total {result['elapsed_s']:.0f} s; JSON: {result.get('out')}")

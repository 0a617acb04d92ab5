"""One figure per question of the seeds, each named after the question it answers, drawn from a study's tidy
rows; `draw_question_figures` picks the figure matching a study (by its name, else by the axes it varies).

Every figure: bars are medians over repetitions, black dots the repetitions themselves (so the dots are the
spread); ratio whiskers are distribution-free intervals whose real coverage and n the note prints; the header
names the verdicts of the question's claims as computed by analysis.claims (never written by hand); the
footer names study, machine and versions.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from analysis import claims as C
from analysis.figures.question_parts import bars as _bars
from analysis.figures.question_parts import empty as _empty
from analysis.figures.question_parts import header as _header
from analysis.figures.question_parts import legend_top as _legend_top
from analysis.figures.question_parts import ok as _ok
from analysis.figures.question_parts import plain_log as _plain_log
from analysis.figures.question_parts import ratio_note
from analysis.figures.question_parts import save_with_note as _save
from analysis.figures.style import apply_theme

MIB = 2**20
METHOD_ORDER = ["fork", "forkserver+preload", "forkserver", "spawn"]
BACKING_ORDER = ["list_str", "numpy_object", "numpy_bytes", "arrow"]


# --------------------------------------------------------------------------------------------------------
# 1. start-method


def time_to_first_batch_by_start_method(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Time to first batch, epoch-2 restart, workers' memory and steady throughput per start method, for each
    num_workers x dataset payload."""
    name = "time_to_first_batch_by_start_method"
    ok = _ok(df)
    ok = ok[ok["num_workers"] > 0].copy()
    if ok.empty:
        return _empty(df, study, out, name, "no ok records")
    ok["method"] = C.start_method_label(ok)
    ok["payload"] = pd.to_numeric(C.col(ok, "parent_payload_mb", 0.0), errors="coerce").fillna(0.0)
    ok["cell"] = [f"{int(n)} worker{'s' if n > 1 else ''}, {p:g} MiB payload" for n, p in zip(ok["num_workers"],
                                                                                              ok["payload"])]
    keys = dict(zip(ok["cell"], zip(ok["num_workers"], ok["payload"])))
    hue_order = sorted(keys, key=keys.get)
    order = [m for m in METHOD_ORDER if m in set(ok["method"])]
    ok["workers_uss_mib_per_worker"] = ok["workers_uss_peak_bytes"] / MIB / ok["num_workers"]
    ok["workers_cpu_per_worker"] = pd.to_numeric(C.col(ok, "cpu_workers_s"), errors="coerce") / ok["num_workers"]
    palette = sns.color_palette("Paired", len(hue_order))
    panels = [("time_to_first_batch_s", "time to first batch (s, log)", True, "first loader: workers start, 1st batch"),
              ("epoch_gap_s", "epoch-2 gap (s, log)", True, "next loader: workers start again (epoch 2)"),
              ("workers_cpu_per_worker", "workers' CPU per worker (s, log)", True,
               "each worker's own start-up (2 starts)"),
              ("cpu_main_s", "main-process CPU (s, log)", True, "pickling the dataset, per worker start"),
              ("workers_uss_mib_per_worker", "workers' USS peak per worker (MiB)", False,
               "memory each worker holds alone"),
              ("samples_per_s", "steady throughput (samples/s)", False, "after start-up")]
    panels = [p for p in panels if p[0] in ok and pd.to_numeric(ok[p[0]], errors="coerce").notna().any()]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.7 * nrows), squeeze=False)
    axes = [list(axes.ravel())]
    for ax in axes[0][len(panels):]:
        ax.set_visible(False)
    for ax, (metric, label, log, title) in zip(axes[0], panels):
        _bars(ax, ok, "method", metric, "cell", order, hue_order, palette, log=log)
        ax.set_xlabel("start method")
        ax.set_ylabel(label)
        ax.set_title(title)
        ax.tick_params(axis="x", labelrotation=20)
    leg = _legend_top(fig, axes[0][0], None, ncol=len(hue_order))
    for ax in axes[0][1:]:
        if ax.get_legend():
            ax.get_legend().remove()
    _header(fig, f"Start methods: what a worker costs to start ({study})", df, study, "start-method", legend=leg)
    return _save(fig, df, study, out, name,
                 "Bars: median over repetitions; dots: repetitions. forkserver+preload = set_forkserver_preload(torch, "
                 "torchvision, the workload). Payload: Python strings the dataset object carries (pickled to "
                 "spawn/forkserver workers).\nWorkers = every process under the cell but the main one, per worker: "
                 "under forkserver it includes the fork server, under spawn/forkserver the resource tracker. A spawned "
                 "worker's exit can add a transient as large as the payload to its USS peak.")


# --------------------------------------------------------------------------------------------------------
# 2. cow-memory


def _timeline_rows(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per probe sample with all workers alive: t since the first such sample, USS/PSS per worker."""
    out = []
    for _, r in ok.iterrows():
        tl = r.get("memory_timeline")
        tl = json.loads(tl) if isinstance(tl, str) else tl
        if not isinstance(tl, list):
            continue
        n = int(r["num_workers"])
        alive = [s for s in tl if isinstance(s, list) and len(s) >= 6 and s[1] >= 1 + n]
        if not alive:
            continue
        t0 = alive[0][0]
        for s in alive:
            out.append({"cell_id": r["cell_id"], "repetition": r["repetition"], "index_backing": r["index_backing"],
                        "start_method": r["start_method"], "num_workers": n, "t": s[0] - t0,
                        "uss_mib": s[5] / MIB / n, "pss_mib": s[3] / MIB / n})
    return pd.DataFrame(out)


def memory_growth_by_backing(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Workers' memory over the run per index backing (the copy-on-write question), and its growth."""
    name = "memory_growth_by_backing"
    ok = C.with_growth(df)
    if ok.empty or "index_backing" not in ok:
        return _empty(df, study, out, name, "no ok records with an index backing")
    ok = ok[ok["index_backing"].notna() & (ok["index_backing"] != "none")].copy()
    ok["peak_pss_mib_per_worker"] = [_peak_pss(t, n) for t, n in zip(C.col(ok, "memory_timeline"), ok["num_workers"])]
    tl = _timeline_rows(ok)
    backings = [b for b in BACKING_ORDER if b in set(ok["index_backing"])]
    palette = dict(zip(BACKING_ORDER, sns.color_palette("colorblind", 4)))
    combos = sorted({(sm, int(n)) for sm, n in zip(ok["start_method"], ok["num_workers"])},
                    key=lambda c: (c[0] != "fork", c[1]))
    ok["layout"] = [f"{sm}, {int(n)} worker{'s' if n > 1 else ''}" for sm, n in zip(ok["start_method"],
                                                                                    ok["num_workers"])]
    layouts = [f"{sm}, {n} worker{'s' if n > 1 else ''}" for sm, n in combos]
    ncols = max(len(combos), 3)
    fig, axes = plt.subplots(2, ncols, figsize=(4.2 * ncols, 7.2), squeeze=False)
    for ax, (sm, n) in zip(axes[0], combos):
        sub = tl[(tl["start_method"] == sm) & (tl["num_workers"] == n)] if not tl.empty else tl
        for (b, rep), g in (sub.groupby(["index_backing", "repetition"]) if not sub.empty else []):
            ax.plot(g["t"], g["uss_mib"], color=palette[b], lw=1.2, alpha=0.75,
                    label=b if rep == sub[sub["index_backing"] == b]["repetition"].min() else "_nolegend_")
        ax.set_title(f"{sm}, {n} worker{'s' if n > 1 else ''}")
        ax.set_xlabel("time since all workers were up (s)")
        ax.set_ylabel("USS per worker (MiB)")
        ax.set_ylim(bottom=0)
        sns.despine(ax=ax)
    for ax in axes[0][len(combos):]:
        ax.set_visible(False)
    bars = [("growth_mib_per_worker", "USS growth per worker over the run (MiB)", "growth while iterating (fork)"),
            ("end_mib_per_worker", "peak USS per worker (MiB)", "private memory per worker (USS)"),
            ("peak_pss_mib_per_worker", "peak PSS per worker (MiB)", "fair share per worker (PSS)")]
    for ax, (metric, label, title) in zip(axes[1], bars):
        # growth under spawn is the worker's own start-up (import, unpickling its copy): peaks only
        data = ok[ok["start_method"] == "fork"] if metric == "growth_mib_per_worker" else ok
        lay = [x for x in layouts if x in set(data["layout"])]
        _bars(ax, data, "layout", metric, "index_backing", lay, backings, [palette[b] for b in backings])
        ax.axhline(0, color="0.5", lw=0.6)
        ax.set_xlabel("")
        ax.set_ylabel(label)
        ax.set_title(title)
    for ax in axes[1][len(bars):]:
        ax.set_visible(False)
    leg = _legend_top(fig, axes[1][0], "index backing", ncol=4)
    for ax in list(axes[1][1:]) + list(axes[0]):
        if ax.get_legend():
            ax.get_legend().remove()
    items = int(pd.to_numeric(C.col(ok, "index_items"), errors="coerce").max())
    _header(fig, f"Copy-on-write: workers' memory while reading a {items:,}-entry index ({study})", df, study,
            "cow-memory", legend=leg)
    return _save(fig, df, study, out, name,
                 "Top: workers' USS per worker from the runner's probe (every 0.2 s), each line one repetition. "
                 "Bottom: bars median, dots repetitions. Growth: highest minus first probe sample with all workers "
                 "alive. Workers = every process under the cell but the main one (spawn: the resource tracker too)."
                 "\nnumpy_bytes is the control (an index that is one object). A step shared by every backing is not "
                 "the index's: a full pass of Python's cyclic GC writes to every tracked object the worker inherited "
                 "(gc.freeze() in the parent before forking avoids it).")


def _peak_pss(tl, n) -> float:
    tl = json.loads(tl) if isinstance(tl, str) else tl
    if not isinstance(tl, list):
        return np.nan
    alive = [s for s in tl if isinstance(s, list) and len(s) >= 6 and s[1] >= 1 + int(n)]
    return max(s[3] for s in alive) / MIB / int(n) if alive else np.nan


# --------------------------------------------------------------------------------------------------------
# 3. persistence


def epoch_gap_by_persistence(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """The epoch-boundary gap and per-epoch time with and without persistent workers, per start method."""
    name = "epoch_gap_by_persistence"
    ok = _ok(df)
    ok = ok[ok["num_workers"] > 0].copy()
    if ok.empty:
        return _empty(df, study, out, name, "no ok records")
    ok["workers"] = np.where(ok["persistent_workers"].map(C.is_true), "persistent", "restarted each epoch")
    hue_order = ["restarted each epoch", "persistent"]
    pal = dict(zip(hue_order, sns.color_palette("colorblind", 2)))
    order = [m for m in ("fork", "forkserver", "spawn") if m in set(ok["start_method"])]
    top = int(ok["epochs"].max())
    many = ok[ok["epochs"] == top]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    _bars(axes[0], many, "start_method", "epoch_gap_s", "workers", order, hue_order, [pal[h] for h in hue_order],
          log=True)
    axes[0].set_xlabel("start method")
    axes[0].set_ylabel("gap at an epoch boundary (s, log)")
    axes[0].set_title(f"last batch of epoch e to first of e+1 ({top} epochs)")
    ep = []
    for _, r in many.iterrows():
        try:
            times = json.loads(r["epoch_s"]) if isinstance(r["epoch_s"], str) else r["epoch_s"]
        except (TypeError, ValueError):
            continue
        for i, t in enumerate(times or []):
            ep.append({"epoch": i + 1, "epoch_s": t, "start_method": r["start_method"], "workers": r["workers"]})
    ep = pd.DataFrame(ep)
    if not ep.empty:
        sns.lineplot(data=ep, x="epoch", y="epoch_s", hue="workers", hue_order=hue_order, style="start_method",
                     style_order=order, estimator=np.median, errorbar=None, markers=True, palette=pal, ax=axes[1])
        _plain_log(axes[1])
        axes[1].set_xticks(range(1, top + 1))
        sns.move_legend(axes[1], "center", fontsize=7, title=None, ncol=2)
    axes[1].set_xlabel("epoch")
    axes[1].set_ylabel("epoch time incl. worker start (s, log)")
    axes[1].set_title("per-epoch time (median of repetitions)")
    sns.despine(ax=axes[1])
    sp, comps = [], []
    for (sm, e), g in ok.groupby(["start_method", "epochs"]):
        on, off = g[g["workers"] == "persistent"]["total_s"], g[g["workers"] != "persistent"]["total_s"]
        c = C.compare(on, off)
        comps.append(c)
        if np.isfinite(c.ratio):
            sp.append({"start_method": sm, "epochs": f"{int(e)} epoch{'s' if e > 1 else ''}", "ratio": c.ratio,
                       "lo": c.ci_low, "hi": c.ci_high})
    sp = pd.DataFrame(sp)
    if not sp.empty:
        eorder = sorted(sp["epochs"].unique(), key=lambda s: int(s.split()[0]))
        sns.barplot(data=sp, x="start_method", y="ratio", hue="epochs", order=order, hue_order=eorder, ax=axes[2],
                    palette="Greys", alpha=0.9)
        for i, m in enumerate(order):
            for j, e in enumerate(eorder):
                row = sp[(sp["start_method"] == m) & (sp["epochs"] == e)]
                if row.empty or not np.isfinite(row["lo"].iloc[0]):
                    continue
                xpos = i + (j - (len(eorder) - 1) / 2) * 0.8 / len(eorder)
                axes[2].plot([xpos, xpos], [row["lo"].iloc[0], row["hi"].iloc[0]], color="0.1", lw=1.2)
        axes[2].axhline(1.0, color="0.4", lw=0.8)
        axes[2].axhline(1.13, color="C3", ls="--", lw=1)
        axes[2].text(-0.45, 1.13, "tutorial: 1.13x (10 epochs)", color="C3", fontsize=7, ha="left", va="bottom")
        _plain_log(axes[2])
        sns.move_legend(axes[2], "upper left", fontsize=7, title=None)
    axes[2].set_xlabel("start method")
    axes[2].set_ylabel("run time without / with persistent (x, log)")
    axes[2].set_title("speed-up of the whole run")
    sns.despine(ax=axes[2])
    if axes[0].get_legend():
        sns.move_legend(axes[0], "upper left", fontsize=7, title=None)
    _header(fig, f"Persistent workers: the cost at every epoch boundary ({study})", df, study, "persistence")
    return _save(fig, df, study, out, name,
                 "Left: bars median, dots repetitions. Right: ratio of median total run time, whisker = "
                 f"{ratio_note(comps)}; with 1 epoch there is no boundary (control).")


# --------------------------------------------------------------------------------------------------------
# 4. sharing


def sharing_strategy_limits(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Open descriptors, failures, throughput and /dev/shm per sharing strategy, workers and tensors."""
    name = "sharing_strategy_limits"
    rows = df.copy()
    if rows.empty:
        return _empty(df, study, out, name, "no records")
    rows["limit"] = C._limits(rows)
    rows["exhausted"] = C._fd_exhausted(rows)
    rows["cell"] = [f"{int(n)}w x {int(t)}t" for n, t in zip(rows["num_workers"], rows["tensors_per_sample"])]
    cells = sorted(rows["cell"].unique(), key=lambda s: (int(s.split("w")[0]), int(s.split("x ")[1][:-1])))
    strategies = [s for s in ("file_descriptor", "file_system") if s in set(rows["sharing_strategy"])]
    pal = dict(zip(("file_descriptor", "file_system"), sns.color_palette("colorblind", 2)))
    limits = sorted(rows["limit"].dropna().unique())
    ok = _ok(rows).copy()
    ok["shm_mib"] = ok["shm_peak_bytes"] / MIB
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2), gridspec_kw={"width_ratios": [1.2, 1, 1, 1]})
    # outcome grid: ok repetitions out of all, per strategy x limit (rows) and workers x tensors (columns)
    grid = []
    for (s, lim), g in rows.groupby(["sharing_strategy", "limit"]):
        for c in cells:
            gg = g[g["cell"] == c]
            grid.append({"row": f"{s}\nulimit -n {lim:g}", "cell": c, "ok": (gg["status"] == "ok").mean() if len(gg)
                         else np.nan, "text": f"{(gg['status'] == 'ok').sum()}/{len(gg)}" +
                         ("\nEMFILE" if gg["exhausted"].any() else "")})
    grid = pd.DataFrame(grid)
    if not grid.empty:
        piv = grid.pivot(index="row", columns="cell", values="ok")[cells]
        txt = grid.pivot(index="row", columns="cell", values="text")[cells]
        sns.heatmap(piv, annot=txt, fmt="", cmap="RdYlGn", vmin=0, vmax=1, cbar=False, ax=axes[0],
                    annot_kws={"fontsize": 7}, linewidths=0.5)
        axes[0].set_xlabel("workers x tensors per sample")
        axes[0].set_ylabel("")
        axes[0].set_title("repetitions ok (EMFILE: ran out of descriptors)")
        axes[0].tick_params(axis="x", labelrotation=30)
    top = ok[ok["limit"] == ok["limit"].max()] if len(ok) else ok
    for ax, (metric, label, title, log) in zip(axes[1:], [
            ("open_fds_peak", "peak open descriptors, all processes (log)", "descriptors held", True),
            ("samples_per_s", "throughput (samples/s, log)", "throughput", True),
            ("shm_mib", "/dev/shm peak (MiB)", "shared memory used", False)]):
        _bars(ax, top, "cell", metric, "sharing_strategy", [c for c in cells if c in set(top["cell"])], strategies,
              [pal[s] for s in strategies], log=log)
        ax.set_xlabel("workers x tensors per sample")
        ax.set_ylabel(label)
        ax.set_title(f"{title} (ulimit -n {top['limit'].max():g})" if len(top) else title)
        ax.tick_params(axis="x", labelrotation=30)
        if metric == "open_fds_peak":
            for lim in limits:
                ax.axhline(lim, color="C3", ls=":", lw=1)
                ax.text(ax.get_xlim()[0], lim, f" ulimit -n {lim:g} (per process)", color="C3", fontsize=7, va="bottom")
    leg = _legend_top(fig, axes[1], None, ncol=2)
    for ax in axes[2:]:
        if ax.get_legend():
            ax.get_legend().remove()
    _header(fig, f"Sharing strategies: descriptors, failures, per-tensor cost ({study})", df, study, "sharing",
            legend=leg)
    return _save(fig, df, study, out, name,
                 "Same 64 KiB per sample as 1 tensor or split into many. Right three panels: ok cells at the highest "
                 "open-file limit; bars median, dots repetitions. /dev/shm is machine-wide: other processes' "
                 "segments add noise.")


# --------------------------------------------------------------------------------------------------------
# 5. ladder


def ladder_speedups(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Our cumulative speed-up per rung of the tutorial's ladder next to the published one."""
    name = "ladder_speedups"
    ok = _ok(df).copy()
    if ok.empty:
        return _empty(df, study, out, name, "no ok records")
    ok["rung"] = C.ladder_rung(ok)
    rungs = [r for r in C.RUNGS if r in set(ok["rung"])]
    base = ok[ok["rung"] == "baseline"]["end_to_end_samples_per_s"]
    sp, comps = [], []
    for r in rungs:
        c = C.compare(base, ok[ok["rung"] == r]["end_to_end_samples_per_s"])
        if r != "baseline":
            comps.append(c)
        gpu = C._on_gpu(ok[ok["rung"] == r])
        sp.append({"rung": r, "ratio": c.ratio, "lo": c.ci_low, "hi": c.ci_high, "gpu": gpu,
                   "published": 1.0 if r == "baseline" else C.PUBLISHED.get(r, np.nan)})
    sp = pd.DataFrame(sp)
    device = ", ".join(sorted(set(C.col(ok, "consumer").dropna().astype(str)))) or "?"
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [1.3, 1]})
    ax = axes[0]
    y = np.arange(len(sp))
    ax.barh(y - 0.2, sp["ratio"], height=0.38, color=sns.color_palette("colorblind")[0],
            label=f"ours (model step on {device})")
    sp.loc[sp["rung"] == "baseline", ["lo", "hi"]] = np.nan  # 1 by definition: no interval
    err = np.vstack([sp["ratio"] - sp["lo"], sp["hi"] - sp["ratio"]])
    err = np.where(np.isfinite(err), np.clip(err, 0, None), 0)
    ax.errorbar(sp["ratio"], y - 0.2, xerr=err, fmt="none", color="0.1", lw=1, capsize=2)
    ax.barh(y + 0.2, sp["published"], height=0.38, color="0.75", label="tutorial (published, GPU)")
    for i, r in sp.iterrows():
        right = np.nanmax([r["ratio"], r["hi"]]) if np.isfinite(r["ratio"]) else 0
        ax.text(right * 1.02 + 0.05, i - 0.2, f"{r['ratio']:.2f}x", va="center", fontsize=7)
        ax.text(r["published"] * 1.02 + 0.05, i + 0.2, f"{r['published']:.2f}x", va="center", fontsize=7,
                color="0.35")
    labels = [f"{r}\n(no GPU: no effect)" if r in C.GPU_ONLY and not g else r for r, g in zip(sp["rung"], sp["gpu"])]
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1, color="0.4", lw=0.8)
    ax.set_xlabel("cumulative speed-up over the baseline (x, end-to-end samples/s)")
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("each rung adds one change to the one above")
    sns.despine(ax=ax)
    _bars(axes[1], ok, "rung", "end_to_end_samples_per_s", None, rungs)
    axes[1].set_xlabel("")
    axes[1].set_ylabel("end-to-end throughput (samples/s)")
    shape = {c: pd.to_numeric(C.col(ok, c), errors="coerce").max() for c in ("epochs", "measure_batches", "batch_size")}
    axes[1].set_title(f"{shape['epochs']:g} epochs x {shape['measure_batches']:g} batches of {shape['batch_size']:g}, "
                      f"wall time" if all(np.isfinite(v) for v in shape.values()) else "whole run, wall time")
    axes[1].tick_params(axis="x", labelrotation=25)
    _header(fig, f"The tutorial's optimization ladder, reproduced ({study})", df, study, "ladder", width=170)
    return _save(fig, df, study, out, name,
                 f"Left: ratio of medians over the baseline, whisker = {ratio_note(comps)}. Right: bars median, dots "
                 "repetitions. The tutorial's numbers are from a GPU; on a CPU the model step dominates.")


# --------------------------------------------------------------------------------------------------------
# 6. oversubscription


def oversubscription_ranks_x_workers(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """CPU-bound throughput from 1 to 4x the cores as workers, and ranks x workers (DDP-like)."""
    name = "oversubscription_ranks_x_workers"
    ok = _ok(df)
    ok = ok[ok["num_workers"] > 0].copy()
    if ok.empty:
        return _empty(df, study, out, name, "no ok records")
    ok["ranks"] = pd.to_numeric(C.col(ok, "ranks", 1), errors="coerce").fillna(1).astype(int)
    ok["total_workers"] = ok["ranks"] * ok["num_workers"]
    single = ok[ok["ranks"] == 1]
    workloads = [w for w in ("cpu", "jpeg", "sleep") if w in set(single["workload"])]
    multi = ok[ok["ranks"] > 1]
    n_panels = len(workloads) + (1 if not multi.empty else 0)
    fig, axes = plt.subplots(1, max(n_panels, 1), figsize=(4.6 * max(n_panels, 1), 3.9), squeeze=False)
    axes = axes[0]
    cores = int(ok["cores"].max())
    for ax, w in zip(axes, workloads):
        sub = single[single["workload"] == w]
        for c, g in sub.groupby("cores"):
            med = g.groupby("num_workers")["samples_per_s"].median()
            ax.plot(med.index, med.values, marker="o", lw=1.5, label=f"{c} cores")
            ax.scatter(g["num_workers"], g["samples_per_s"], s=9, color="0.1", zorder=3)
            ax.axvline(c, color="0.3", ls=":", lw=1)
            ax.axvspan(c, max(g["num_workers"].max(), c) + 0.3, color="0.93", zorder=-1)
            ax.text(c, 0.02, " workers = cores", transform=ax.get_xaxis_transform(), fontsize=7, color="0.3")
        ax.set_ylim(bottom=0)
        ax.set_xticks(sorted(sub["num_workers"].unique()))
        ax.set_xlabel("num_workers (one loader)")
        ax.set_ylabel("throughput (samples/s)")
        ax.set_title(f"{w}: past the cores (shaded)")
        sns.despine(ax=ax)
    if not multi.empty:
        ax = axes[len(workloads)]
        for w in sorted(set(multi["workload"])):
            for r, g in pd.concat([single[single["workload"] == w], multi[multi["workload"] == w]]).groupby("ranks"):
                med = g.groupby("total_workers")["samples_per_s"].median()
                ax.plot(med.index, med.values, marker="o" if r == 1 else "s", lw=1.5,
                        label=f"{w}, {r} rank{'s' if r > 1 else ''}")
                ax.scatter(g["total_workers"], g["samples_per_s"], s=9, color="0.1", zorder=3)
                if r > 1:
                    for n in sorted(set(g["num_workers"])):
                        t = n * r
                        ax.annotate(f"W={n}", (t, med.get(t, np.nan)), textcoords="offset points", xytext=(3, 4),
                                    fontsize=7)
        ax.axvline(cores, color="0.3", ls=":", lw=1)
        ax.text(cores, 0.02, " R x W = cores", transform=ax.get_xaxis_transform(), fontsize=7, color="0.3")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("workers in all (ranks x num_workers)")
        ax.set_ylabel("throughput of all ranks (samples/s)")
        ax.set_title("DDP-like: ranks side by side")
        ax.legend(fontsize=7, loc="lower right")
        sns.despine(ax=ax)
    if workloads and axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7, loc="lower right")
    _header(fig, f"Oversubscription: CPU-bound loading past the cores ({study})", df, study, "oversubscription")
    pc = C.env_one(df, "physical_cores")
    return _save(fig, df, study, out, name,
                 f"Lines: median over repetitions; dots: repetitions. Cores = CPUs the cell may use (affinity); "
                 f"physical cores reported by the machine: {pc}.")


# --------------------------------------------------------------------------------------------------------
# 7. rng


def rng_duplicates(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Fraction of random draws that repeat, per source (Python, NumPy, torch), within and across epochs."""
    name = "rng_duplicates"
    ok = _ok(df).copy()
    cols = [f"rng_dup_{s}_{p}" for p in ("within", "across") for s in ("python", "numpy", "torch")]
    if ok.empty or not any(c in ok for c in cols):
        return _empty(df, study, out, name, "no ok records with rng_duplicates")
    ok["config"] = [f"{int(n)} workers, {sm}, init={wi}, " + ("persistent" if C.is_true(p) else "restarted")
                    if n else "0 workers (main process)"
                    for n, sm, wi, p in zip(ok["num_workers"], C.col(ok, "start_method"), C.col(ok, "worker_init"),
                                            C.col(ok, "persistent_workers"))]
    med = ok.groupby("config")[[c for c in cols if c in ok]].median() * 100
    med = med.reindex(sorted(med.index, key=lambda s: (int(s.split()[0]), s)))
    med.columns = [f"{c.split('_')[2]}\n{'same epoch' if c.endswith('within') else 'epoch before'}"
                   for c in med.columns]
    fig, ax = plt.subplots(figsize=(10.5, 0.42 * len(med) + 1.8))
    sns.heatmap(med, annot=med.map(lambda v: "n/a" if not np.isfinite(v) else f"{v:.0f}%"), fmt="", cmap="Reds",
                vmin=0, vmax=100, cbar_kws={"label": "draws that repeat (%, median of repetitions)"}, ax=ax,
                linewidths=0.5, annot_kws={"fontsize": 8})
    ax.set_xlabel("source of the draw / repeats another draw of the ...")
    ax.set_ylabel("")
    ax.tick_params(axis="x", labelrotation=0)
    _header(fig, f"Do workers draw the same random numbers? ({study}, torch {C.env_one(df, 'torch')})", df, study,
            "rng", width=120)
    return _save(fig, df, study, out, name,
                 "same epoch: share of an epoch's draws equal to another draw of that epoch (the same augmentation in "
                 "two workers); epoch before: share already drawn in the previous epoch. n/a: a single epoch.")


# --------------------------------------------------------------------------------------------------------
# 8. in-order


def tail_latency_in_order(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Batch wait percentiles and throughput, in_order true/false, with and without a straggling worker."""
    name = "tail_latency_in_order"
    ok = _ok(df).copy()
    if ok.empty:
        return _empty(df, study, out, name, "no ok records")
    slow = pd.to_numeric(C.col(ok, "slow_worker_ms", 0.0), errors="coerce").fillna(0.0)
    ok["straggler"] = [f"{int(n)} w\n" + ("none" if s == 0 else f"+{s:g} ms")
                       for n, s in zip(ok["num_workers"], slow)]
    keys = dict(zip(ok["straggler"], zip(ok["num_workers"], slow)))
    order = sorted(keys, key=keys.get)
    ok["delivery"] = np.where(ok["in_order"].map(C.is_true), "in_order=True", "in_order=False")
    hue_order = ["in_order=True", "in_order=False"]
    pal = sns.color_palette("colorblind", 2)
    for q in ("p50", "p95", "p99"):
        ok[f"wait_{q}_ms"] = ok[f"batch_wait_{q}_s"] * 1e3
    fig, axes = plt.subplots(1, 3, figsize=(max(13, 3 * (1.2 + 0.9 * len(order))), 3.9))
    for ax, (metric, label, title) in zip(axes, [
            ("wait_p99_ms", "p99 batch wait (ms)", "tail: p99 wait for a batch"),
            ("wait_p50_ms", "p50 batch wait (ms)", "typical: median wait"),
            ("samples_per_s", "throughput (samples/s)", "mean throughput")]):
        _bars(ax, ok, "straggler", metric, "delivery", order, hue_order, pal)
        ax.set_xlabel("workers / worker 0's extra wait per sample")
        ax.set_ylabel(label)
        ax.set_title(title)
    leg = _legend_top(fig, axes[0], None, ncol=2)
    for ax in axes[1:]:
        if ax.get_legend():
            ax.get_legend().remove()
    _header(fig, f"in_order=False with a straggling worker ({study})", df, study, "in-order", legend=leg)
    return _save(fig, df, study, out, name, "Bars: median over repetitions; dots: repetitions. Waits: time the "
                                            "training loop waited for each batch of the measured window.")


# --------------------------------------------------------------------------------------------------------

FIGURES = {
    "start-method": time_to_first_batch_by_start_method,
    "cow-memory": memory_growth_by_backing,
    "persistence": epoch_gap_by_persistence,
    "sharing": sharing_strategy_limits,
    "ladder": ladder_speedups,
    "oversubscription": oversubscription_ranks_x_workers,
    "rng": rng_duplicates,
    "in-order": tail_latency_in_order,
}


def draw_question_figures(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """The figure(s) answering the question `study` was made for (by its name, else the axes it varies), as
    PNG + PDF under `out`; [] for a study that answers none of the seeds' questions."""
    rows = df[df["study"] == study] if "study" in df else df.iloc[0:0]
    question = C.question_of(study, rows)
    if question is None or rows.empty:
        return []
    apply_theme()
    draw = FIGURES[question]
    try:
        return draw(rows, study, Path(out))
    except (KeyError, ValueError, TypeError, IndexError) as exc:  # records lacking what the figure reads
        plt.close("all")
        warnings.warn(f"{draw.__name__} ({study}): could not draw: {type(exc).__name__}: {exc}", stacklevel=2)
        return _empty(rows, study, Path(out), draw.__name__, f"could not draw ({type(exc).__name__}: {exc})")

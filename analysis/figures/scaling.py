"""How throughput scales with num_workers: diminishing returns and the oversubscription zone."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from analysis.figures.style import provenance, save

WORKLOAD_ORDER = ["sleep", "cpu", "jpeg"]


def _curves(summary: pd.DataFrame) -> pd.DataFrame:
    return summary.sort_values(["workload", "cores", "num_workers"])


def throughput_vs_workers(summary: pd.DataFrame, tidy: pd.DataFrame, study: str, folder: Path) -> list[Path]:
    """Median samples/s vs num_workers, one panel per workload, one line per core count; 95% intervals as
    bars; dashed: ideal linear scaling from the one-worker rate; dotted vertical: the core count."""
    s = _curves(summary)
    workloads = [w for w in WORKLOAD_ORDER if w in set(s["workload"])] + sorted(set(s["workload"]) - set(WORKLOAD_ORDER))
    cores_values = sorted(s["cores"].unique())
    palette = dict(zip(cores_values, sns.color_palette("colorblind", len(cores_values))))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.2 * len(workloads), 3.6), squeeze=False)
    for ax, workload in zip(axes[0], workloads):
        sub = s[s["workload"] == workload]
        top = 0.0
        for cores in cores_values:
            cur = sub[sub["cores"] == cores]
            if cur.empty:
                continue
            color = palette[cores]
            yerr = np.vstack([cur["median"] - cur["ci_low"], cur["ci_high"] - cur["median"]])
            yerr = np.where(np.isfinite(yerr), np.clip(yerr, 0, None), 0)
            ax.errorbar(cur["num_workers"], cur["median"], yerr=yerr, color=color, marker="o", ms=4, capsize=2,
                        lw=1.5, label=f"{cores} core{'s' if cores > 1 else ''}")
            unstable = cur[cur["unstable"].fillna(False).astype(bool)]
            ax.scatter(unstable["num_workers"], unstable["median"], s=70, facecolors="none", edgecolors="red",
                       linewidths=1, zorder=5, label="_nolegend_")
            one = cur[cur["num_workers"] == 1]["median"]
            if not one.empty:
                n = np.array(sorted(cur["num_workers"].unique()))
                n = n[n >= 1]
                ax.plot(n, one.iloc[0] * n, ls="--", lw=0.8, color=color, alpha=0.6)
            ax.axvline(cores, ls=":", lw=1, color=color, alpha=0.8)
            top = max(top, float(np.nanmax(cur["ci_high"].fillna(cur["median"]))))
        ax.set_ylim(0, top * 1.15 if top > 0 else None)
        ax.set_title(f"{workload}")
        ax.set_xlabel("num_workers (DataLoader worker processes)")
        ax.set_ylabel("throughput (samples/s, median)")
        sns.despine(ax=ax)
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles += [plt.Line2D([], [], ls="--", color="0.4"), plt.Line2D([], [], ls=":", color="0.4"),
                plt.Line2D([], [], marker="o", ls="", mfc="none", mec="red")]
    labels += ["ideal linear from 1 worker", "num_workers = cores", "unstable (IQR > 10% of median)"]
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 6), frameon=False,
               bbox_to_anchor=(0.5, 1.08))
    fig.suptitle(f"Throughput vs num_workers ({study})", y=1.13, fontsize=12)
    fig.tight_layout()
    return save(fig, folder, "throughput_vs_workers", provenance(tidy, study))


def oversubscription(summary: pd.DataFrame, tidy: pd.DataFrame, study: str, folder: Path) -> list[Path]:
    """Speed-up over num_workers = 0 and involuntary context switches vs the workers/cores ratio."""
    s = _curves(summary).copy()
    base = s[s["num_workers"] == 0].set_index(["workload", "cores"])["median"]
    s = s[s["num_workers"] >= 1].copy()
    s["ratio"] = s["num_workers"] / s["cores"]
    s["speedup"] = [m / base.get((w, c), np.nan) for m, w, c in zip(s["median"], s["workload"], s["cores"])]
    ok = tidy[(tidy["status"] == "ok") & (tidy["num_workers"] >= 1)].copy()
    ok["ratio"] = ok["num_workers"] / ok["cores"]
    ok["ctx_per_ksample"] = ok["ctx_involuntary"] / (ok["end_to_end_samples_per_s"] * ok["total_s"]) * 1000
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    s["cores"] = s["cores"].astype(str) + " cores"
    ok["cores"] = ok["cores"].astype(str) + " cores"
    sns.lineplot(data=s, x="ratio", y="speedup", hue="workload", style="cores", markers=True, dashes=True, ax=ax1)
    ax1.axvline(1, color="0.3", ls=":", lw=1)
    ax1.axhline(1, color="0.7", lw=0.8)
    ax1.text(1.03, 0.02, "workers = cores", transform=ax1.get_xaxis_transform(), fontsize=8, color="0.3")
    ax1.axvspan(1, max(s["ratio"].max(), 1.01), color="0.93", zorder=-1)
    ax1.set_xlabel("num_workers / cores")
    ax1.set_ylabel("speed-up over num_workers = 0 (median)")
    ax1.set_title("Oversubscription: workers past the cores")
    sns.lineplot(data=ok, x="ratio", y="ctx_per_ksample", hue="workload", style="cores", markers=True,
                 errorbar=("pi", 50), ax=ax2, legend=False)
    ax2.axvline(1, color="0.3", ls=":", lw=1)
    ax2.set_xlabel("num_workers / cores")
    ax2.set_ylabel("involuntary context switches per 1000 samples")
    ax2.set_title("Time-slicing cost")
    sns.move_legend(ax1, "upper left", bbox_to_anchor=(0, -0.2), ncol=6, frameon=False)
    sns.despine(fig)
    fig.tight_layout()
    return save(fig, folder, "oversubscription", provenance(tidy, study))

"""Does the accelerator starve? Accelerator utilization vs num_workers, per core count, with the 90% line."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from loaderbench.analysis.figures.style import mark_n, provenance, repetitions_text, save, usual_n
from loaderbench.analysis.table.records import ok_rows

KEEPS_UP = 0.9  # MLPerf Storage: a configuration keeps the accelerator fed at AU >= 90%


VARIANTS = ("pin_memory", "prefetcher")  # the line style when a study varies them


def smallest_feeding_config(ok: pd.DataFrame) -> pd.DataFrame:
    """Per model (and pin_memory, prefetcher): the smallest cores x num_workers whose median AU reaches 90%."""
    keys = [k for k in ("model", *VARIANTS) if k in ok]
    med = ok.groupby(keys + ["cores", "num_workers"], dropna=False)["accelerator_busy_fraction"].median().reset_index()
    rows = []
    for key, grp in med.groupby(keys, dropna=False):
        fed = grp[grp["accelerator_busy_fraction"] >= KEEPS_UP].sort_values(["cores", "num_workers"])
        first = fed.iloc[0] if not fed.empty else None
        rows.append(
            {
                **dict(zip(keys, key if isinstance(key, tuple) else (key,))),
                "cores": None if first is None else int(first["cores"]),
                "num_workers": None if first is None else int(first["num_workers"]),
                "au": None if first is None else float(first["accelerator_busy_fraction"]),
                "best_au": float(grp["accelerator_busy_fraction"].max()),
            }
        )
    return pd.DataFrame(rows)


def accelerator_utilization_vs_workers(df: pd.DataFrame, study: str, folder: Path) -> list[Path]:
    """AU vs num_workers, one panel per model, one line per core count (style: pin_memory and the prefetcher, where
    the study varies them): the median of the repetitions, the band their middle half; every panel has the same
    axes."""
    ok = ok_rows(df)
    ok = ok[ok["accelerator_busy_fraction"].notna()].copy()
    if ok.empty:
        return []
    simulated = ok["consumer"].astype(str).str.startswith("simulated").any()
    ok["cores_label"] = ok["cores"].astype(int).map(lambda c: f"{c} core" + ("s" if c > 1 else ""))
    order = [f"{c} core" + ("s" if c > 1 else "") for c in sorted(ok["cores"].astype(int).unique())]
    models = sorted(ok["model"].dropna().unique()) if "model" in ok else [None]
    varied = [k for k in VARIANTS if k in ok and ok[k].astype(str).nunique() > 1]
    style = "variant" if varied else None
    if varied:
        ok["variant"] = ok[varied].astype(str).apply(lambda r: ", ".join(f"{k}={v}" for k, v in r.items()), axis=1)
    styles = sorted(ok["variant"].unique()) if style else None  # the same line style for a variant in every panel
    fig, axes = plt.subplots(
        1, len(models), figsize=(max(7.0, 4.6 * len(models)), 3.6), squeeze=False, sharey=True, sharex=True
    )
    keys = ["cores", "num_workers"] + ([style] if style else [])
    counts = []
    for ax, model in zip(axes[0], models):
        sub = ok if model is None else ok[ok["model"] == model]
        sns.lineplot(
            data=sub,
            x="num_workers",
            y="accelerator_busy_fraction",
            hue="cores_label",
            hue_order=order,
            style=style,
            style_order=styles,
            marker="o",
            estimator="median",
            errorbar=("pi", 50),
            ax=ax,
            legend=ax is axes[0][0],
        )
        per = sub.groupby(keys)["accelerator_busy_fraction"].agg(["median", "count"]).reset_index()
        counts.append((ax, per))
        ax.axhline(KEEPS_UP, color="red", ls="--", lw=1)
        ax.text(
            0.01, KEEPS_UP + 0.015, "keeps up: AU >= 90%", color="red", fontsize=8, transform=ax.get_yaxis_transform()
        )
        ax.set_ylim(0, 1.05)
        ax.set_title(model or "")
        ax.set_xlabel("num_workers")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("accelerator busy fraction (AU)")
    legend = axes[0][0].get_legend()
    if legend is not None:  # one legend for the figure, under the panels
        handles, labels = axes[0][0].get_legend_handles_labels()
        legend.remove()
        keep = [(h, lab) for h, lab in zip(handles, labels) if lab not in ("cores_label", "variant")]
        fig.legend(*zip(*keep), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(keep), frameon=False)
    sns.despine(fig)
    usual = usual_n([n for _, per in counts for n in per["count"]])
    for ax, per in counts:
        mark_n(ax, per["num_workers"], per["median"], per["count"], usual)
    kind = "SIMULATED step: no GPU here" if simulated else "GPU step timed with CUDA events"
    fig.suptitle(f"Does the accelerator starve? ({study}; {kind})", y=1.02)
    fig.tight_layout()
    note = (
        f"lines: median of {repetitions_text([n for _, per in counts for n in per['count']])}; band: the "
        "middle half of the repetitions (25th to 75th percentile), their spread, not a confidence interval"
    )
    return save(fig, folder, "accelerator_utilization", f"{note}\n{provenance(df, study)}")

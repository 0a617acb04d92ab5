"""The gpu-feed question's figure: samples/s against num_workers per model, pinned and not, on the most cores
measured (claims: loaderbench.analysis.questions.gpu_feed; the accelerator busy fraction has its own figure,
loaderbench.analysis.figures.accelerator_busy)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, Bars
from loaderbench.analysis.figures.questions.shared import drawable
from loaderbench.analysis.table.records import col, is_true

HUE_ORDER = ["pin_memory=False", "pin_memory=True"]


def pin_memory_by_workers(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    """Samples/s against num_workers per model, pinned and not, on the most cores measured."""
    ok = drawable(df)
    ok = ok[ok["cores"] == ok["cores"].max()].copy()
    ok["model"] = col(ok, "model", "none").astype(str)
    ok["pinning"] = ["pin_memory=True" if is_true(v) else "pin_memory=False" for v in col(ok, "pin_memory", False)]
    hues = [h for h in HUE_ORDER if h in set(ok["pinning"])]
    models = sorted(ok["model"].unique())
    order = sorted(ok["num_workers"].astype(int).unique())
    ok["num_workers"] = ok["num_workers"].astype(int)
    pal = sns.color_palette("colorblind", 2)[-len(hues) :] if len(hues) == 1 else sns.color_palette("colorblind", 2)
    step = ", ".join(sorted(set(col(ok, "consumer").dropna().astype(str)))) or "?"
    return Bars(
        x="num_workers",
        order=order,
        y=[("samples_per_s", "throughput (samples/s)", False, "")],
        hue="pinning",
        hues=hues,
        palette=pal,
        xlabel="num_workers",
        split="model",
        splits=models,
        size=(max(6.5, 5.2 * len(models)), 3.8),
        says=Answer(
            "gpu-feed",
            f"Feeding the accelerator: workers and pin_memory ({study}; step on {step}, "
            f"{int(ok['cores'].iloc[0])} cores)",
            "pin_memory_by_workers",
            "Bars: median over repetitions; dots: repetitions. Cells on the most cores the study measured.",
            per="bar",
        ),
    ).answer(ok, df, study, out)

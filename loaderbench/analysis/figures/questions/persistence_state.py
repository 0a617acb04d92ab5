"""The persistence question's figure for the persistence-state study: what the workers hold with a second loader
beside the first, and the samples that saw a dataset attribute from before the main process changed it
(claims: loaderbench.analysis.questions.persistence)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns

from loaderbench.analysis.figures.kinds import Answer, Bars
from loaderbench.analysis.figures.questions.shared import drawable
from loaderbench.analysis.questions.persistence import workers_held_mib
from loaderbench.analysis.table.records import col, is_true

HUE_ORDER = ["one loader", "with a second loader"]
X_ORDER = ["persistent", "restarted each epoch"]


def is_state_study(rows: pd.DataFrame) -> bool:
    return bool(
        col(rows, "second_loader", False).map(is_true).any() or col(rows, "epoch_attribute", False).map(is_true).any()
    )


def persistent_state(df: pd.DataFrame, study: str, out: Path) -> list[Path]:
    ok = drawable(df, with_workers=True)
    ok["workers"] = np.where(ok["persistent_workers"].map(is_true), X_ORDER[0], X_ORDER[1])
    ok["loaders"] = np.where(col(ok, "second_loader", False).map(is_true), HUE_ORDER[1], HUE_ORDER[0])
    ok["held_mib"] = [workers_held_mib(t) for t in col(ok, "memory_timeline")]
    samples = pd.to_numeric(col(ok, "epoch_attr_samples"), errors="coerce")
    ok["stale_pct"] = 100 * pd.to_numeric(col(ok, "epoch_attr_stale"), errors="coerce") / samples
    pal = sns.color_palette("colorblind", 2)
    return Bars(
        x="workers",
        order=X_ORDER,
        y=[
            ("held_mib", "workers' USS held over the run (MiB)", False, "memory the workers hold"),
            ("stale_pct", "samples that saw the old value (%)", False, "an attribute changed between epochs"),
        ],
        hue="loaders",
        hues=HUE_ORDER,
        palette=pal,
        xlabel="workers",
        says=Answer(
            "persistence",
            f"What persistent workers hold and see ({study})",
            "persistent_state",
            "Bars: median over repetitions; dots: repetitions. Held: the median of the workers' USS over the probe's "
            "samples with a worker alive. Old value: samples after the first epoch whose worker's copy of the dataset "
            "carried an epoch count older than the main process's.",
            per="bar",
        ),
    ).answer(ok, df, study, out)

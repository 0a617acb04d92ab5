"""The look shared by every figure: seaborn's paper theme, a provenance footer, PNG + PDF output."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402


def apply_theme() -> None:
    sns.set_theme(context="paper", style="ticks", palette="colorblind", font_scale=1.1)


def provenance(df: pd.DataFrame, study: str) -> str:
    """Which study, machine and versions the data came from (most common values; mixed ones are named)."""
    def one(col: str) -> str:
        if col not in df or df[col].dropna().empty:
            return "?"
        vals = df[col].dropna().astype(str).unique()
        return vals[0] if len(vals) == 1 else f"{len(vals)} different"
    simd = " (SIMD)" if "env_pillow_simd" in df and df["env_pillow_simd"].fillna(False).astype(bool).all() else ""
    return (f"study {study} · {one('env_cpu_model')}, {one('env_logical_cpus')} logical CPUs, host {one('env_host')} · "
            f"python {one('env_python')}, torch {one('env_torch')}, torchvision {one('env_torchvision')}, "
            f"Pillow {one('env_pillow')}{simd} · commit {one('env_git_commit')[:12]}")


def save(fig: plt.Figure, folder: Path, name: str, footer: str) -> list[Path]:
    fig.text(0.005, 0.003, footer, fontsize=6.5, color="0.4", ha="left", va="bottom")
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        path = folder / f"{name}.{ext}"
        fig.savefig(path, dpi=150, bbox_inches="tight")
        paths.append(path)
    plt.close(fig)
    return paths

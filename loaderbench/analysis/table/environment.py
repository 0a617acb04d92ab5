"""What machine and software the records were measured with, from the `env_*` columns of the tidy table.

Pure functions; no I/O. A value that differs between records is never hidden: it is listed with
how many records carry each value.
"""

from __future__ import annotations

import pandas as pd

from loaderbench.analysis.text import fmt_bytes

#: (column, label, how to format) in the order a reader wants them.
FIELDS = [
    ("env_host", "host", None),
    ("env_cpu_model", "CPU", None),
    ("env_logical_cpus", "logical CPUs", "int"),
    ("env_physical_cores", "physical cores", "int"),
    ("env_cpus_allowed_n", "CPUs allowed to the cell (affinity)", "int"),
    ("env_mem_total", "memory", "bytes"),
    ("env_shm_size", "/dev/shm", "bytes"),
    ("env_ulimit_nofile", "open files limit (ulimit -n)", "int"),
    ("env_kernel", "kernel", None),
    ("env_os", "OS", None),
    ("env_python", "Python", None),
    ("env_torch", "torch", None),
    ("env_torchvision", "torchvision", None),
    ("env_numpy", "numpy", None),
    ("env_pillow", "Pillow", None),
    ("env_pillow_simd", "Pillow-SIMD", None),
    ("env_libjpeg_turbo", "libjpeg-turbo", None),
    ("env_libjpeg_turbo_version", "libjpeg-turbo version", None),
    ("env_torch_threads", "torch threads in the cell", "int"),
    ("env_cuda_available", "CUDA available", None),
    ("env_cuda_device", "GPU", None),
    ("env_cuda_runtime", "CUDA runtime", None),
    ("env_cudnn", "cuDNN", "int"),
    ("env_container_runtime", "container runtime", None),
    ("env_container_image", "container image", None),
    ("env_container_digest", "container digest", None),
    ("env_lock_sha256", "lock file sha256", None),
    ("env_git_commit", "loaderbench git commit", None),
    ("env_loaderbench", "loaderbench version", None),
    ("launcher", "launcher", None),
    ("env_slurm_job_id", "Slurm job id", None),
    ("env_slurm_partition", "Slurm partition", None),
    ("env_slurm_node", "Slurm node", None),
]


def _fmt(v, how: str | None) -> str:
    if how == "bytes":
        return fmt_bytes(v)
    if how == "int":
        try:
            return str(int(float(v)))
        except (TypeError, ValueError):
            return str(v)
    return str(v)


def environment_table(df: pd.DataFrame, max_values: int = 6) -> pd.DataFrame:
    """Rows `what, value`: one per field with any value; mixed values as "a (n records); b (m records)"."""
    out = []
    for col, label, how in FIELDS:
        if col not in df:
            continue
        s = df[col].dropna()
        text = s.astype(str)  # once: the values as text, to drop the empty ones and to count them by
        kept = (text != "").to_numpy()
        s, text = s[kept], text[kept]
        if s.empty:
            continue
        counts = text.value_counts()
        if len(counts) == 1:
            value = _fmt(s.iloc[0], how)
        else:
            firsts = s.groupby(text).first()
            parts = [f"{_fmt(firsts[k], how)} ({n} records)" for k, n in counts.head(max_values).items()]
            if len(counts) > max_values:
                parts.append(f"and {len(counts) - max_values} more values")
            value = "; ".join(parts)
        out.append({"what": label, "value": value})
    return pd.DataFrame(out, columns=["what", "value"])


def env_one(rows: pd.DataFrame, name: str) -> str:
    """The value of the env field `name` (column env_<name>) in these rows: "?" when none carries it, the values
    joined by "/" when they differ (claims' evidence and figure titles name versions this way)."""
    c = f"env_{name}"
    if c not in rows or rows[c].dropna().empty:
        return "?"
    vals = rows[c].dropna().astype(str).unique()
    return vals[0] if len(vals) == 1 else "/".join(sorted(vals))


def provenance(df: pd.DataFrame, study: str) -> str:
    """Which study, machine and versions the data came from (one line for a figure's footer)."""

    def one(col: str) -> str:
        if col not in df or df[col].dropna().empty:
            return "?"
        vals = df[col].dropna().astype(str).unique()
        return vals[0] if len(vals) == 1 else f"{len(vals)} different"

    simd = " (SIMD)" if "env_pillow_simd" in df and df["env_pillow_simd"].fillna(False).astype(bool).all() else ""
    gpu = f", {one('env_cuda_device')}" if "env_cuda_device" in df and df["env_cuda_device"].notna().any() else ""
    return (
        f"study {study} · {one('env_cpu_model')}, {one('env_logical_cpus')} logical CPUs{gpu}, "
        f"host {one('env_host')} · python {one('env_python')}, torch {one('env_torch')}, "
        f"torchvision {one('env_torchvision')}, Pillow {one('env_pillow')}{simd} · "
        f"commit {one('env_git_commit')[:12]}"
    )

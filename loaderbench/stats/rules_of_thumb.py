"""The worker counts popular advice would pick (rules of thumb), and reading a measured curve at such a count.

Pure functions; the analysis scores the rules against measured curves (loaderbench.analysis.report.recommend) and tune
states them beside its answer (loaderbench.tune.tune_json).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["NEEDS_GPU", "NO_GPU", "RULE_LABELS", "lookup", "rules_of_thumb"]

#: Rule id -> human label; the order is the order of :func:`evaluate_rules` rows.
RULE_LABELS: dict[str, str] = {
    "cores": "workers = cores",
    "cores_minus_1": "workers = cores - 1",
    "2x_cores": "workers = 2 x cores (I/O-bound advice)",
    "4_per_gpu": "4 workers per GPU",
    "lightning": "Lightning: cpus // local_world_size - 1",
}
#: Rules whose num_workers counts GPUs: not applicable where the records say there was none.
NEEDS_GPU = frozenset({"4_per_gpu"})
#: How a rule that does not apply reads, in the report and the figure alike.
NO_GPU = "n/a: no GPU"


def rules_of_thumb(cores: int, gpus: int = 1, local_world_size: int = 1) -> dict[str, int]:
    """``num_workers`` picked by common rules of thumb, keyed as :data:`RULE_LABELS`.

    ``cores`` is the number of CPUs the training process may use (its
    affinity mask / cgroup quota, i.e. the ``cores`` config column).

    * ``cores``: ``cores``
    * ``cores_minus_1``: ``max(cores - 1, 0)``
    * ``2x_cores``: ``2 * cores`` (advice for I/O-bound loading)
    * ``4_per_gpu``: ``4 * gpus``
    * ``lightning``: ``max(1, cores // local_world_size - 1)``. This is
      ``lightning.fabric.utilities.data.suggested_max_num_workers`` (Lightning
      2.x), which PyTorch Lightning's data connector quotes in its "does not
      have many workers" warning; it counts CPUs with
      ``os.sched_getaffinity(0)`` and takes ``local_world_size`` = the number
      of devices on the node. Note the floor is 1, not 0.
    """
    cores, gpus, lws = int(cores), int(gpus), int(local_world_size)
    if cores < 1:
        raise ValueError("rules_of_thumb: cores must be >= 1")
    if gpus < 0:
        raise ValueError("rules_of_thumb: gpus must be >= 0")
    if lws < 1:
        raise ValueError("rules_of_thumb: local_world_size must be >= 1")
    return {
        "cores": cores,
        "cores_minus_1": max(cores - 1, 0),
        "2x_cores": 2 * cores,
        "4_per_gpu": 4 * gpus,
        "lightning": max(1, cores // lws - 1),
    }


def lookup(
    ns: Sequence[float], values: Sequence[float], n: float, between: str = "interpolate"
) -> tuple[float, str, float, float]:
    """Value at ``n`` of the curve measured at the points ``ns`` (each with its value in ``values``).

    Returns ``(value, match, n_lo, n_hi)`` where ``match`` is

    * ``"exact"``: ``n`` was measured (``n_lo == n_hi == n``);
    * ``"interpolated"``: ``n`` lies between two measured N and
      ``between == "interpolate"``: linear interpolation between the
      neighbours ``n_lo < n < n_hi``;
    * ``"nearest"``: ``n`` lies outside the measured range (never
      extrapolated), or ``between == "nearest"``: the value at the nearest
      measured N (the smaller one on a tie), ``n_lo == n_hi`` = that N.
    """
    if between not in ("interpolate", "nearest"):
        raise ValueError("lookup: between must be 'interpolate' or 'nearest'")
    xs = np.asarray(ns, dtype=float)
    ys = np.asarray(values, dtype=float)
    keep = np.isfinite(ys)
    order = np.argsort(xs[keep], kind="stable")
    at, vs = xs[keep][order], ys[keep][order]
    if not at.size:
        return float("nan"), "none", float("nan"), float("nan")
    hit = np.flatnonzero(at == n)
    if hit.size:
        return float(vs[hit[0]]), "exact", float(n), float(n)
    if between == "interpolate" and at[0] < n < at[-1]:
        j = int(np.searchsorted(at, n))
        lo, hi = at[j - 1], at[j]
        v = float(np.interp(n, [lo, hi], [vs[j - 1], vs[j]]))
        return v, "interpolated", float(lo), float(hi)
    i = int(np.argmin(np.abs(at - n)))  # argmin returns the first = smaller N on ties
    return float(vs[i]), "nearest", float(at[i]), float(at[i])

"""Gunther's Universal Scalability Law (USL) fits of throughput vs. workers.

    X(N) = lam * N / (1 + sigma * (N - 1) + kappa * N * (N - 1))

``lam`` is the throughput of one worker, ``sigma`` the contention
(serial fraction, Amdahl) and ``kappa`` the coherency (crosstalk) cost. With
``kappa > 0`` throughput peaks at ``N* = sqrt((1 - sigma) / kappa)`` and then
falls (retrograde scaling); with ``kappa == 0`` it rises monotonically towards
``lam / sigma``.

Mapping DataLoader runs to N
----------------------------
N is the number of DataLoader worker processes, ``num_workers >= 1``.
``num_workers == 0`` means loading in the main process, with no worker
processes at all; it is a different mechanism, not "zero workers" on the same
curve, so it is NOT a USL point. Callers drop those rows (as
:func:`fit_usl_groups` does) and :func:`fit_usl` rejects ``N < 1`` with
``ValueError``.

Fit
---
Bounded nonlinear least squares (:func:`scipy.optimize.least_squares`,
``trf``) with ``lam > 0``, ``0 <= sigma <= 1``, ``kappa >= 0``, on *relative*
residuals ``(X(N) - x) / x`` (benchmark noise is multiplicative, and relative
residuals keep the small-N points, which pin down ``lam``, from being
swamped by the large ones). Every repetition is a point (no medians), so the
residual spread includes run-to-run noise. The start is ``lam0`` = mean
throughput at the smallest N divided by that N, and ``sigma0``/``kappa0``
from Gunther's linearisation ``(N / C(N) - 1) / (N - 1) = sigma + kappa * N``
(``C = X / lam0``), clipped into the bounds. Parameters whose whole effect
over the measured N range is below 1e-6 relative (``sigma * (N_max - 1)`` or
``kappa * N_max * (N_max - 1)`` < 1e-6, far below any timing noise) are
snapped to 0, because ``trf`` keeps its iterates strictly inside the bounds;
so an exactly linear curve gives ``sigma == kappa == 0`` and
``peak_n == inf``.

Quality rule (``good``)
-----------------------
A fit is ``good`` iff all of:

1. at least ``MIN_DISTINCT_N = 4`` distinct N values (3 parameters + 1);
2. the optimiser converged;
3. ``r2 >= MIN_R2 = 0.9``, with ``r2 = 1 - SS_res / SS_tot`` computed on the
   raw throughput of all points (repetitions included).

Otherwise ``good`` is False and ``reason`` says which rule failed (``reason``
is ``""`` for a good fit). ``rmse_rel`` = RMS of the raw residuals divided by
the mean throughput; it is reported, not used in the rule. A flat curve (no
scaling at all) is fitted fine (``sigma`` near 1) but has nothing for r2 to
explain, so it is flagged; read ``sigma`` there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from loaderbench.analysis.table.records import keep_dtypes, ok_mask

__all__ = [
    "MIN_DISTINCT_N",
    "MIN_R2",
    "UslFit",
    "fit_usl",
    "fit_usl_groups",
    "usl",
    "usl_curve",
]

MIN_DISTINCT_N = 4
MIN_R2 = 0.9
_SNAP = 1e-6


def usl(n, lam: float, sigma: float, kappa: float) -> np.ndarray:
    """The USL throughput at ``n`` workers (array-like, N >= 1)."""
    n = np.asarray(n, dtype=float)
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


@dataclass(frozen=True)
class UslFit:
    """Result of :func:`fit_usl`.

    ``peak_n`` = sqrt((1 - sigma) / kappa) if kappa > 0 else inf (not rounded,
    may lie outside the measured range, and below 1 when the curve is
    retrograde from the start); ``peak_x`` = X(max(peak_n, 1)), the best
    fitted throughput for N >= 1, or the asymptote ``lam / sigma`` when
    kappa == 0 (inf if sigma == 0 too).
    """

    lam: float
    sigma: float
    kappa: float
    r2: float
    rmse_rel: float
    n_points: int
    n_distinct: int
    n_min: float
    n_max: float
    peak_n: float
    peak_x: float
    converged: bool
    good: bool
    reason: str

    def predict(self, n) -> np.ndarray:
        return usl(n, self.lam, self.sigma, self.kappa)

    def as_dict(self) -> dict:
        return asdict(self)


def _validate(n, x) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(n, dtype=float).ravel()
    x = np.asarray(x, dtype=float).ravel()
    if n.shape != x.shape:
        raise ValueError(f"fit_usl: n and x differ in length ({n.size} vs {x.size})")
    if n.size == 0:
        raise ValueError("fit_usl: no points")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(x))):
        raise ValueError("fit_usl: n and x must be finite (drop failed runs first)")
    if np.any(n < 1):
        raise ValueError(
            "fit_usl: N must be >= 1; num_workers=0 (main-process loading) is not a "
            "USL point, drop those rows before fitting"
        )
    if np.any(x <= 0):
        raise ValueError("fit_usl: throughput must be > 0")
    return n, x


def _peak(lam: float, sigma: float, kappa: float) -> tuple[float, float]:
    if kappa > 0:
        pn = math.sqrt(max(1.0 - sigma, 0.0) / kappa)
        return pn, float(usl(max(pn, 1.0), lam, sigma, kappa))
    return math.inf, (lam / sigma if sigma > 0 else math.inf)


def _start(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    n0 = n.min()
    lam0 = float(x[n == n0].mean() / n0)
    mask = n > 1
    sigma0, kappa0 = 0.01, 1e-4
    if np.unique(n[mask]).size >= 2:
        c = x[mask] / lam0
        y = (n[mask] / c - 1.0) / (n[mask] - 1.0)
        A = np.column_stack([np.ones(mask.sum()), n[mask]])
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        sigma0, kappa0 = float(coef[0]), float(coef[1])
    sigma0 = float(np.clip(sigma0, 1e-6, 1 - 1e-6))
    kappa0 = float(max(kappa0, 1e-8))
    return np.array([max(lam0, 1e-12), sigma0, kappa0])


def _fit_parameters(n: np.ndarray, x: np.ndarray):
    """(lam, sigma, kappa, the optimizer's result): bounded least squares on relative residuals from Gunther's
    linearised start; a parameter whose effect over the measured N is below _SNAP is set to its bound."""
    p0 = _start(n, x)
    scale = np.array([p0[0], 1.0, 1.0])

    def resid(q):
        p = q * scale
        return usl(n, *p) / x - 1.0

    nm1 = n - 1.0

    def jac(q):  # analytic: a third of the function evaluations of finite differences
        lam, sigma, kappa = q * scale
        d = 1.0 + sigma * nm1 + kappa * n * nm1
        g = lam * n / d**2
        return np.column_stack([n / d * scale[0], -g * nm1 * scale[1], -g * n * nm1 * scale[2]]) / x[:, None]

    lower = np.array([1e-12, 0.0, 0.0]) / scale
    upper = np.array([np.inf, 1.0, np.inf])
    res = least_squares(
        resid,
        p0 / scale,
        jac=jac,
        bounds=(lower, upper),
        method="trf",
        x_scale="jac",
        xtol=1e-12,
        ftol=1e-12,
        gtol=1e-12,
        max_nfev=2000,
    )
    lam, sigma, kappa = (float(v) for v in res.x * scale)
    nmax = float(n.max())
    if sigma * (nmax - 1.0) < _SNAP:
        sigma = 0.0
    if kappa * nmax * (nmax - 1.0) < _SNAP:
        kappa = 0.0
    if 1.0 - sigma < _SNAP:
        sigma = 1.0
    return lam, sigma, kappa, res


def fit_usl(n, x) -> UslFit:
    """Fit the USL to throughputs ``x`` measured at worker counts ``n``.

    ``n`` and ``x`` are equal-length arrays, one entry per repetition (repeat N
    for repetitions). See the module docstring for the N mapping, the fit and
    the quality rule. Raises ``ValueError`` on N < 1, non-finite values,
    non-positive throughput, empty or mismatched input.
    """
    n, x = _validate(n, x)
    distinct = np.unique(n)
    nd = int(distinct.size)
    base = dict(n_points=int(n.size), n_distinct=nd, n_min=float(n.min()), n_max=float(n.max()))
    nan = float("nan")
    if nd < 2:
        lam = float(x.mean() / n[0])
        return UslFit(
            lam=lam,
            sigma=nan,
            kappa=nan,
            r2=nan,
            rmse_rel=nan,
            peak_n=nan,
            peak_x=nan,
            converged=False,
            good=False,
            reason=f"only {nd} distinct N (need >= {MIN_DISTINCT_N})",
            **base,
        )

    lam, sigma, kappa, res = _fit_parameters(n, x)
    pred = usl(n, lam, sigma, kappa)
    ss_res = float(np.sum((x - pred) ** 2))
    ss_tot = float(np.sum((x - x.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else nan
    rmse_rel = math.sqrt(ss_res / n.size) / float(x.mean())
    peak_n, peak_x = _peak(lam, sigma, kappa)
    converged = bool(res.success)

    reasons = []
    if nd < MIN_DISTINCT_N:
        reasons.append(f"only {nd} distinct N (need >= {MIN_DISTINCT_N})")
    if not converged:
        reasons.append(f"fit did not converge: {res.message}")
    if not (np.isfinite(r2) and r2 >= MIN_R2):
        reasons.append(f"r2 = {r2:.3g} < {MIN_R2}")
    return UslFit(
        lam=lam,
        sigma=sigma,
        kappa=kappa,
        r2=r2,
        rmse_rel=rmse_rel,
        peak_n=peak_n,
        peak_x=peak_x,
        converged=converged,
        good=not reasons,
        reason="; ".join(reasons),
        **base,
    )


def usl_curve(fit: UslFit, n_grid) -> np.ndarray:
    """Fitted throughput on ``n_grid`` (NaN everywhere if the fit has no parameters)."""
    return usl(n_grid, fit.lam, fit.sigma, fit.kappa)


_FIT_COLS = [f for f in UslFit.__dataclass_fields__]


def fit_usl_groups(
    df: pd.DataFrame,
    by: Sequence[str] = ("workload", "cores"),
    n_col: str = "num_workers",
    x_col: str = "samples_per_s",
) -> pd.DataFrame:
    """One USL fit per group of ``by``, on every ok repetition with N >= 1.

    Rows used: ok (loaderbench.analysis.table.records.ok_mask: every row of a table without a status column), finite
    ``x_col > 0`` and ``n_col >= 1`` (``num_workers == 0`` rows are excluded
    by design, see module doc). Every group present in ``df`` gets a row;
    groups with no usable point have NaN parameters, ``good = False`` and a
    ``reason``.

    Columns: ``*by, lam, sigma, kappa, r2, rmse_rel, n_points, n_distinct,
    n_min, n_max, peak_n, peak_x, converged, good, reason``.
    """
    by = list(by)
    missing = [c for c in [*by, n_col, x_col] if c not in df.columns]
    if missing:
        raise KeyError(f"fit_usl_groups: columns not in table: {missing}")
    ok = pd.Series(ok_mask(df), index=df.index)
    n_all = pd.to_numeric(df[n_col], errors="coerce")
    x_all = pd.to_numeric(df[x_col], errors="coerce")
    usable = ok & (n_all >= 1) & np.isfinite(x_all) & (x_all > 0)

    rows = []
    for key, g in df.groupby(by, dropna=False, sort=True, observed=True):
        key = key if isinstance(key, tuple) else (key,)
        m = usable.loc[g.index]
        if m.any():
            fit = fit_usl(n_all.loc[g.index][m].to_numpy(), x_all.loc[g.index][m].to_numpy())
            rec = fit.as_dict()
        else:
            rec = {c: float("nan") for c in _FIT_COLS}
            rec.update(n_points=0, n_distinct=0, converged=False, good=False, reason=f"no ok rows with {n_col} >= 1")
        rows.append({**dict(zip(by, key)), **rec})
    return keep_dtypes(pd.DataFrame(rows, columns=[*by, *_FIT_COLS]), df, by)

"""Areas under ROC, PR, lift and gain curves from cumulative counts (spec section 4).

Every function takes the cumulative counts of one or many curves, ``tps`` and
``fps`` of shape ``(..., K)``, and reduces over the LAST axis:

* ``tps[..., k]`` / ``fps[..., k]`` is the number (or weight, or normalised
  mass) of actual positives / negatives scored at or above the k-th threshold,
  thresholds in decreasing order;
* counts are non-decreasing along the last axis, the origin ``(0, 0)`` is not
  included, and the last point holds every example: ``tps[..., -1] = P``,
  ``fps[..., -1] = N``.

Counts need not be integers. The same functions therefore serve

* raw curves (``CurveCounts.tps``, ``CurveCounts.fps``),
* curves at a reference prior pi0: ``tps = pi0 * TPR``, ``fps = (1 - pi0) * FPR``
  (calibrated AUC-PR is ``average_precision_from_counts`` of these), and
* batches of reference curves for the outperformance score, e.g. shape
  ``(20000, 257)`` with ``tps = pi * (1 - beta)``, ``fps = (1 - pi) * alpha``.

Repeated points (an empty histogram bin, a duplicated end point, the origin
itself) change no area and produce no nan. An area is ``nan`` (undefined) only
where its normalisation is zero: no positives for AUC-PR and the lift/gain
areas, no positives or no negatives for ROC-AUC and KS.

Each function returns a float64 array of shape ``(...)``: a 0-d array for a
single curve (``float()`` it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput

Array = npt.NDArray[np.float64]
AreaKernel = Callable[[Array, Array], Array]

__all__ = [
    "AREA_KERNELS",
    "average_precision_from_counts",
    "curve_areas",
    "gain_auc_from_counts",
    "gain_auc_ideal",
    "gini_from_counts",
    "ks_from_counts",
    "lift_auc_from_counts",
    "lift_auc_ideal",
    "nauc_lift_from_counts",
    "pr_auc_trapezoid_from_counts",
    "roc_auc_from_counts",
]


def check_cumulative_counts(tps: Any, fps: Any) -> tuple[Array, Array]:
    """Validate cumulative counts of shape (..., K): finite, >= 0, non-decreasing.

    Returns
    -------
    tps, fps : ndarray of float64, shape (..., K)
    """
    t = np.asarray(tps, dtype=np.float64)
    f = np.asarray(fps, dtype=np.float64)
    for name, a in (("tps", t), ("fps", f)):
        if a.ndim == 0 or a.shape[-1] == 0:
            raise InvalidInput(name, "must hold at least one point along the last axis")
        # first >= 0, last finite and no point below the one before (nan compares
        # false) <=> finite, non-negative and non-decreasing
        ok = (a[..., 0] >= 0.0).all() and np.isfinite(a[..., -1]).all()
        if not (ok and (a[..., 1:] >= a[..., :-1]).all()):
            raise InvalidInput(
                name, "must be finite, non-negative and non-decreasing along the last axis"
            )
    if t.shape != f.shape:
        raise InvalidInput("fps", f"has shape {f.shape} but tps has shape {t.shape}")
    return t, f


def _safe_div(num: Array, den: Array) -> Array:
    """num/den with nan where den == 0 (the area is undefined there)."""
    ok = den != 0.0
    return np.where(ok, num / np.where(ok, den, 1.0), np.nan)


def _prev(a: Array, first: float = 0.0) -> Array:
    """The value at the previous point along the last axis; ``first`` before point 0."""
    head = np.full((*a.shape[:-1], 1), first)
    return np.concatenate((head, a[..., :-1]), axis=-1)


def _precision(tps: Array, fps: Array, *, when_empty: float) -> Array:
    """tps/(tps+fps) at each point, ``when_empty`` where nothing is predicted positive."""
    ps = tps + fps
    ok = ps > 0.0
    return np.where(ok, tps / np.where(ok, ps, 1.0), when_empty)


def _average_precision(t: Array, f: Array) -> Array:
    steps = t - _prev(t)
    return _safe_div(np.sum(steps * _precision(t, f, when_empty=0.0), axis=-1), t[..., -1])


def _roc_auc(t: Array, f: Array) -> Array:
    twice = np.sum((f - _prev(f)) * (t + _prev(t)), axis=-1)
    return _safe_div(twice, 2.0 * t[..., -1] * f[..., -1])


def _pr_auc_trapezoid(t: Array, f: Array) -> Array:
    prec = _precision(t, f, when_empty=1.0)
    twice = np.sum((t - _prev(t)) * (prec + _prev(prec, 1.0)), axis=-1)
    return _safe_div(twice, 2.0 * t[..., -1])


def _gain_auc(t: Array, f: Array) -> Array:
    x, recall = _fraction_and_recall(t, f)
    area = np.sum((x - _prev(x)) * (recall + _prev(recall)), axis=-1) / 2.0
    return np.where(t[..., -1] > 0.0, area, np.nan)


def _fraction_and_recall(t: Array, f: Array) -> tuple[Array, Array]:
    """x = fraction predicted positive, y = recall at every point (nan rows if P = 0)."""
    total = (t[..., -1] + f[..., -1])[..., None]
    pos = t[..., -1:]
    x = (t + f) / np.where(total > 0.0, total, np.nan)
    recall = t / np.where(pos > 0.0, pos, np.nan)
    return x, recall


def _lift_auc(t: Array, f: Array) -> Array:
    with np.errstate(divide="ignore", invalid="ignore"):  # rows without positives: nan
        x = (t + f) / (t[..., -1:] + f[..., -1:])  # fraction predicted positive
        r = t / t[..., -1:]  # recall
    x0, r0 = x[..., :-1], r[..., :-1]
    dr = r[..., 1:] - r0
    inner = x0 > 0.0
    u = np.divide(x[..., 1:] - x0, x0, out=np.zeros_like(x0), where=inner)  # x1/x0 − 1
    log_ratio = np.log1p(u)
    log_ratio_over_u = np.divide(log_ratio, u, out=np.ones_like(u), where=u > 0.0)
    seg = r0 * log_ratio
    seg += dr * (1.0 - log_ratio_over_u)
    # segments leaving the origin (the first one, and any after repeated origins) have
    # a constant lift, so their area is their recall step
    from_origin = np.sum(np.where(inner, 0.0, dr), axis=-1) + r[..., 0]
    return np.where(t[..., -1] > 0.0, np.sum(seg, axis=-1) + from_origin, np.nan)


def _ks(t: Array, f: Array) -> Array:
    gap = _safe_div(t, t[..., -1:]) - _safe_div(f, f[..., -1:])
    ks: Array = np.maximum(np.max(gap, axis=-1), 0.0)
    return ks


def _gini(t: Array, f: Array) -> Array:
    return 2.0 * _roc_auc(t, f) - 1.0


def _nauc_lift(t: Array, f: Array, lift_auc: Array) -> Array:
    prior = _safe_div(t[..., -1], t[..., -1] + f[..., -1])
    return lift_auc / lift_auc_ideal(prior)


def average_precision_from_counts(tps: Any, fps: Any) -> Array:
    """Average precision: sum over points of (R_k − R_{k−1})·P_k, with R_0 = 0.

    The convention of scikit-learn's ``average_precision_score`` (no
    interpolation): each recall step is weighted by the precision reached at
    the end of the step. Points without a recall step contribute nothing, so
    empty bins and leading negatives never produce nan.

    Parameters
    ----------
    tps, fps : array_like of shape (..., K)
        Cumulative counts (see the module docstring).

    Returns
    -------
    ndarray of float64, shape (...)
        AP in [0, 1]; nan where ``tps[..., -1] == 0`` (no positives).

    Examples
    --------
    >>> float(average_precision_from_counts([1, 1, 2], [0, 1, 2]))
    0.75
    """
    return _average_precision(*check_cumulative_counts(tps, fps))


def roc_auc_from_counts(tps: Any, fps: Any) -> Array:
    """Area under the ROC curve (FPR, TPR), trapezoid rule from the origin.

    Equals the probability that a random positive outscores a random negative,
    ties counting one half (scikit-learn's ``roc_auc_score``).

    Returns
    -------
    ndarray of float64, shape (...)
        ROC-AUC in [0, 1]; nan where there are no positives or no negatives.

    Examples
    --------
    >>> float(roc_auc_from_counts([1, 1, 2], [0, 1, 2]))
    0.625
    """
    return _roc_auc(*check_cumulative_counts(tps, fps))


def pr_auc_trapezoid_from_counts(tps: Any, fps: Any) -> Array:
    """Trapezoidal area under the PR curve (recall, precision), from (0, 1).

    The curve starts at recall 0 with precision 1 (scikit-learn's end point of
    ``precision_recall_curve``), so the value equals
    ``sklearn.metrics.auc(recall, precision)``. It is optimistic compared with
    :func:`average_precision_from_counts`, the reported AUC-PR.

    Returns
    -------
    ndarray of float64, shape (...)
        Area in [0, 1]; nan where there are no positives.
    """
    return _pr_auc_trapezoid(*check_cumulative_counts(tps, fps))


def gain_auc_from_counts(tps: Any, fps: Any) -> Array:
    """Area under the cumulative gain curve: x = fraction predicted positive, y = recall.

    Trapezoid rule from the origin. A random ranking gives 1/2, a perfect one
    ``gain_auc_ideal(pi) = 1 − pi/2``.

    Returns
    -------
    ndarray of float64, shape (...)
        Area in [0, 1]; nan where there are no positives.
    """
    return _gain_auc(*check_cumulative_counts(tps, fps))


def lift_auc_from_counts(tps: Any, fps: Any) -> Array:
    """Area under the lift curve: x = fraction predicted positive, y = recall / x.

    The curve is the lift of the piecewise-linear gain curve through the points
    (the same linear interpolation between neighbouring (alpha, beta) points as
    the ROC curve), integrated exactly segment by segment: on a segment where
    recall R = R0 + s·(x − x0),

        ∫ R/x dx = R0·ln(x1/x0) + ΔR·(1 − ln(x1/x0)·x0/Δx)

    The first segment starts at the origin, where the lift is constant and equal
    to the first point's lift. A random ranking gives 1, a perfect one
    ``lift_auc_ideal(pi) = 1 − ln(pi)`` exactly, and the area from default-bin
    histograms stays within 1e-3 of the per-example value (docs/metrics.md).
    The outperformance-score paper sums the lift at the right end of each step
    instead; that rule depends on the curve's resolution (see docs/outperformance.md).

    Returns
    -------
    ndarray of float64, shape (...)
        Area in [0, 1 − ln(pi)]; nan where there are no positives.

    Examples
    --------
    >>> round(float(lift_auc_from_counts([1, 2], [0, 2])), 6)  # 0.5 from the origin + 0.962098
    1.462098
    """
    t, f = check_cumulative_counts(tps, fps)
    return _lift_auc(t, f)


def lift_auc_ideal(prior: Any) -> Array:
    """Lift-curve area of a perfect ranking at prevalence ``prior``: 1 − ln(pi).

    nan where ``prior`` is 0 (no positives: no lift curve).
    """
    p = np.asarray(prior, dtype=np.float64)
    return np.where(p > 0.0, 1.0 - np.log(np.where(p > 0.0, p, 1.0)), np.nan)


def gain_auc_ideal(prior: Any) -> Array:
    """Gain-curve area of a perfect ranking at prevalence ``prior``: 1 − pi/2."""
    return 1.0 - np.asarray(prior, dtype=np.float64) / 2.0


def nauc_lift_from_counts(tps: Any, fps: Any) -> Array:
    """Normalised lift area: ``lift_auc / lift_auc_ideal(pi)``, pi = P/(P+N), in [0, 1]."""
    t, f = check_cumulative_counts(tps, fps)
    return _nauc_lift(t, f, _lift_auc(t, f))


def ks_from_counts(tps: Any, fps: Any) -> Array:
    """Kolmogorov-Smirnov statistic: max over thresholds of TPR − FPR (origin included).

    Returns
    -------
    ndarray of float64, shape (...)
        KS in [0, 1]; nan where there are no positives or no negatives.
    """
    return _ks(*check_cumulative_counts(tps, fps))


def gini_from_counts(tps: Any, fps: Any) -> Array:
    """Gini coefficient 2·ROC-AUC − 1, in [−1, 1]; nan where ROC-AUC is."""
    return _gini(*check_cumulative_counts(tps, fps))


def curve_areas(tps: Any, fps: Any) -> dict[str, Array]:
    """The reported scoring metrics of one or many curves, validating the counts once.

    Returns
    -------
    dict of ndarray of float64, shape (...)
        ``auc_roc``, ``auc_pr`` (average precision), ``auc_lift``,
        ``nauc_lift``, ``ks``, ``gini``: the same values as the single
        functions above.
    """
    t, f = check_cumulative_counts(tps, fps)
    roc, lift = _roc_auc(t, f), _lift_auc(t, f)
    return {
        "auc_roc": roc,
        "auc_pr": _average_precision(t, f),
        "auc_lift": lift,
        "nauc_lift": _nauc_lift(t, f, lift),
        "ks": _ks(t, f),
        "gini": 2.0 * roc - 1.0,
    }


AREA_KERNELS: Mapping[str, AreaKernel] = {
    "auc_roc": _roc_auc,
    "auc_pr": _average_precision,
    "auc_pr_trapezoid": _pr_auc_trapezoid,
    "auc_lift": _lift_auc,
    "nauc_lift": lambda t, f: _nauc_lift(t, f, _lift_auc(t, f)),
    "auc_gain": _gain_auc,
    "ks": _ks,
    "gini": _gini,
}
"""The area functions above by their metric names, without the validation.

For callers whose counts are valid by construction (float64 cumulative sums of
non-negative counts, e.g. bootstrap resamples): the same values as the public
functions, without checking every point of every row again.
"""

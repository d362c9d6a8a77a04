"""Point metrics read off a curve (spec section 4): precision at recall u,
precision and lift at a fraction x predicted positive (top-K), recall at FPR f.

The curve's points, with the origin, are joined by straight lines in (alpha,
beta) space (the ROC curve's linear interpolation); a value that no threshold
hits exactly is read on the segment between the two neighbouring points.
At a fixed prior, TP and FP counts are linear in (alpha, beta), so the
interpolation is the same in count space.

``prior=None`` means the curve's own prior (raw metric); a float gives the
metric at that reference prior, M(pi0, alpha, beta). Every function accepts a
scalar (returns a float) or an array of query values (returns an array of the
same shape); undefined values are nan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput

if TYPE_CHECKING:
    from app.metrics.curves import CurveCounts

Array = npt.NDArray[np.float64]

__all__ = ["lift_at_fraction", "precision_at_fraction", "precision_at_recall", "recall_at_fpr"]


def _query(name: str, value: Any, *, low_open: bool) -> Array:
    q = np.asarray(value, dtype=np.float64)
    low_ok = q > 0.0 if low_open else q >= 0.0
    if not np.all(np.isfinite(q) & low_ok & (q <= 1.0)):
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise InvalidInput(name, f"must be in {interval}")
    return q


def _with_origin(a: Array) -> Array:
    return np.concatenate(([0.0], a))


def _read_first(xp: Array, yp: Array, x: Array) -> Array:
    """yp at the first point where non-decreasing xp (xp[0] = 0) reaches x in (0, xp[-1]].

    Linear between the neighbours xp[k-1] < x <= xp[k].
    """
    k = np.clip(np.searchsorted(xp, x, side="left"), 1, xp.size - 1)
    return _on_segment(xp, yp, x, k)


def _read_last(xp: Array, yp: Array, x: Array) -> Array:
    """yp at the last point where non-decreasing xp (xp[0] = 0) is <= x, x in [0, xp[-1]].

    Linear between the neighbours xp[k-1] <= x < xp[k]; yp[-1] at x = xp[-1].
    """
    k = np.searchsorted(xp, x, side="right")
    inside = k < xp.size
    k = np.clip(k, 1, xp.size - 1)
    return np.where(inside, _on_segment(xp, yp, x, k, inside), yp[-1])


def _on_segment(
    xp: Array,
    yp: Array,
    x: Array,
    k: npt.NDArray[np.intp],
    where: npt.NDArray[np.bool_] | bool = True,
) -> Array:
    """yp read linearly at x on the segment from point k - 1 to point k (k >= 1).

    ``where`` marks the queries whose segment has xp[k-1] < xp[k]; the others
    (a zero-length segment) get a meaningless finite value, for the caller to
    replace.
    """
    x0, x1 = xp[k - 1], xp[k]
    w = (x - x0) / np.where(where, x1 - x0, 1.0)
    return yp[k - 1] + w * (yp[k] - yp[k - 1])


def _result(value: Array, query: Array) -> Any:
    return float(value) if query.ndim == 0 else value


@overload
def precision_at_recall(curve: CurveCounts, u: float, prior: float | None = None) -> float: ...
@overload
def precision_at_recall(curve: CurveCounts, u: Array, prior: float | None = None) -> Array: ...
def precision_at_recall(curve: CurveCounts, u: Any, prior: float | None = None) -> Any:
    """Precision at recall ``u``, at the first (lowest-FPR) point reaching ``u``.

    Parameters
    ----------
    curve : CurveCounts
    u : float or ndarray, in (0, 1]
        Recall (TPR) at which precision is read.
    prior : float or None
        Reference prior; ``None`` for the curve's own.

    Returns
    -------
    float or ndarray of float64 (shape of ``u``)
        Precision; nan if the curve has no positives (or no negatives when a
        reference prior is given).

    Examples
    --------
    >>> from app.metrics.curves import cumulative_counts
    >>> precision_at_recall(cumulative_counts([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]), 0.75)
    0.6
    """
    q = _query("u", u, low_open=True)
    tps, fps = curve.counts_at_prior(prior)
    if not tps[-1] > 0.0:
        return _result(np.full_like(q, np.nan), q)
    tp = q * tps[-1]
    fp = _read_first(_with_origin(tps / tps[-1]), _with_origin(fps), q)
    return _result(tp / (tp + fp), q)


def _at_fraction(curve: CurveCounts, x: Array, prior: float | None) -> tuple[Array, Array, Array]:
    """TP mass read at fraction ``x`` predicted positive, with (n, P) at that prior."""
    tps, fps = curve.counts_at_prior(prior)
    n, p = tps[-1] + fps[-1], tps[-1]
    if not (np.isfinite(n) and p > 0.0):
        nan = np.full_like(x, np.nan)
        return nan, nan, nan
    tp = _read_first(_with_origin((tps + fps) / n), _with_origin(tps), x)
    return tp, np.asarray(n), np.asarray(p)


@overload
def precision_at_fraction(curve: CurveCounts, x: float, prior: float | None = None) -> float: ...
@overload
def precision_at_fraction(curve: CurveCounts, x: Array, prior: float | None = None) -> Array: ...
def precision_at_fraction(curve: CurveCounts, x: Any, prior: float | None = None) -> Any:
    """Precision among the top fraction ``x`` of the population (top-K, K = x·n).

    Parameters
    ----------
    curve : CurveCounts
    x : float or ndarray, in (0, 1]
        Fraction predicted positive, pi·TPR + (1 − pi)·FPR at the prior used.
    prior : float or None
        Reference prior; ``None`` for the curve's own.

    Returns
    -------
    float or ndarray of float64 (shape of ``x``)
        Precision; nan if the curve has no positives (or no negatives when a
        reference prior is given).

    Examples
    --------
    >>> from app.metrics.curves import cumulative_counts
    >>> precision_at_fraction(cumulative_counts([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]), 0.5)
    0.5
    """
    q = _query("x", x, low_open=True)
    tp, n, _ = _at_fraction(curve, q, prior)
    return _result(tp / (q * n), q)


@overload
def lift_at_fraction(curve: CurveCounts, x: float, prior: float | None = None) -> float: ...
@overload
def lift_at_fraction(curve: CurveCounts, x: Array, prior: float | None = None) -> Array: ...
def lift_at_fraction(curve: CurveCounts, x: Any, prior: float | None = None) -> Any:
    """Lift (precision / pi = recall / x) at fraction ``x`` predicted positive.

    Same arguments as :func:`precision_at_fraction`; lift is in [0, 1/pi].
    """
    q = _query("x", x, low_open=True)
    tp, _, p = _at_fraction(curve, q, prior)
    return _result(tp / (p * q), q)


@overload
def recall_at_fpr(curve: CurveCounts, fpr: float) -> float: ...
@overload
def recall_at_fpr(curve: CurveCounts, fpr: Array) -> Array: ...
def recall_at_fpr(curve: CurveCounts, fpr: Any) -> Any:
    """Recall (TPR) at false-positive rate ``fpr``: the highest TPR the ROC curve reaches.

    Parameters
    ----------
    curve : CurveCounts
    fpr : float or ndarray, in [0, 1]

    Returns
    -------
    float or ndarray of float64 (shape of ``fpr``)
        TPR; nan if the curve has no positives or no negatives. Prior-invariant.

    Examples
    --------
    >>> from app.metrics.curves import cumulative_counts
    >>> recall_at_fpr(cumulative_counts([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]), 0.25)
    0.5
    """
    q = _query("fpr", fpr, low_open=False)
    p, neg = curve.positives, curve.negatives
    if not (p > 0.0 and neg > 0.0):
        return _result(np.full_like(q, np.nan), q)
    tpr = _with_origin(curve.tps / p)
    return _result(_read_last(_with_origin(curve.fps / neg), tpr, q), q)

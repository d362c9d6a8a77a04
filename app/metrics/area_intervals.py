"""Closed-form intervals of calibrated AUC-PR and KS from per-class histograms.

The bootstrap does not give these two metrics an honest interval
(docs/intervals.md): calibrated AUC-PR is biased upward where the window has
few negatives for its weight at pi0, and KS is a maximum over thresholds.
Both intervals here cost O(K) for K bins.

Calibrated AUC-PR: delta method on the logit scale
--------------------------------------------------
With the bins in decreasing score order, p_j and q_j the shares of the
positives and of the negatives in bin j, T_k = sum_{j<=k} p_j, F_k = sum_{j<=k}
q_j, a = pi0 and b = 1 − pi0, the precision at pi0 of threshold k is
r_k = a T_k / (a T_k + b F_k) and

    AP = sum_k p_k r_k.

Its partial derivatives, each a reversed cumulative sum (one pass):

    dAP/dp_j = r_j + sum_{k>=j} p_k a b F_k / (a T_k + b F_k)^2
    dAP/dq_j =     − sum_{k>=j} p_k a b T_k / (a T_k + b F_k)^2

The two classes' histograms are independent multinomials (n_pos, p) and
(n_neg, q), so Var(AP) ~ V1 + V0 with V = (sum_j w_j g_j^2 − (sum_j w_j g_j)^2)/n
for shares w and gradient g of each class. Three choices make it cover:

* the gradient and the centre are evaluated with the negatives smoothed by
  :data:`PSEUDO_NEGATIVES` pseudo-negatives distributed as the positives,
  q = (h0 + 0.5 p) / (n_neg + 0.5): a bin of positives where no negative was
  seen still carries the negatives' sampling error, and the centre is pulled
  down from the upward bias of a precision of exactly 1;
* the positives' part is floored at AP (1 − AP) / n_pos (the variance of a
  proportion of n_pos), which keeps it honest where the curve is flat;
* the interval is symmetric on the logit scale, so it stays inside (0, 1),
  and it is widened to contain the point estimate when the smoothing moved
  the centre past it.

It is computed only where (n_neg / n_pos) * pi0 / (1 − pi0) >=
:data:`MIN_NEGATIVE_SUPPORT`: the window holds enough negatives per positive
to represent the pi0 mix; elsewhere the interval is null with
:data:`FEW_NEGATIVES`.

KS: a DKW-Massart lower end, a pointwise upper end
--------------------------------------------------
KS = max_t TPR(t) − FPR(t). The truth's maximiser t* gives KS − KS_hat <=
sup(TPR − TPR_hat) + sup(FPR_hat − FPR), two independent one-sided
deviations of empirical distribution functions, each bounded by Massart's
inequality P(sup > x / sqrt(n)) <= exp(−2 x^2) (whatever the score
distribution, ties included). The lower end is KS_hat minus the exact upper
(1 − level)/2 quantile of D = X1 / sqrt(n_pos) + X0 / sqrt(n_neg), X1 and X0
independent with P(X > x) = exp(−2 x^2). With u = 1/sqrt(n_pos), v =
1/sqrt(n_neg), s^2 = u^2 + v^2, integrating one Rayleigh density against the
other's tail gives

    P(D > d) = (u^2 exp(−2 d^2/u^2) + v^2 exp(−2 d^2/v^2)) / s^2
               + sqrt(2 pi) (u v d / s^3) exp(−2 d^2/s^2)
                 (erf(sqrt(2) v d / (u s)) + erf(sqrt(2) u d / (v s)))

(:func:`dkw_sum_sf`), decreasing from 1 at d = 0, and its quantile is a 1-D
root (:func:`dkw_sum_quantile`). KS_hat is at least the empirical gap at t*,
which is about normal around KS, so the upper end is KS_hat plus the normal
quantile times the gap's standard error at the estimated maximiser,
sqrt(TPR (1 − TPR) / n_pos + FPR (1 − FPR) / n_neg). Both ends are clipped
to [0, 1].
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from app.metrics.areas import average_precision_from_counts
from app.metrics.labeling import Array
from app.metrics.roots import brentq
from app.metrics.validation import check_class_histograms, check_probability

__all__ = [
    "FEW_NEGATIVES",
    "MIN_NEGATIVE_SUPPORT",
    "NO_CLASS",
    "PSEUDO_NEGATIVES",
    "AreaInterval",
    "calibrated_ap_gradient",
    "calibrated_auc_pr_interval",
    "dkw_sum_quantile",
    "dkw_sum_sf",
    "ks_interval",
]

MIN_NEGATIVE_SUPPORT = 0.4
"""Least (n_neg / n_pos) * pi0 / (1 − pi0) for a calibrated AUC-PR interval."""

PSEUDO_NEGATIVES = 0.5
"""Pseudo-negatives, distributed as the positives, added to the negatives' shares."""

FEW_NEGATIVES = (
    "too few negatives per positive to represent pi0's class mix: (negatives / positives) "
    f"* pi0 / (1 - pi0) < {MIN_NEGATIVE_SUPPORT} (docs/intervals.md)"
)
"""Reason of a calibrated AUC-PR interval left null by the gate above."""

NO_CLASS = "undefined: the window needs examples of both classes"
"""Reason of an interval of a window without positives or without negatives."""


class AreaInterval(NamedTuple):
    """An interval ``(low, high)``; ``(nan, nan)`` with the ``reason`` when there is none."""

    low: float
    high: float
    reason: str | None = None


_NONE = math.nan, math.nan


def _descending(positives: Any, negatives: Any) -> tuple[Array, Array]:
    """The non-empty bins of both classes in decreasing score order."""
    pos, neg = check_class_histograms(positives, negatives)
    keep = (pos + neg) > 0.0
    return pos[keep][::-1], neg[keep][::-1]


def calibrated_ap_gradient(p: Any, q: Any, pi0: float) -> tuple[float, Array, Array]:
    """Calibrated average precision and its partial derivatives (module docstring).

    Parameters
    ----------
    p, q : array_like of shape (K,)
        Shares of the positives / negatives per bin, bins in DECREASING score
        order, each summing to 1; ``a·T_k + b·F_k > 0`` at every k (the first
        bin holds an example).
    pi0 : float
        Reference prior in (0, 1).

    Returns
    -------
    ap : float
    d_p, d_q : ndarray of float64, shape (K,)
        ``d_p[j] = dAP/dp_j`` and ``d_q[j] = dAP/dq_j`` (shares as free variables).

    Examples
    --------
    >>> ap, d_p, d_q = calibrated_ap_gradient([0.5, 0.5], [0.0, 1.0], 0.5)
    >>> ap, bool(d_q[0] < 0.0 < d_p[0])
    (0.75, True)
    """
    a = check_probability("pi0", pi0)
    b = 1.0 - a
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    t, f = np.cumsum(p), np.cumsum(q)
    d = a * t + b * f
    r = a * t / d
    w = p * a * b / (d * d)
    d_p = r + np.cumsum((w * f)[::-1])[::-1]
    d_q = -np.cumsum((w * t)[::-1])[::-1]
    return float(np.sum(p * r)), d_p, d_q


def _multinomial_variance(shares: Array, grad: Array, n: float) -> float:
    """Delta-method variance of a function of one class's shares (multinomial, n draws)."""
    mean = float(np.sum(shares * grad))
    return max(float(np.sum(shares * grad * grad)) - mean * mean, 0.0) / n


def calibrated_auc_pr_interval(
    positives: Any, negatives: Any, pi0: float, level: float = 0.95
) -> AreaInterval:
    """Interval of calibrated AUC-PR (average precision at pi0) from class histograms.

    Parameters
    ----------
    positives, negatives : array_like of shape (J,)
        Examples of each class per bin, bins in increasing score order (as
        ``app.metrics.binning.histogram_counts`` returns them).
    pi0 : float
        Reference prior in (0, 1).
    level : float
        Two-sided level in (0, 1).

    Returns
    -------
    AreaInterval
        Delta-method interval on the logit scale (module docstring); null
        with :data:`FEW_NEGATIVES` below :data:`MIN_NEGATIVE_SUPPORT`, with
        :data:`NO_CLASS` without positives or negatives.

    Examples
    --------
    >>> pos, neg = [1, 2, 5, 12, 30], [400, 250, 100, 40, 10]
    >>> low, high, reason = calibrated_auc_pr_interval(pos, neg, pi0=0.1)
    >>> 0.5 < low < 0.694 < high < 0.85, reason  # point estimate 0.694
    (True, None)
    """
    pos, neg = _descending(positives, negatives)
    a = check_probability("pi0", pi0)
    from scipy import special  # on first use: scipy.special is not a start-up import

    z = float(special.ndtri((1.0 + check_probability("level", level)) / 2.0))
    n_pos, n_neg = float(pos.sum()), float(neg.sum())
    if n_pos == 0.0 or n_neg == 0.0:
        return AreaInterval(*_NONE, NO_CLASS)
    if n_neg / n_pos * a / (1.0 - a) < MIN_NEGATIVE_SUPPORT:
        return AreaInterval(*_NONE, FEW_NEGATIVES)
    p = pos / n_pos
    point = float(
        average_precision_from_counts(a * np.cumsum(p), (1.0 - a) * np.cumsum(neg) / n_neg)
    )
    q = (neg + PSEUDO_NEGATIVES * p) / (n_neg + PSEUDO_NEGATIVES)
    centre, d_p, d_q = calibrated_ap_gradient(p, q, a)
    spread = centre * (1.0 - centre)
    v_pos = max(_multinomial_variance(p, d_p, n_pos), spread / n_pos)
    half = z * math.sqrt(v_pos + _multinomial_variance(q, d_q, n_neg)) / spread
    logit = math.log(centre / (1.0 - centre))
    low, high = float(special.expit(logit - half)), float(special.expit(logit + half))
    return AreaInterval(min(low, point), max(high, point))


def dkw_sum_sf(d: float, n_positives: float, n_negatives: float) -> float:
    """P(X1 / sqrt(n_pos) + X0 / sqrt(n_neg) > d), P(X > x) = exp(−2 x^2) each (closed form).

    Examples
    --------
    >>> dkw_sum_sf(0.0, 100, 400)
    1.0
    >>> round(dkw_sum_sf(0.2, 100, 1e12), 6) == round(math.exp(-2 * 0.2**2 * 100), 6)
    True
    """
    u, v = 1.0 / math.sqrt(n_positives), 1.0 / math.sqrt(n_negatives)
    s2 = u * u + v * v
    s = math.sqrt(s2)
    tails = (
        u * u * math.exp(-2.0 * d * d / (u * u)) + v * v * math.exp(-2.0 * d * d / (v * v))
    ) / s2
    both = (
        math.sqrt(2.0 * math.pi)
        * (u * v * d / (s2 * s))
        * math.exp(-2.0 * d * d / s2)
        * (math.erf(math.sqrt(2.0) * v * d / (u * s)) + math.erf(math.sqrt(2.0) * u * d / (v * s)))
    )
    return min(tails + both, 1.0)


def dkw_sum_quantile(prob: float, n_positives: float, n_negatives: float) -> float:
    """The ``prob`` quantile of the sum in :func:`dkw_sum_sf` (a root of its tail).

    Examples
    --------
    >>> d = dkw_sum_quantile(0.975, 100, 400)
    >>> round(dkw_sum_sf(d, 100, 400), 9)
    0.025
    """
    tail = 1.0 - check_probability("prob", prob)
    u, v = 1.0 / math.sqrt(n_positives), 1.0 / math.sqrt(n_negatives)
    # each term's own tail at its share of d bounds the sum's: 2 exp(−2 d^2/(u + v)^2) <= tail
    upper = (u + v) * math.sqrt(math.log(2.0 / tail) / 2.0)
    return brentq(lambda d: dkw_sum_sf(d, n_positives, n_negatives) - tail, 0.0, upper, xtol=1e-12)


def ks_interval(positives: Any, negatives: Any, level: float = 0.95) -> AreaInterval:
    """Interval of KS from class histograms (module docstring).

    Parameters
    ----------
    positives, negatives : array_like of shape (J,)
        Examples of each class per bin, bins in increasing score order.
    level : float
        Two-sided level in (0, 1); each end has (1 − level)/2.

    Returns
    -------
    AreaInterval
        ``(KS − DKW-Massart quantile, KS + pointwise normal bound)`` clipped
        to [0, 1]; null with :data:`NO_CLASS` without positives or negatives.

    Examples
    --------
    >>> pos, neg = [1, 2, 5, 12, 30], [40, 25, 10, 4, 1]
    >>> low, high, reason = ks_interval(pos, neg)
    >>> 0.4 < low < 0.667 < high < 0.9, reason  # point estimate 0.667
    (True, None)
    """
    pos, neg = _descending(positives, negatives)
    tail = (1.0 - check_probability("level", level)) / 2.0
    n_pos, n_neg = float(pos.sum()), float(neg.sum())
    if n_pos == 0.0 or n_neg == 0.0:
        return AreaInterval(*_NONE, NO_CLASS)
    tpr = np.concatenate(([0.0], np.cumsum(pos) / n_pos))  # the origin included
    fpr = np.concatenate(([0.0], np.cumsum(neg) / n_neg))
    k = int(np.argmax(tpr - fpr))
    ks, t, f = float(tpr[k] - fpr[k]), float(tpr[k]), float(fpr[k])
    se = math.sqrt(t * (1.0 - t) / n_pos + f * (1.0 - f) / n_neg)
    low = ks - dkw_sum_quantile(1.0 - tail, n_pos, n_neg)
    from scipy import special  # on first use: scipy.special is not a start-up import

    high = ks - float(special.ndtri(tail)) * se
    return AreaInterval(max(low, 0.0), min(high, 1.0))

"""The window's prior from its unlabelled scores: likelihood, maximiser, interval, adjusted count.

With the reference's group probabilities f1, f0 (:class:`~app.estimation.
reference.MixtureReference`) and the window's unlabelled group counts u, the
log-likelihood of the prior is

    L(pi) = sum_g u_g log(pi f1_g + (1 - pi) f0_g),

concave on [0, 1]. Its maximiser is the root of the decreasing derivative
L'(pi) = sum_g u_g (f1_g - f0_g) / (pi f1_g + (1 - pi) f0_g), found by
Brent's bracketing method to :data:`PRIOR_XTOL` (0 or 1 when L' does not
change sign).
It is the fixed point of the EM algorithm of Saerens, Latinne and
Decaestecker (2002), without iterating EM to a tolerance.
"""

from __future__ import annotations

import math

import numpy as np

from app.drift.histograms import FloatArray
from app.metrics.roots import brentq

PRIOR_XTOL = 1e-12
"""Absolute tolerance of the prior's root (with scipy's default relative one).

Far below any prior's standard error (about 1e-8 for a window of 10^12 rows
at a prior of 1e-4). The smallest float as tolerance asked Brent for more
than the doubles near a root of 1e-4 can give: it failed to converge in 100
iterations in 12 of 80,000 windows at prior 0.001; at 1e-12 it takes about 6.
"""


def mixture_log_likelihood(
    counts: FloatArray, f_positive: FloatArray, f_negative: FloatArray, prior: float
) -> float:
    """L(pi) of group counts under the mixture ``prior f1 + (1 - prior) f0``.

    Parameters
    ----------
    counts : array of shape (G,)
        Unlabelled examples per group.
    f_positive, f_negative : array of shape (G,)
        Group probabilities of each class (all > 0, each summing to 1).
    prior : float in [0, 1]

    Examples
    --------
    >>> f1, f0 = np.array([0.2, 0.8]), np.array([0.8, 0.2])
    >>> round(mixture_log_likelihood(np.array([5.0, 5.0]), f1, f0, 0.5), 6)
    -6.931472
    """
    return float(np.dot(counts, np.log(f_negative + prior * (f_positive - f_negative))))


def _slope(prior: float, counts: FloatArray, diff: FloatArray, f_negative: FloatArray) -> float:
    return float(np.dot(counts, diff / (f_negative + prior * diff)))


def ml_prior(counts: FloatArray, f_positive: FloatArray, f_negative: FloatArray) -> float:
    """The maximum-likelihood prior: the root of L' in [0, 1], or the end where L is largest.

    Parameters are those of :func:`mixture_log_likelihood`; ``counts`` must
    not be all zero.

    Examples
    --------
    >>> f1, f0 = np.array([0.2, 0.8]), np.array([0.8, 0.2])
    >>> round(ml_prior(np.array([5.0, 5.0]), f1, f0), 12)
    0.5
    >>> ml_prior(np.array([9.0, 1.0]), f1, f0)
    0.0
    """
    diff = f_positive - f_negative
    if _slope(0.0, counts, diff, f_negative) <= 0.0:
        return 0.0
    if _slope(1.0, counts, diff, f_negative) >= 0.0:
        return 1.0
    root = brentq(lambda pi: _slope(pi, counts, diff, f_negative), 0.0, 1.0, xtol=PRIOR_XTOL)
    return float(root)


def unconstrained_prior(
    counts: FloatArray, f_positive: FloatArray, f_negative: FloatArray, prior: float
) -> float:
    """One Newton step of L from ``prior``: L's maximum without the bounds [0, 1], to first order.

    ``prior`` itself when it is the root of L' inside (0, 1); beyond 0 or 1
    when the maximum :func:`ml_prior` is at a bound. Its sampling law is
    close to normal at any prior, which the bounded maximum's is not near 0.

    Examples
    --------
    >>> f1, f0 = np.array([0.2, 0.8]), np.array([0.8, 0.2])
    >>> round(unconstrained_prior(np.array([9.0, 1.0]), f1, f0, 0.0), 6)
    -0.266667
    """
    diff = f_positive - f_negative
    ratio = diff / (f_negative + prior * diff)
    return prior + float(np.dot(counts, ratio)) / float(np.dot(counts, ratio * ratio))


def profile_interval(
    counts: FloatArray,
    f_positive: FloatArray,
    f_negative: FloatArray,
    prior: float,
    *,
    level: float,
    scale: float = 1.0,
) -> tuple[float, float]:
    """The profile-likelihood interval ``{pi : scale * 2 (L(prior) - L(pi)) <= q}``.

    Parameters
    ----------
    counts, f_positive, f_negative : arrays of shape (G,)
        As in :func:`mixture_log_likelihood`.
    prior : float
        The maximiser :func:`ml_prior`.
    level : float in (0, 1)
        Coverage; q is the chi-square(1) quantile at ``level``.
    scale : float in (0, 1]
        Multiplies the deviance. 1 is the textbook interval, which treats f1
        and f0 as known; the share of the window in the estimate's variance
        (:class:`~app.estimation.sampling.GroupedSampling`) widens it for the
        reference's own sampling error.

    Returns
    -------
    lower, upper : float
        The interval's ends in [0, 1], lower <= prior <= upper.
    """
    from scipy.stats import chi2  # imported on first use: keeps scipy.stats out of start-up

    q = float(chi2.ppf(level, 1))
    top = mixture_log_likelihood(counts, f_positive, f_negative, prior)

    def excess(pi: float) -> float:
        return scale * 2.0 * (top - mixture_log_likelihood(counts, f_positive, f_negative, pi)) - q

    lower = 0.0 if excess(0.0) <= 0.0 else brentq(excess, 0.0, prior)
    upper = 1.0 if excess(1.0) <= 0.0 else brentq(excess, prior, 1.0)
    return lower, upper


def equal_prior_p_value(
    counts: FloatArray,
    f_positive: FloatArray,
    f_negative: FloatArray,
    prior: float,
    null_prior: float,
    *,
    scale: float = 1.0,
) -> float:
    """p-value of the likelihood-ratio test of ``pi = null_prior`` (``scale`` as in the interval).

    ``null_prior`` lies outside the interval at level 1 - alpha with the same
    scale exactly when this p-value is below alpha.
    """
    top = mixture_log_likelihood(counts, f_positive, f_negative, prior)
    at_null = mixture_log_likelihood(counts, f_positive, f_negative, null_prior)
    from scipy.stats import chi2

    return float(chi2.sf(max(scale * 2.0 * (top - at_null), 0.0), 1))


def adjusted_count_prior(share_predicted_positive: float, tpr: float, fpr: float) -> float | None:
    """Black-box shift estimate (Lipton et al. 2018) from one confusion matrix.

    ``(q - FPR) / (TPR - FPR)`` clipped to [0, 1], with q the window's share
    of scores at or above the threshold and TPR, FPR the reference's there;
    ``None`` when TPR = FPR (the threshold separates nothing).

    Examples
    --------
    >>> round(adjusted_count_prior(0.2, tpr=0.8, fpr=0.1), 6)
    0.142857
    """
    gap = tpr - fpr
    if not math.isfinite(gap) or gap == 0.0:
        return None
    return min(max((share_predicted_positive - fpr) / gap, 0.0), 1.0)

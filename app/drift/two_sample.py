"""Two-sample tests and distances on histograms over the same bins.

The building blocks of the likelihood-shift test (:mod:`app.drift.likelihood`):
merging fine bins at the quantiles of a histogram (the pooled sample's for the
chi-square test), Pearson's chi-square test of
homogeneity, the Wilcoxon-Mann-Whitney rank-sum test with bins as ties, the
Wasserstein-1 distance, and Šidák's adjustment. Inputs are validated count
arrays (e.g. those of a :class:`~app.drift.histograms.WindowHistograms`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from app.drift.histograms import FloatArray

IntArray = npt.NDArray[np.intp]


def quantile_bin_starts(
    reference: FloatArray, n_bins: int, *, cumulative: FloatArray | None = None
) -> IntArray:
    """First fine bin of each coarse bin, cut at the quantiles of ``reference``.

    Parameters
    ----------
    reference : array of shape (J,)
        Counts in the fine bins (not all zero) whose quantiles cut: a
        reference's (PSI deciles) or a pooled sample's (chi-square test).
    n_bins : int
        Wanted number of coarse bins K >= 1.
    cumulative : array of shape (J,), optional
        ``np.cumsum(reference)``, when the caller has it.

    Returns
    -------
    starts : int array of shape (K',), K' <= K
        ``starts[0] == 0``; coarse bin k is fine bins ``starts[k]`` to
        ``starts[k+1] - 1`` (the last one runs to J - 1). Coarse bin k ends
        after the first fine bin where the reference's cumulative share reaches
        ``(k+1)/K``; cuts that coincide (a fine bin holding more than 1/K of
        the reference) are merged, so K' < K is possible. Every coarse bin but
        possibly the last holds reference mass.

    Examples
    --------
    >>> quantile_bin_starts(np.array([1.0, 1, 1, 1, 4, 0]), 4).tolist()
    [0, 2, 4, 5]
    """
    cum = np.cumsum(reference) if cumulative is None else cumulative
    total = cum[-1]
    # first fine bin j with cum[j] >= k/K * total, compared exactly on whole counts
    ends = np.searchsorted(cum * n_bins, np.arange(1, n_bins) * total, side="left") + 1
    starts = np.unique(np.concatenate(([0], ends))).astype(np.intp)
    kept: IntArray = starts[starts < reference.shape[0]]
    return kept


def coarsen(counts: FloatArray, starts: IntArray) -> FloatArray:
    """Counts of the coarse bins that begin at ``starts`` (see :func:`quantile_bin_starts`)."""
    return np.add.reduceat(counts, starts)


def chi_square_homogeneity(reference: FloatArray, window: FloatArray) -> tuple[float, int, float]:
    """Pearson's chi-square test that two histograms share one distribution.

    Parameters
    ----------
    reference, window : arrays of shape (K,)
        Counts of the two samples in the same K bins (each with a positive total).

    Returns
    -------
    statistic : float
        ``n_r n_w sum_k (r_k/n_r - w_k/n_w)^2 / (r_k + w_k)`` over bins with
        ``r_k + w_k > 0`` (the usual sum of (observed - expected)^2 / expected
        over the 2 x K table).
    df : int
        Number of non-empty bins minus one.
    p_value : float
        Upper tail of chi-square with ``df`` degrees of freedom (1.0 when df = 0).

    Examples
    --------
    >>> s, df, p = chi_square_homogeneity(np.array([10.0, 20, 30]), np.array([30.0, 20, 10]))
    >>> round(s, 4), df, round(p, 6)
    (20.0, 2, 4.5e-05)
    """
    keep = (reference + window) > 0
    r, w = reference[keep], window[keep]
    n_r, n_w = float(r.sum()), float(w.sum())
    df = int(r.shape[0]) - 1
    if df == 0:
        return 0.0, 0, 1.0
    statistic = float(n_r * n_w * np.sum((r / n_r - w / n_w) ** 2 / (r + w)))
    from scipy import special  # on first use: scipy.special is not a start-up import

    return statistic, df, float(special.chdtrc(df, statistic))  # chi-square upper tail


def rank_sum_test(
    reference: FloatArray, window: FloatArray, *, reference_cumulative: FloatArray | None = None
) -> tuple[float, float, float]:
    """Wilcoxon-Mann-Whitney rank-sum test of two histograms over the same bins.

    Examples in the same bin are ties. With ``U`` the number of (window,
    reference) pairs where the window's example lies in a higher bin, plus half
    the pairs in the same bin, ``z = (U - n_r n_w / 2) / sd(U)`` where
    ``var(U) = n_r n_w / 12 ((N + 1) - sum_j (t_j^3 - t_j) / (N (N - 1)))``,
    ``t_j`` the examples of both samples in bin j and ``N = n_r + n_w``.

    Parameters
    ----------
    reference, window : arrays of shape (J,)
        Counts per bin, bins in increasing score (each with a positive total).
    reference_cumulative : array of shape (J,), optional
        ``np.cumsum(reference)``, when the caller has it.

    Returns
    -------
    z : float
        Standardised U; negative when the window's scores are lower.
    p_value : float
        Two-sided, normal approximation (0 < p <= 1; 1.0 when every example
        is in one bin).
    superiority : float
        ``U / (n_r n_w)``: probability that a window example scores above a
        reference example, ties counting one half (0.5: no shift).

    Examples
    --------
    >>> z, p, sup = rank_sum_test(np.array([10.0, 20, 30]), np.array([30.0, 20, 10]))
    >>> round(z, 3), round(p, 5), round(sup, 4)
    (-4.453, 1e-05, 0.2778)
    """
    n_r, n_w = float(reference.sum()), float(window.sum())
    cum = np.cumsum(reference) if reference_cumulative is None else reference_cumulative
    below = cum - reference
    u = float(np.sum(window * (below + 0.5 * reference)))
    ties = reference + window
    n = n_r + n_w
    variance = n_r * n_w / 12.0 * ((n + 1.0) - float(np.sum(_cubes(ties) - ties)) / (n * (n - 1.0)))
    if variance <= 0.0:
        return 0.0, 1.0, 0.5
    z = (u - 0.5 * n_r * n_w) / math.sqrt(variance)
    from scipy import special  # on first use: scipy.special is not a start-up import

    return z, float(2.0 * special.ndtr(-abs(z))), u / (n_r * n_w)  # two normal tails


EXACT_CUBES = 2.0**17
"""Whole numbers below this have cubes below 2^51: exact as two products."""


def _cubes(x: FloatArray) -> FloatArray:
    """``x**3``; by two products (a fifth of the time) when every element is a whole
    number below :data:`EXACT_CUBES`, where both are exact, so the same floats."""
    if x.size and x.max() < EXACT_CUBES and np.array_equal(x, np.floor(x)):
        return x * x * x
    cubes: FloatArray = x**3
    return cubes


def bin_midpoints(edges: FloatArray) -> FloatArray:
    """Score at the middle of each bin, shape (J,)."""
    return 0.5 * (edges[:-1] + edges[1:])


def logit_bin_midpoints(edges: FloatArray) -> FloatArray:
    """Middle of each bin on the logit scale, shape (J,).

    An outer edge at 0 or 1 (logit -inf or +inf) is replaced by its inner
    neighbour, so the outer bins sit at their finite edge.
    """
    with np.errstate(divide="ignore"):
        z = np.log(edges) - np.log1p(-edges)
    finite = np.isfinite(z)
    if not finite.any():
        flat: FloatArray = np.zeros(edges.shape[0] - 1, dtype=np.float64)
        return flat
    clipped: FloatArray = np.clip(z, z[finite].min(), z[finite].max())
    return 0.5 * (clipped[:-1] + clipped[1:])


def wasserstein_from_histograms(
    reference: FloatArray, window: FloatArray, points: FloatArray
) -> float:
    """Wasserstein-1 distance between two histograms with their mass at ``points``.

    Parameters
    ----------
    reference, window : arrays of shape (J,)
        Counts per bin (each with a positive total).
    points : array of shape (J,)
        Non-decreasing location of each bin's mass.

    Returns
    -------
    float
        ``sum_j |F_r(j) - F_w(j)| (points[j+1] - points[j])`` with F the
        cumulative shares: the area between the two distribution functions.
    """
    return wasserstein_distances(reference, window, [points])[0]


def wasserstein_distances(
    reference: FloatArray,
    window: FloatArray,
    locations: Sequence[FloatArray],
    *,
    cumulatives: tuple[FloatArray, FloatArray] | None = None,
) -> list[float]:
    """:func:`wasserstein_from_histograms` at several locations of the bins' mass.

    The cumulative shares of the two histograms are computed once for all
    (e.g. the score and its logit); ``cumulatives`` are ``np.cumsum`` of
    ``reference`` and of ``window``, when the caller has them.
    """
    cum_r, cum_w = (
        (np.cumsum(reference[:-1]), np.cumsum(window[:-1]))
        if cumulatives is None
        else (cumulatives[0][:-1], cumulatives[1][:-1])
    )
    f_r = cum_r / reference.sum()
    f_w = cum_w / window.sum()
    gap = np.abs(f_r - f_w)
    return [float(np.sum(gap * np.diff(points))) for points in locations]


def sidak(p_value: float, n_tests: int) -> float:
    """Šidák-adjusted p-value ``1 - (1 - p)^m`` of the smallest of m independent tests."""
    if p_value >= 1.0:
        return 1.0
    return -math.expm1(n_tests * math.log1p(-p_value))

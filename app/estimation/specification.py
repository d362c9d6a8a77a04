"""Do the mixture estimate and the adjusted counts agree? The specification test of the prior.

Under a pure prior shift the maximum-likelihood prior pi_hat (on the groups)
and the adjusted count at each of the model's K thresholds t_k,

    a_k = (q_k - F_k) / (T_k - F_k),

(q_k the window's share of scores at or above t_k, T_k and F_k the
reference's true- and false-positive rates there; not clipped) estimate the
same prior. When P(s | y) moved they estimate different things: a small shift
of the negatives' scores moves many negatives above a threshold, which the
adjusted count reads as positives, while the mixture weighs every group. The
test is the Wald statistic of the K differences D_k = pi_hat - a_k,

    W = D' S^-1 D,  chi-square with K degrees of freedom (the rank of S),

with S their joint covariance to first order (a Hausman-type test of two
consistent estimators). Both estimators are linear in the same error: cut
the bins into cells at the group boundaries and at the thresholds, with the
window's cell shares p, the reference's f1 and f0 and m = pi f1 + (1 - pi) f0;
the error ``e = p - m``, where every term is estimated, has the covariance V of
:mod:`app.estimation.sampling` on the cells (the window's multinomial and the
reference's two). Then

* pi_hat - pi = b' e, with b_c the influence of cell c's group
  (:attr:`~app.estimation.sampling.GroupedSampling.influence`, times
  a1 - a0 to carry it from the smoothed to the raw scale of the prior:
  :class:`~app.estimation.reference.MixtureReference`);
* a_k - pi = c_k' e, with c_k = [cell c at or above t_k] / (T_k - F_k)
  (the delta method: dq - pi dT - (1 - pi) dF is the error of the cells above);

so D = (B - C) e and S = (B - C) V (B - C)'. Thresholds at which the
reference's rates are equal (T_k = F_k) estimate nothing and are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.drift.histograms import FloatArray
from app.drift.two_sample import coarsen
from app.estimation.reference import MixtureReference
from app.estimation.sampling import multinomial_cov


@dataclass(frozen=True, slots=True)
class SpecificationTest:
    """Wald test of the mixture prior against the adjusted counts at the thresholds.

    Attributes
    ----------
    statistic : float | None
        D' S^-1 D (``None`` when no threshold separates the classes).
    df : int
        The rank of S: the number of usable thresholds, at most K.
    p_value : float | None
        Upper tail of chi-square(df) at the statistic.
    """

    statistic: float | None
    df: int
    p_value: float | None


def specification_test(
    reference: MixtureReference,
    unlabelled: FloatArray,
    influence: FloatArray,
    prior: float,
    thresholds: Sequence[float],
) -> SpecificationTest:
    """Test pi_hat against the adjusted count at every threshold (module docstring).

    Parameters
    ----------
    reference : MixtureReference
    unlabelled : array of shape (J,)
        The window's checked unlabelled histogram on the model's bins.
    influence : array of shape (G,)
        b: the change of pi_hat per unit change of each group's share, at
        ``prior``.
    prior : float
        pi_hat without its bounds (:func:`~app.estimation.prior.unconstrained_prior`:
        at a bound, the bounded maximum's law is far from normal); the
        covariance is taken at its value clipped to [0, 1].
    thresholds : sequence of float
        The model's thresholds.

    Returns
    -------
    SpecificationTest
    """
    lower_edges = reference.edges[:-1]
    n_bins = lower_edges.shape[0]
    curve = reference.curve
    cuts, gaps = [], []
    for t in thresholds:
        at = curve.confusion_at(t)
        gap = (1.0 - at.beta) - at.alpha
        if np.isfinite(gap) and gap != 0.0:
            cuts.append(int(np.searchsorted(lower_edges, t, side="left")))
            gaps.append(gap)
    if not cuts:
        return SpecificationTest(None, 0, None)
    cells = np.union1d(reference.starts, [c for c in cuts if 0 < c < n_bins])
    n = float(unlabelled.sum())
    p = coarsen(unlabelled, cells) / n
    f1 = _cell_shares(curve.tps, curve.positives, curve.thresholds, lower_edges[cells])
    f0 = _cell_shares(curve.fps, curve.negatives, curve.thresholds, lower_edges[cells])
    pi = min(max(prior, 0.0), 1.0)
    cov = (
        multinomial_cov(pi * f1 + (1.0 - pi) * f0) / n
        + pi**2 * multinomial_cov(f1) / reference.n_positives
        + (1.0 - pi) ** 2 * multinomial_cov(f0) / reference.n_negatives
    )
    group_of_cell = np.searchsorted(reference.starts, cells, side="right") - 1
    above = cells[None, :] >= np.asarray(cuts)[:, None]
    slopes = above / np.asarray(gaps)[:, None]
    rows = influence[group_of_cell][None, :] - slopes
    adjusted = slopes @ (p - f0)  # (q_k - F_k) / (T_k - F_k)
    differences = prior - adjusted
    s = rows @ cov @ rows.T
    df = int(np.linalg.matrix_rank(s))  # 0 only for degenerate classes: then no test
    statistic = float(differences @ np.linalg.pinv(s, hermitian=True) @ differences)
    from scipy.stats import chi2  # imported on first use: keeps scipy.stats out of start-up

    return SpecificationTest(
        *((statistic, df, float(chi2.sf(statistic, df))) if df else (None, 0, None))
    )


def _cell_shares(
    cumulative: FloatArray, total: float, thresholds: FloatArray, starts: FloatArray
) -> FloatArray:
    """Share of a class in each cell, from its counts at or above each cell's lower edge."""
    at_or_above = thresholds.size - np.searchsorted(thresholds[::-1], starts)
    counts = np.where(at_or_above > 0, cumulative[np.maximum(at_or_above - 1, 0)], 0.0)
    return -np.diff(np.append(counts, 0.0)) / total

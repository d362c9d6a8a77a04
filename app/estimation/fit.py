"""Can a prior shift explain the window's scores? The goodness-of-fit test of the mixture.

The window's unlabelled group shares p are compared with the fitted mixture
m(pi_hat) = pi_hat f1 + (1 - pi_hat) f0. The statistic is the quadratic form
of the residual r = p - m(pi_hat) in the generalised inverse of its
covariance (:meth:`~app.estimation.sampling.GroupedSampling.residual_cov`),
which holds the window's multinomial error, the reference's own sampling
error in f1 and f0, and the fitting of pi. Under a pure prior shift it is
asymptotically chi-square with G - 2 degrees of freedom (G groups, minus one
for the shares summing to 1, minus one for pi), whatever the sizes of the
window and the reference. Where the reference is much larger than the window
it is Pearson's statistic of the window against the fitted mixture.

The covariance's null space is spanned by the vector of ones and by the
influence vector b; r is orthogonal to both (the shares and the mixture both
sum to 1, and L'(pi_hat) = 0 is b'r = 0 when pi_hat is inside (0, 1)), so the
form is computed in an orthonormal basis of their complement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from app.drift.histograms import FloatArray
from app.estimation.sampling import GroupedSampling


@dataclass(frozen=True, slots=True)
class MixtureFitTest:
    """Result of the goodness-of-fit test of the mixture at pi_hat.

    Attributes
    ----------
    statistic : float | None
        The quadratic form (``None`` when the test has no degree of freedom).
    df : int
        G - 2.
    p_value : float | None
        Upper tail of chi-square(df) at the statistic.
    """

    statistic: float | None
    df: int
    p_value: float | None


def mixture_fit_test(counts: FloatArray, sampling: GroupedSampling) -> MixtureFitTest:
    """Test the window's group counts against the mixture fitted at pi_hat.

    Parameters
    ----------
    counts : array of shape (G,)
        The window's unlabelled examples per group (total N > 0).
    sampling : GroupedSampling
        The sampling model at pi_hat for a window of N examples.

    Returns
    -------
    MixtureFitTest
    """
    g = counts.shape[0]
    df = g - 2
    if df < 1:
        return MixtureFitTest(None, max(df, 0), None)
    residual = counts / counts.sum() - sampling.mixture
    basis, _ = np.linalg.qr(np.column_stack((np.ones(g), sampling.influence)), mode="complete")
    complement = basis[:, 2:]
    z = complement.T @ residual
    cov = complement.T @ sampling.residual_cov() @ complement
    statistic = float(z @ np.linalg.solve(cov, z))
    # chi2.sf's own kernel, without scipy.stats' per-call argument handling (a tenth of a ms)
    return MixtureFitTest(statistic, df, float(special.chdtrc(df, statistic)))

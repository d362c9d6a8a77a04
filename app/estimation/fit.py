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
form is that of the covariance restricted to their complement: r (projected
on the complement) in the inverse of the covariance plus c Q Q', Q an
orthonormal basis of the null space and c > 0, which is the generalised
inverse there (without the complete QR factorisation a basis of the
complement would take).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    # an orthonormal basis (q1, q2) of the null space span{1, b}
    q1 = np.full(g, 1.0 / np.sqrt(g))
    centred = sampling.influence - sampling.influence.mean()
    q2 = centred / np.sqrt(centred @ centred)
    residual = counts / counts.sum() - sampling.mixture
    residual -= q1 * (q1 @ residual) + q2 * (q2 @ residual)
    # S + c (q1 q1' + q2 q2') is invertible and its inverse is S's generalised inverse on
    # the complement (c > 0 at S's scale keeps it conditioned as the complement's block)
    cov = sampling.residual_cov()
    scale = np.trace(cov) / df
    cov += scale * (np.outer(q1, q1) + np.outer(q2, q2))
    statistic = float(residual @ np.linalg.solve(cov, residual))
    # chi2.sf's own kernel, without scipy.stats' per-call argument handling (a tenth of a ms)
    from scipy import special  # on first use: scipy.special is not a start-up import

    return MixtureFitTest(statistic, df, float(special.chdtrc(df, statistic)))

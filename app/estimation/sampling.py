"""First-order sampling error of the grouped mixture, from the window and from the reference.

Let p = u / N be the window's group shares, f1, f0 the reference's group
probabilities (estimated from R1 positives and R0 negatives) and
m(pi) = pi f1 + (1 - pi) f0. Under a pure prior shift, to first order,

    e = p - m(pi)  has covariance
    V = (diag m - m m') / N                       (the window's multinomial)
      + pi^2 (diag f1 - f1 f1') / R1              (the reference's positives)
      + (1 - pi)^2 (diag f0 - f0 f0') / R0        (the reference's negatives),

and the maximum-likelihood prior moves by ``pi_hat - pi = b' e`` with the
influence vector ``b = (d / m) / I``, d = f1 - f0 and I = sum_g d_g^2 / m_g
(linearise L'(pi_hat) = 0 in p, f1 and f0; sum e = 0 makes the three forms of
the derivative agree). Hence

* the variance of pi_hat: ``b' V b = 1 / (N I) + b' V_ref b``, the window's
  part and the reference's part;
* the fitted residual ``p - m(pi_hat) = (Id - d b') e``, whose covariance is
  ``P V P'`` with ``P = Id - d b'``, of rank G - 2 (its null space is spanned
  by the vector of ones and by b), which the goodness-of-fit test uses.

A test that ignores the reference's part over-rejects once the window is not
small against the reference: with N = R the variance of the residual is about
twice the window's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.drift.histograms import FloatArray
from app.estimation.reference import MixtureReference


def multinomial_cov(p: FloatArray) -> FloatArray:
    return np.diag(p) - np.outer(p, p)


@dataclass(frozen=True, eq=False)
class GroupedSampling:
    """The sampling model of one window's group shares at a prior.

    Attributes
    ----------
    mixture : array of shape (G,)
        m = pi f1 + (1 - pi) f0.
    difference : array of shape (G,)
        d = f1 - f0.
    influence : array of shape (G,)
        b = (d / m) / I, the change of pi_hat per unit change of the shares.
    window_cov, reference_cov : arrays of shape (G, G)
        The two parts of V (module docstring).
    """

    mixture: FloatArray
    difference: FloatArray
    influence: FloatArray
    window_cov: FloatArray
    reference_cov: FloatArray

    @classmethod
    def at(cls, reference: MixtureReference, prior: float, n: float) -> GroupedSampling:
        """The sampling model of a window of ``n`` unlabelled examples at ``prior``."""
        f1, f0 = reference.f_positive, reference.f_negative
        d = f1 - f0
        m = f0 + prior * d
        information = float(np.sum(d * d / m))
        return cls(
            mixture=m,
            difference=d,
            influence=d / m / information,
            window_cov=multinomial_cov(m) / n,
            reference_cov=prior**2 * multinomial_cov(f1) / reference.n_positives
            + (1.0 - prior) ** 2 * multinomial_cov(f0) / reference.n_negatives,
        )

    @property
    def window_variance(self) -> float:
        """Variance of pi_hat from the window's sampling: 1 / (N I)."""
        b = self.influence
        return float(b @ self.window_cov @ b)

    @property
    def reference_variance(self) -> float:
        """Variance of pi_hat from the reference's sampling of f1 and f0."""
        b = self.influence
        return float(b @ self.reference_cov @ b)

    def residual_cov(self) -> FloatArray:
        """Covariance ``P V P'`` of the fitted residual p - m(pi_hat), shape (G, G)."""
        projector = np.eye(self.mixture.shape[0]) - np.outer(self.difference, self.influence)
        out: FloatArray = projector @ (self.window_cov + self.reference_cov) @ projector.T
        return out

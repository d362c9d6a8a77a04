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

The reference's error also biases pi_hat (errors in variables). With raw
group frequencies f1, f0 estimated from R1 and R0 examples, the score at the
true prior is sum_g e_g d_hat_g / m_g, e = p - m(pi) as above and d_hat the
estimated f1 - f0 (whose own error e1 - e0 enters e too); its expectation
is (1 - pi) t0 - pi t1 with

    t1 = sum_g f1_g (1 - f1_g) / (R1 m_g),  t0 = sum_g f0_g (1 - f0_g) / (R0 m_g),

so to first order E(pi_hat) - pi = ((1 - pi) t0 - pi t1) / I_hat, with the
observed information I_hat = sum_g d_hat_g^2 / m_g: pi_hat is attenuated by
about t1 / I_hat (-10% at 50 reference positives with a weak classifier,
AUC 0.76, at a reference prior of 0.1). :func:`debiasing_map` subtracts this
bias at pi_hat (measured: -10% becomes +1%).

A test that ignores the reference's part over-rejects once the window is not
small against the reference: with N = R the variance of the residual is about
twice the window's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.drift.histograms import FloatArray
from app.estimation.reference import GroupedClasses


def multinomial_cov(p: FloatArray) -> FloatArray:
    """Covariance of the shares of a multinomial draw of one example: diag p - p p'."""
    out: FloatArray = np.multiply.outer(-p, p)
    out.flat[:: p.shape[0] + 1] += p
    return out


def debiasing_map(reference: GroupedClasses, smoothed: float) -> tuple[float, float]:
    """The affine map ``pi = offset + slope * p`` from a prior p of the smoothed groups.

    It composes the smoothing's map (:attr:`GroupedClasses.smoothing`,
    pi_raw = a0 + p (a1 - a0)) with the errors-in-variables correction of the
    module docstring, pi = pi_raw + (pi_raw (t1 + t0) - t0) / I_hat, whose
    terms are evaluated at the maximum ``smoothed``.

    Returns
    -------
    (offset, slope) : (float, float)
        ``slope`` > 0.
    """
    a0, a1 = reference.smoothing
    f1 = reference.positives / reference.n_positives
    f0 = reference.negatives / reference.n_negatives
    m = reference.f_negative + smoothed * (reference.f_positive - reference.f_negative)
    d = f1 - f0
    information = float(np.sum(d * d / m))
    t1 = float(np.sum(f1 * (1.0 - f1) / m)) / reference.n_positives
    t0 = float(np.sum(f0 * (1.0 - f0) / m)) / reference.n_negatives
    factor = 1.0 + (t1 + t0) / information
    return a0 * factor - t0 / information, (a1 - a0) * factor


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
    def at(cls, reference: GroupedClasses, prior: float, n: float) -> GroupedSampling:
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

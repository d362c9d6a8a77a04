"""Closed-form OPS of MCC, precision and accuracy (docs/outperformance.md, "Closed forms").

The reference classifier of a labeling metric has independent error rates
A, B ~ U[0, 1] (:mod:`app.metrics.ops_labeling`); write x = 1 - B (its true
positive rate) and y = A (its false positive rate), also independent and
uniform. In the coordinates

    q = pi x + (1 - pi) y    (the rate of predicted positives)
    u = x - y                (informedness)

(a map of determinant -1, so areas are kept) these three metrics are worse
than mu exactly where u lies below a curve c(q):

* MCC = sqrt(pi (1 - pi)) u / sqrt(q (1 - q)), so MCC < mu where
  u < mu sqrt(q (1 - q)) / sqrt(pi (1 - pi));
* precision = pi x / q, so precision < mu where u < (mu - pi) q / (pi (1 - pi));
* accuracy = (1 - pi) + (2 pi - 1) q + 2 pi (1 - pi) u, a line as well
  (:func:`accuracy_ops` uses the equivalent, better conditioned form of a sum
  of two scaled uniforms).

The unit square is, for each q in [0, 1], the range L(q) <= u <= U(q) with
L = max(-q / (1 - pi), (q - 1) / pi) and U = min((1 - q) / (1 - pi), q / pi),
so the OPS is the integral over q of clip(c, L, U) - L. Between the points
where c meets one of those four lines (roots of a quadratic) and the kinks
of L and U (q = 1 - pi, q = pi), the integrand is one of 0, U - L or c - L;
each piece is integrated exactly (a line, and sqrt(q (1 - q)), whose
antiderivative is elementary). The result is exact to rounding, which grows
with the scales 1 / pi and 1 / (1 - pi): below 1e-10 for priors in
[1e-6, 1 - 1e-6]. The one-dimensional method of
:mod:`app.metrics.ops_labeling` agrees with it to its own error (below 1e-4).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

Line = tuple[float, float]
"""(d0, d1): the line d0 + d1 q."""


def _square_bounds(prior: float) -> tuple[Line, Line, Line, Line]:
    """The lines of L (below and above q = 1 - pi) and of U (below and above q = pi)."""
    p, n = prior, 1.0 - prior
    return (0.0, -1.0 / n), (-1.0 / p, 1.0 / p), (0.0, 1.0 / p), (1.0 / n, -1.0 / n)


def _crossings(alpha: float, beta: float, k: float, line: Line) -> list[float]:
    """The q in (0, 1) where alpha + beta q + k sqrt(q (1 - q)) may meet ``line`` (every
    root of the squared equation: a spurious one only splits a piece in two)."""
    e0, e1 = alpha - line[0], beta - line[1]
    if k == 0.0:
        return [-e0 / e1] if e1 != 0.0 else []
    # k^2 (q - q^2) = (e0 + e1 q)^2
    a, b, c = e1 * e1 + k * k, 2.0 * e0 * e1 - k * k, e0 * e0
    root = math.sqrt(max(b * b - 4.0 * a * c, 0.0))
    return [(-b - root) / (2.0 * a), (-b + root) / (2.0 * a)]


def _half_circle(q: float) -> float:
    """An antiderivative of sqrt(q (1 - q)) on [0, 1]."""
    return (2.0 * q - 1.0) * math.sqrt(max(q * (1.0 - q), 0.0)) / 4.0 + math.asin(
        min(max(2.0 * q - 1.0, -1.0), 1.0)
    ) / 8.0


def _line_integral(line: Line, q0: float, q1: float) -> float:
    return line[0] * (q1 - q0) + line[1] * (q1 * q1 - q0 * q0) / 2.0


def area_below(alpha: float, beta: float, k: float, prior: float) -> float:
    """Area of the part of the unit square (in (q, u), module docstring) where
    u < alpha + beta q + k sqrt(q (1 - q)), at class prior ``prior`` in (0, 1)."""
    lower_a, lower_b, upper_a, upper_b = _square_bounds(prior)
    cuts = {0.0, 1.0, prior, 1.0 - prior}
    for line in (lower_a, lower_b, upper_a, upper_b):
        cuts.update(q for q in _crossings(alpha, beta, k, line) if 0.0 < q < 1.0)
    points = sorted(cuts)
    area = 0.0
    for q0, q1 in itertools.pairwise(points):
        mid = 0.5 * (q0 + q1)
        lower = lower_a if mid < 1.0 - prior else lower_b
        upper = upper_a if mid < prior else upper_b
        curve = alpha + beta * mid + k * math.sqrt(mid * (1.0 - mid))
        if curve <= lower[0] + lower[1] * mid:
            continue
        below = _line_integral(lower, q0, q1)
        if curve >= upper[0] + upper[1] * mid:
            area += _line_integral(upper, q0, q1) - below
        else:
            area += (
                alpha * (q1 - q0)
                + beta * (q1 * q1 - q0 * q0) / 2.0
                + k * (_half_circle(q1) - _half_circle(q0))
                - below
            )
    return min(max(area, 0.0), 1.0)


def mcc_ops(value: float, prior: float) -> float:
    """OPS of MCC ``value`` (in [-1, 1]) at ``prior`` in (0, 1): Pr{MCC(pi, A, B) < mu}.

    Examples
    --------
    >>> round(mcc_ops(0.0, 0.3), 12)  # MCC's sign is u's: the median is 0
    0.5
    """
    return area_below(0.0, 0.0, value / math.sqrt(prior * (1.0 - prior)), prior)


def precision_ops(value: float, prior: float) -> float:
    """OPS of precision ``value`` (in [0, 1]) at ``prior`` in (0, 1).

    Examples
    --------
    >>> round(precision_ops(0.1, 0.1), 12)  # the prior is the median precision
    0.5
    """
    return area_below(0.0, (value - prior) / (prior * (1.0 - prior)), 0.0, prior)


def accuracy_ops(value: float, prior: float) -> float:
    """OPS of accuracy ``value`` (in [0, 1]) at ``prior`` in (0, 1).

    Accuracy is 1 - (1 - pi) A - pi B, so it is worse than mu where the sum of
    the two scaled uniforms (1 - pi) A and pi B exceeds c = 1 - mu: one minus
    the sum's distribution function at c, piecewise quadratic, linear in its
    middle part. (The same area as through :func:`area_below`, whose scales
    1 / (pi (1 - pi)) lose digits at priors beyond 1e-6.)

    Examples
    --------
    >>> round(accuracy_ops(0.5, 0.2), 12)  # the median accuracy is 1/2 at any prior
    0.5
    """
    wide, narrow, c = max(prior, 1.0 - prior), min(prior, 1.0 - prior), 1.0 - value
    if c <= 0.0:
        return 1.0
    if c <= narrow:
        return 1.0 - c * c / (2.0 * wide * narrow)
    if c <= wide:
        return 1.0 - (c - narrow / 2.0) / wide
    if c < 1.0:
        return (1.0 - c) ** 2 / (2.0 * wide * narrow)
    return 0.0


CLOSED_FORMS: dict[str, Callable[[float, float], float]] = {
    "mcc": mcc_ops,
    "precision": precision_ops,
    "accuracy": accuracy_ops,
}
"""Labeling metrics whose OPS (value, prior) is computed in closed form here."""

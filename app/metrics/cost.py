"""Cost-sensitive metrics (docs/cost.md, "Weighted accuracy").

Lombardo, Casoli, Cingolani, Oshodi, Zanatta, "Cost-Sensitive Evaluation for
Binary Classifiers" (arXiv:2510.22016). Unit classification costs
``c_tp < c_fn`` and ``c_tn < c_fp`` give the shifted costs
``C_FN = c_fn - c_tp``, ``C_FP = c_fp - c_tn`` and the cost ratio
``r_C = C_FN / (C_FN + C_FP)``. Weighted accuracy

    WA(w) = (w·TP + (1−w)·TN) / (w·P + (1−w)·N)

is the accuracy of the matrix whose positives weigh ``w`` and negatives
``1 − w``; at ``w = r_C`` it equals ``1 − (TCC − TCC_min)/(TCC_max − TCC_min)``,
so maximising WA minimises the total classification cost.

Undefined values
----------------
WA is undefined when no example carries weight (``w·P + (1−w)·N = 0``: an empty
matrix, ``w = 0`` without negatives or ``w = 1`` without positives). The
functions here return ``nan`` there, like the labeling registry; the public
mappings turn it into ``None`` with :data:`WEIGHTED_ACCURACY_UNDEFINED` as the
reason (:mod:`app.metrics.undefined`). Invalid input (negative counts, ``w``
outside [0, 1], costs in the wrong order, ...) raises
:class:`~app.errors.InvalidInput` naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.errors import InvalidInput
from app.metrics.labeling import Array, ArrayLike, accuracy
from app.metrics.validation import check_count, check_probability

__all__ = [
    "WEIGHTED_ACCURACY_UNDEFINED",
    "UnitCosts",
    "beta_from_moments",
    "expected_weighted_accuracy",
    "target_weight",
    "weight_range",
    "weighted_accuracy",
    "weighted_accuracy_from_counts",
]

WEIGHTED_ACCURACY_UNDEFINED = "no example carries weight (w·P + (1−w)·N = 0)"
"""Reason reported when a weighted accuracy is ``None``."""

WEIGHT_RANGE_A = (0.5, 0.75)
"""Admissible fraction ``a`` misclassified by the emblematic bad models."""

_A_FEASIBLE_MAX = (math.sqrt(5.0) - 1.0) / 2.0
"""Largest ``a`` for which some weight satisfies the emblematic ranking."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitCosts:
    """Unit classification costs of the four outcomes (any currency, may be negative).

    Parameters
    ----------
    c_tp, c_fp, c_fn, c_tn : float
        Cost of one true positive, false positive, false negative, true
        negative. A gain is a negative cost. An error must cost more than the
        correct decision on the same example: ``c_tp < c_fn`` and ``c_tn < c_fp``.

    Examples
    --------
    >>> costs = UnitCosts(c_tp=1.0, c_fp=3.0, c_fn=10.0, c_tn=0.0)
    >>> costs.shifted_fn, costs.shifted_fp, costs.cost_ratio
    (9.0, 3.0, 0.75)
    """

    c_tp: float
    c_fp: float
    c_fn: float
    c_tn: float

    def __post_init__(self) -> None:
        for name in ("c_tp", "c_fp", "c_fn", "c_tn"):
            value = getattr(self, name)
            try:
                ok = math.isfinite(float(value))
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise InvalidInput(name, f"is {value!r}, must be a finite number")
        if not self.c_tp < self.c_fn:
            raise InvalidInput(
                "c_fn", f"is {self.c_fn!r}, must exceed c_tp = {self.c_tp!r} (c_TP < c_FN)"
            )
        if not self.c_tn < self.c_fp:
            raise InvalidInput(
                "c_fp", f"is {self.c_fp!r}, must exceed c_tn = {self.c_tn!r} (c_TN < c_FP)"
            )

    @property
    def shifted_fn(self) -> float:
        """C_FN = c_fn − c_tp > 0: extra cost of missing a positive."""
        return float(self.c_fn) - float(self.c_tp)

    @property
    def shifted_fp(self) -> float:
        """C_FP = c_fp − c_tn > 0: extra cost of flagging a negative."""
        return float(self.c_fp) - float(self.c_tn)

    @property
    def cost_ratio(self) -> float:
        """r_C = C_FN / (C_FN + C_FP) in (0, 1): the WA weight that tracks total cost."""
        return self.shifted_fn / (self.shifted_fn + self.shifted_fp)

    def total_cost(self, tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
        """TCC = c_tp·TP + c_fp·FP + c_fn·FN + c_tn·TN = C_FN·FN + C_FP·FP + TCC_min.

        Counts broadcast; element i of the result is the cost of matrix i.
        """
        t, f, n_, t_n = _counts(tp, fp, fn, tn)
        return np.asarray(
            self.c_tp * t + self.c_fp * f + self.c_fn * n_ + self.c_tn * t_n, dtype=np.float64
        )

    def min_total_cost(self, positives: ArrayLike, negatives: ArrayLike) -> Array:
        """TCC_min = c_tp·P + c_tn·N: the cost of the perfect classifier."""
        p = check_count("positives", positives)
        n = check_count("negatives", negatives)
        return np.asarray(self.c_tp * p + self.c_tn * n, dtype=np.float64)

    def max_total_cost(self, positives: ArrayLike, negatives: ArrayLike) -> Array:
        """TCC_max = c_fn·P + c_fp·N: the cost of the classifier that is always wrong.

        With shifted costs (c_tp = c_tn = 0) this is C_FN·P + C_FP·N (the form
        often printed, docs/cost.md); in general ``TCC_max − TCC_min = C_FN·P + C_FP·N``.
        """
        p = check_count("positives", positives)
        n = check_count("negatives", negatives)
        return np.asarray(self.c_fn * p + self.c_fp * n, dtype=np.float64)

    def normalised_cost(self, tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike) -> Array:
        """(TCC − TCC_min) / (TCC_max − TCC_min) in [0, 1]; nan for an empty matrix.

        Equals ``1 − WA(r_C)`` for the same counts.
        """
        t, f, n_, t_n = _counts(tp, fp, fn, tn)
        excess = self.shifted_fn * n_ + self.shifted_fp * f
        span = self.shifted_fn * (t + n_) + self.shifted_fp * (f + t_n)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = excess / span
        return np.where(span == 0.0, np.nan, out)


def _counts(tp: object, fp: object, fn: object, tn: object) -> tuple[Array, Array, Array, Array]:
    return (
        check_count("tp", tp),
        check_count("fp", fp),
        check_count("fn", fn),
        check_count("tn", tn),
    )


def weighted_accuracy_from_counts(
    tp: ArrayLike, fp: ArrayLike, fn: ArrayLike, tn: ArrayLike, w: ArrayLike
) -> Array:
    """Vectorised WA(w) of valid counts; ``nan`` where no example carries weight.

    WA(w) is the accuracy of the matrix whose positives weigh ``w`` and whose
    negatives weigh ``1 − w``, so it reuses the registry's accuracy. Trusts its
    input (counts >= 0, w in [0, 1]); :func:`weighted_accuracy` validates.

    Parameters
    ----------
    tp, fp, fn, tn : float or ndarray
        Confusion counts; broadcast together with ``w``.
    w : float or ndarray
        Weight of the positive class.

    Returns
    -------
    ndarray of float64
        Element i is WA of matrix i at weight i.
    """
    w_a = np.asarray(w, dtype=np.float64)
    return accuracy(
        w_a * np.asarray(tp, dtype=np.float64),
        (1.0 - w_a) * np.asarray(fp, dtype=np.float64),
        w_a * np.asarray(fn, dtype=np.float64),
        (1.0 - w_a) * np.asarray(tn, dtype=np.float64),
    )


def weighted_accuracy(tp: float, fp: float, fn: float, tn: float, w: float) -> float:
    """Weighted accuracy WA(w) = (w·TP + (1−w)·TN) / (w·P + (1−w)·N).

    Parameters
    ----------
    tp, fp, fn, tn : float
        Confusion counts (non-negative, may be fractional).
    w : float
        Weight of the positive class in [0, 1]; ``w = r_C`` (the cost ratio)
        ranks classifiers as total cost does, ``w = 1/2`` gives accuracy.

    Returns
    -------
    float
        WA in [0, 1], ``nan`` when undefined (:data:`WEIGHTED_ACCURACY_UNDEFINED`).

    Raises
    ------
    InvalidInput
        A count negative or not finite (field ``tp``/``fp``/``fn``/``tn``), or
        ``w`` outside [0, 1] (field ``w``).

    Examples
    --------
    >>> weighted_accuracy(8, 2, 2, 88, 0.5)  # accuracy
    0.96
    >>> round(weighted_accuracy(8, 2, 2, 88, 0.9), 4)
    0.8889
    """
    t, f, n_, t_n = _counts(tp, fp, fn, tn)
    weight = check_probability("w", w, open_interval=False)
    return float(weighted_accuracy_from_counts(t, f, n_, t_n, weight))


def _check_shape(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(name, f"is {value!r}, must be a number") from None
    if not (math.isfinite(v) and v > 0.0):
        raise InvalidInput(name, f"is {value!r}, must be a finite number > 0")
    return v


_QUANTILE_BREAKS = (1e-9, 1e-3, 0.05, 0.5, 0.95, 1 - 1e-3, 1 - 1e-9)
"""Quantiles of w whose images split the EWA integral where its integrand drops."""

_LOGIT_SPAN = 40.0
"""The EWA integrand decays like exp(−|v|): |v| > 40 contributes below 1e-17."""


def _expected_positive_share(positives: float, negatives: float, a: float, b: float) -> float:
    """E[λ(w)] for w ~ Beta(a, b), λ(w) = wP / (wP + (1−w)N), with P, N > 0.

    λ increases with w and logit λ(w) = logit w − ℓ with ℓ = ln(N/P), so

        E[λ] = ∫₀¹ Pr(λ > s) ds = ∫ Pr(logit w > v + ℓ) · σ(v)σ(−v) dv

    over the real line (s = σ(v)). The survival function is the regularised
    incomplete beta function, which scipy evaluates accurately for every a,
    b > 0; the integrand is smooth and decays like exp(−|v|) whatever a, b and
    P/N, so adaptive quadrature on [−40, 40], split where the quantiles of w
    land, is exact to ~1e-13. (The closed form a/(a+b)·2F1(1, b; a+b+1; 1 − N/P)
    agrees where scipy's hyp2f1 is finite; it returns nan for large a, b near
    the branch point, hence the integral.)
    """
    # on first use: scipy.special is not a start-up import
    from scipy.special import betainc, betaincc, betaincinv, expit

    shift = math.log(negatives) - math.log(positives)

    def exceed(v: float) -> float:
        t = v + shift
        if t <= 0.0:
            return float(betaincc(a, b, expit(t)))
        return float(betainc(b, a, expit(-t)))

    def integrand(v: float) -> float:
        return exceed(v) * float(expit(v)) * float(expit(-v))

    q = np.asarray(betaincinv(a, b, np.asarray(_QUANTILE_BREAKS)), dtype=np.float64)
    with np.errstate(divide="ignore"):
        breaks = np.log(q) - np.log1p(-q) - shift
    breaks = np.unique(np.concatenate([breaks, [0.0]]))
    breaks = breaks[np.abs(breaks) < _LOGIT_SPAN]
    from scipy.integrate import quad  # on first use: scipy.integrate pulls in optimize

    value, _ = quad(
        integrand, -_LOGIT_SPAN, _LOGIT_SPAN, points=breaks, epsabs=1e-14, epsrel=1e-12, limit=500
    )
    return min(1.0, max(0.0, float(value)))


def expected_weighted_accuracy(
    tp: float, fp: float, fn: float, tn: float, a: float, b: float
) -> float:
    """EWA = ∫ WA(w)·u(w) dw with u the Beta(a, b) density: exact, for any a, b > 0.

    WA(w) = λ(w)·TPR + (1 − λ(w))·TNR with λ(w) = wP / (wP + (1−w)N), so
    EWA = E[λ]·TPR + (1 − E[λ])·TNR. E[λ] is one smooth integral over the
    logit line of the incomplete beta function (see
    :func:`_expected_positive_share`): exact to about 1e-12 for any a, b > 0,
    including a, b < 1 (density unbounded at an end point), large a, b
    (concentrated weight) and extreme class imbalance. About 3 ms a call.

    Parameters
    ----------
    tp, fp, fn, tn : float
        Confusion counts (non-negative).
    a, b : float
        Shape parameters (> 0) of the Beta distribution of the weight ``w`` of
        the positive class (mean a/(a+b)); :func:`beta_from_moments` builds them
        from a mean and a variance. The authors' code places the Beta on
        ``c = 1 − w`` instead: swap ``a`` and ``b`` to reproduce it.

    Returns
    -------
    float
        EWA in [0, 1]. With one class only, WA(w) is that class's rate for
        almost every w and so is EWA; ``nan`` for an empty matrix.

    Examples
    --------
    >>> round(expected_weighted_accuracy(8, 2, 2, 88, 1.0, 1.0), 6)
    0.945069
    >>> round(expected_weighted_accuracy(8, 2, 2, 88, 0.5, 0.5), 6)
    0.933333
    """
    t, f, n_, t_n = (float(x) for x in _counts(tp, fp, fn, tn))
    a_ = _check_shape("a", a)
    b_ = _check_shape("b", b)
    positives, negatives = t + n_, f + t_n
    if positives == 0.0 and negatives == 0.0:
        return float("nan")
    if positives == 0.0:
        return t_n / negatives
    if negatives == 0.0:
        return t / positives
    share = _expected_positive_share(positives, negatives, a_, b_)
    return share * (t / positives) + (1.0 - share) * (t_n / negatives)


def beta_from_moments(mean: float, variance: float) -> tuple[float, float]:
    """Beta(a, b) with the given mean m and variance v (moment matching).

    a = m²(1−m)/v − m, b = a(1−m)/m. Feasible when 0 < m < 1 and
    0 < v < m(1−m) (a Beta variance is always below m(1−m)).

    Examples
    --------
    >>> beta_from_moments(0.5, 1 / 12)  # the uniform distribution
    (1.0, 1.0)
    """
    m = check_probability("mean", mean)
    try:
        v = float(variance)
    except (TypeError, ValueError):
        raise InvalidInput("variance", f"is {variance!r}, must be a number") from None
    bound = m * (1.0 - m)
    if not (math.isfinite(v) and 0.0 < v < bound):
        raise InvalidInput(
            "variance", f"is {variance!r}, must be in (0, m(1−m)) = (0, {bound!r}) for mean {m!r}"
        )
    a = m * m * (1.0 - m) / v - m
    return a, a * (1.0 - m) / m


def target_weight(cost_ratio: float, prior: float, target_prior: float) -> float:
    """The WA weight that evaluates data of prior π as if its prior were π_t.

    w_t = R₊·r_C / (R₊·r_C + R₋·(1 − r_C)) with R₊ = π_t/π, R₋ = (1−π_t)/(1−π):
    WA(w_t) on the development data equals WA(r_C) on the data resampled to
    the target prior (positives counted R₊ times, negatives R₋ times).

    Parameters
    ----------
    cost_ratio : float
        r_C in [0, 1].
    prior : float
        Prevalence π of the data the counts come from, in (0, 1).
    target_prior : float
        Prevalence π_t of the deployment, in (0, 1).

    Examples
    --------
    >>> target_weight(0.5, 0.1, 0.1)
    0.5
    >>> round(target_weight(0.5, 0.5, 0.1), 6)  # fewer positives in deployment
    0.1
    """
    r = check_probability("cost_ratio", cost_ratio, open_interval=False)
    pi = check_probability("prior", prior)
    pi_t = check_probability("target_prior", target_prior)
    up = pi_t / pi * r
    down = (1.0 - pi_t) / (1.0 - pi) * (1.0 - r)
    return up / (up + down)


def weight_range(positives: float, negatives: float, a: float) -> tuple[float, float]:
    """Weights w consistent with ranking the emblematic models (no unit costs needed).

    The emblematic models on data with P positives and N negatives:
    ``M+`` predicts every example positive, ``M−`` every example negative,
    ``Mbad`` misclassifies a fraction ``a`` of each class, ``Mbad−`` a fraction
    ``a`` of the negatives only and ``Mbad+`` a fraction ``a`` of the positives
    only. The ranking ``WA(M+) <= WA(Mbad) <= WA(M−) <= WA(Mbad−) <= WA(Mbad+)``
    holds exactly for

        [1 + P/(a·N)]⁻¹  <=  w  <=  [1 + a·P/((1−a)·N)]⁻¹.

    Parameters
    ----------
    positives, negatives : float
        P > 0 and N > 0 of the data set the weight applies to.
    a : float
        Fraction misclassified by the bad models, in [0.5, 0.75]. The range
        is empty when a > (√5 − 1)/2 ≈ 0.618 (then no weight satisfies the
        ranking and ``InvalidInput('a')`` is raised).

    Returns
    -------
    (lower, upper) : tuple of float
        Bounds of the admissible weights, ``lower <= upper``.

    Examples
    --------
    >>> lo, hi = weight_range(100, 900, 0.5)
    >>> round(lo, 4), round(hi, 4)
    (0.8182, 0.9)
    """
    p = float(check_count("positives", positives))
    n = float(check_count("negatives", negatives))
    if p == 0.0:
        raise InvalidInput("positives", "must be > 0")
    if n == 0.0:
        raise InvalidInput("negatives", "must be > 0")
    try:
        a_ = float(a)
    except (TypeError, ValueError):
        raise InvalidInput("a", f"is {a!r}, must be a number") from None
    lo_a, hi_a = WEIGHT_RANGE_A
    if not lo_a <= a_ <= hi_a:
        raise InvalidInput("a", f"is {a!r}, must be in [{lo_a}, {hi_a}]")
    if a_ > _A_FEASIBLE_MAX:
        raise InvalidInput(
            "a",
            f"is {a!r}: for a > (√5−1)/2 ≈ {_A_FEASIBLE_MAX:.4f} no weight satisfies "
            "the emblematic ranking (lower bound above upper bound)",
        )
    lower = 1.0 / (1.0 + p / (a_ * n))
    upper = 1.0 / (1.0 + a_ * p / ((1.0 - a_) * n))
    return lower, max(lower, upper)

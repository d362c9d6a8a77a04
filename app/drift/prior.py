"""Prior shift: has the window's class mix pi moved away from the reference's?

Both the window and the reference are finite samples, so the test is a
two-sample test of proportions on the 2x2 table of label counts::

                 positives   negatives
    reference    P_r         N_r
    window       P_w         N_w

Pearson's chi-square without continuity correction (the square of the pooled
two-proportion z statistic, 1 degree of freedom) when every expected cell
count is at least 5; Fisher's exact test otherwise, whose size never exceeds
alpha. Testing the window against the reference prior *as if it were known*
would ignore the reference's own sampling error: its variance is
``pi(1-pi)/n_r``, so the one-sample statistic is too large by the factor
``1 + n_w/n_r`` and its false-alarm rate exceeds alpha (with a reference of 5
windows, about 0.017 instead of 0.01).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.drift.settings import MIN_EXPECTED_COUNT, DriftSettings
from app.metrics.undefined import to_optional
from app.statuses import DriftStatus


@dataclass(frozen=True, slots=True)
class PriorShiftTest:
    """Result of the prior-shift test of one window against its reference.

    ``status`` is ``"ok"`` or ``"insufficient_data"`` (the reference has fewer
    than ``min_class_count`` of a class, or the window is empty); then
    ``p_value``, ``effect`` and ``flag`` are ``None``.

    Attributes
    ----------
    reference_prior, window_prior : float
        P_r/n_r and P_w/n_w (nan when undefined).
    change : float
        ``window_prior - reference_prior``.
    relative_change : float
        ``change / reference_prior``.
    effect : float | None
        ``|change|``, compared with ``min_prior_effect``.
    test : str | None
        ``"chi2"`` (Pearson, 1 df) or ``"fisher"`` (exact, two-sided).
    statistic : float | None
        The chi-square statistic (``None`` for Fisher's test).
    p_value : float | None
        Two-sided p-value of "same prior in window and reference".
    flag : bool | None
        ``p_value < alpha and effect > min_prior_effect``.
    """

    status: str
    reference_positives: float
    reference_n: float
    window_positives: float
    window_n: float
    reference_prior: float
    window_prior: float
    change: float
    relative_change: float
    effect: float | None
    test: str | None
    statistic: float | None
    p_value: float | None
    flag: bool | None

    def to_dict(self) -> dict[str, Any]:
        """JSON shape: ``{"status", "flag", "p_value", "effect", ...}`` (nan -> None)."""
        return {
            "status": self.status,
            "flag": self.flag,
            "p_value": self.p_value,
            "effect": self.effect,
            "test": self.test,
            "statistic": self.statistic,
            "reference_prior": to_optional(self.reference_prior),
            "window_prior": to_optional(self.window_prior),
            "change": to_optional(self.change),
            "relative_change": to_optional(self.relative_change),
            "reference": {"positives": self.reference_positives, "n": self.reference_n},
            "window": {"positives": self.window_positives, "n": self.window_n},
        }


def _ratio(num: float, den: float) -> float:
    return num / den if den else float("nan")


def two_proportion_test(
    reference_positives: float,
    reference_negatives: float,
    window_positives: float,
    window_negatives: float,
) -> tuple[str, float | None, float]:
    """Two-sided test that two samples share one proportion of positives.

    Parameters
    ----------
    reference_positives, reference_negatives, window_positives, window_negatives : float
        The cells of the 2x2 table (whole numbers); each row and each column
        must have a positive total.

    Returns
    -------
    test : str
        ``"chi2"`` or ``"fisher"``.
    statistic : float | None
        Pearson's chi-square (1 df), ``None`` for Fisher's exact test.
    p_value : float

    Examples
    --------
    >>> test, stat, p = two_proportion_test(100, 900, 60, 940)
    >>> test, round(stat, 3), round(p, 4)
    ('chi2', 10.87, 0.001)
    """
    a, b, c, d = reference_positives, reference_negatives, window_positives, window_negatives
    n_r, n_w, pos, neg = a + b, c + d, a + c, b + d
    total = n_r + n_w
    if min(n_r, n_w) * min(pos, neg) / total >= MIN_EXPECTED_COUNT:
        statistic = total * (a * d - b * c) ** 2 / (n_r * n_w * pos * neg)
        from scipy import special  # on first use: scipy.special is not a start-up import

        return "chi2", statistic, float(special.chdtrc(1, statistic))  # chi-square upper tail
    return "fisher", None, fisher_exact_p_value(a, b, c, d)


FISHER_TAIL_TERMS = 1_000
"""Terms of the hypergeometric law summed on each side of its mode, besides 40
standard deviations: the terms further out are below float64 resolution."""


def fisher_exact_p_value(a: float, b: float, c: float, d: float) -> float:
    """Two-sided p-value of Fisher's exact test of the 2x2 table [[a, b], [c, d]].

    The total probability (hypergeometric, margins fixed) of the tables no
    more probable than the observed one, as ``scipy.stats.fisher_exact``
    computes it, in a time that does not grow with the counts (scipy's does:
    90 s at 10^12 examples, and a window may hold 2^53). The table is turned
    so that ``a`` is its cell of smallest expected count; the probabilities of
    the values of ``a`` within :data:`FISHER_TAIL_TERMS` plus 40 standard
    deviations of the mode follow from the ratio of neighbours, and every
    value further out counts as probability 0.

    >>> round(fisher_exact_p_value(3, 1, 1, 3), 4)
    0.4857
    """
    expected = ((a + b) * (a + c), (a + b) * (b + d), (c + d) * (a + c), (c + d) * (b + d))
    turned = ((a, b, c, d), (b, a, d, c), (c, d, a, b), (d, c, b, a))[int(np.argmin(expected))]
    observed, b, c, d = turned
    rows, cols, n = observed + b, observed + c, observed + b + c + d
    mode = math.floor((rows + 1) * (cols + 1) / (n + 2))
    span = FISHER_TAIL_TERMS + math.ceil(40.0 * math.sqrt(rows * cols / n))
    low, high = max(0, mode - span), min(rows, cols, mode + span)
    k = np.arange(low, high, dtype=np.float64)
    log_ratio = np.log((rows - k) * (cols - k)) - np.log((k + 1) * (n - rows - cols + k + 1))
    log_pmf = np.concatenate(([0.0], np.cumsum(log_ratio)))
    pmf = np.exp(log_pmf - log_pmf.max())
    at = pmf[int(observed - low)] if low <= observed <= high else 0.0
    tie = 1.0 + 1e-7  # scipy's relative tolerance for tables as probable as the observed
    return min(1.0, float(pmf[pmf <= at * tie].sum() / pmf.sum()))


def prior_shift_test(
    reference_positives: float,
    reference_negatives: float,
    window_positives: float,
    window_negatives: float,
    settings: DriftSettings,
) -> PriorShiftTest:
    """Test whether the window's prior differs from the reference prior.

    Parameters
    ----------
    reference_positives, reference_negatives : float
        P_r and N_r, label counts of the reference period.
    window_positives, window_negatives : float
        P_w and N_w, label counts of the window.
    settings : DriftSettings
        ``alpha``, ``min_prior_effect`` and ``min_class_count`` are used.

    Returns
    -------
    PriorShiftTest

    Examples
    --------
    >>> r = prior_shift_test(5000, 45000, 200, 9800, DriftSettings())
    >>> r.flag, round(r.change, 3)
    (True, -0.08)
    """
    n_r = reference_positives + reference_negatives
    n_w = window_positives + window_negatives
    pi_r, pi_w = _ratio(reference_positives, n_r), _ratio(window_positives, n_w)
    change = pi_w - pi_r
    common = (
        float(reference_positives),
        float(n_r),
        float(window_positives),
        float(n_w),
        pi_r,
        pi_w,
        change,
        _ratio(change, pi_r),
    )
    if min(reference_positives, reference_negatives) < settings.min_class_count or n_w == 0:
        return PriorShiftTest(DriftStatus.INSUFFICIENT_DATA, *common, None, None, None, None, None)
    test, statistic, p_value = two_proportion_test(
        reference_positives, reference_negatives, window_positives, window_negatives
    )
    effect = abs(change)
    flag = p_value < settings.alpha and effect > settings.min_prior_effect
    return PriorShiftTest(DriftStatus.OK, *common, effect, test, statistic, p_value, flag)

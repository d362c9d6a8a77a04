"""Probability metrics from additive sums, and the population stability index.

Brier score, log loss and the mean score per class are means of per-example
terms, so a window stores their sums (:class:`ProbabilitySums`) and merges
batches and windows by adding them (spec section 4).

The Python client sums with its own copy of :class:`ProbabilitySums`
(priorwatch_client.sums): change both, tests/unit/client/test_parity.py holds
them equal bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.errors import InvalidInput
from app.metrics.validation import check_scores_labels

LOG_LOSS_EPS = 1e-15
"""Scores are clipped to [LOG_LOSS_EPS, 1 − LOG_LOSS_EPS] inside the log loss."""
LOG_LOSS_MAX = -math.log(LOG_LOSS_EPS)
"""Largest log loss of one example (about 34.54): the actual class given LOG_LOSS_EPS."""
_LOG_LOSS_MIN = -math.log(1.0 - LOG_LOSS_EPS)
"""Smallest log loss of one example (about 1.1e-15): the actual class given 1 − LOG_LOSS_EPS."""
_TANGENT = math.e * LOG_LOSS_EPS
"""Where the tangent to −ln q through (0, LOG_LOSS_MAX) touches it (:func:`_log_loss_floor`)."""
SUM_TOLERANCE = 1e-9
"""Slack of :func:`probability_sum_bounds` for rounding: on each class's mean
probability of its actual class, and per example (relative to the largest term)."""


@dataclass(frozen=True, slots=True)
class ProbabilitySums:
    """Additive sums over examples (score p_i, label y_i in {0, 1}).

    Attributes
    ----------
    positives, negatives : float
        Number of examples with y = 1 / y = 0.
    brier_sum : float
        Σ (y_i − p_i)².
    log_loss_sum : float
        Σ −[y_i ln p_i + (1 − y_i) ln(1 − p_i)], p clipped to
        [LOG_LOSS_EPS, 1 − LOG_LOSS_EPS].
    score_sum_positive, score_sum_negative : float
        Σ p_i over the positives / over the negatives.
    """

    positives: float
    negatives: float
    brier_sum: float
    log_loss_sum: float
    score_sum_positive: float
    score_sum_negative: float

    @classmethod
    def from_predictions(cls, scores: Any, labels: Any) -> ProbabilitySums:
        """The sums of one batch of scores in [0, 1] and 0/1 labels.

        >>> ProbabilitySums.from_predictions([0.8, 0.4], [1, 0]).brier_sum
        0.2
        """
        s, y = check_scores_labels(scores, labels)
        one_minus = 1.0 - s
        p_true = np.where(y, s, one_minus)  # probability given to the actual class
        miss = np.where(y, one_minus, s)  # |y - s|, the root of the Brier term
        # clipping p or p_true to [eps, 1 − eps] is the same; p_true keeps 1e-15 exact
        np.clip(p_true, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS, out=p_true)
        log_loss_sum = -float(np.sum(np.log(p_true, out=p_true)))
        score_sum_positive = float(np.sum(s, where=y))
        positives = float(np.count_nonzero(y))
        return cls(
            positives=positives,
            negatives=float(s.size) - positives,
            # not np.dot: a BLAS call wakes OpenBLAS threads that then spin
            brier_sum=float(np.sum(np.square(miss, out=miss))),
            log_loss_sum=log_loss_sum,
            score_sum_positive=score_sum_positive,
            score_sum_negative=float(np.sum(s)) - score_sum_positive,
        )

    @property
    def n(self) -> float:
        return self.positives + self.negatives

    def as_array(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The six sums in field order, so that ``ProbabilitySums(*a)`` rebuilds them.

        >>> ProbabilitySums(1.0, 1.0, 0.2, 0.7, 0.8, 0.4).as_array().tolist()
        [1.0, 1.0, 0.2, 0.7, 0.8, 0.4]
        """
        # the fields named, not dataclasses.astuple: that deep-copies each value
        # (about 70 us, once per stored batch)
        return np.array(
            (
                self.positives,
                self.negatives,
                self.brier_sum,
                self.log_loss_sum,
                self.score_sum_positive,
                self.score_sum_negative,
            ),
            dtype=np.float64,
        )

    def __add__(self, other: ProbabilitySums) -> ProbabilitySums:
        return ProbabilitySums(
            self.positives + other.positives,
            self.negatives + other.negatives,
            self.brier_sum + other.brier_sum,
            self.log_loss_sum + other.log_loss_sum,
            self.score_sum_positive + other.score_sum_positive,
            self.score_sum_negative + other.score_sum_negative,
        )


@dataclass(frozen=True, slots=True)
class SumBounds:
    """The ranges of ``brier_sum`` and ``log_loss_sum`` that examples with given class
    counts and score sums allow (:func:`probability_sum_bounds`)."""

    brier: tuple[float, float]
    log_loss: tuple[float, float]


def _log_loss_floor(q: float) -> float:
    """Largest convex function below the clipped loss −ln clip(q): the tangent line
    from (0, LOG_LOSS_MAX) below :data:`_TANGENT`, the loss itself above (the
    clip makes the loss flat, not convex, below LOG_LOSS_EPS)."""
    if q < _TANGENT:
        return LOG_LOSS_MAX - q / _TANGENT
    return -math.log(min(q, 1.0 - LOG_LOSS_EPS))


def _log_loss_ceiling(q: float) -> float:
    """Smallest concave function above the clipped loss: flat at LOG_LOSS_MAX up to
    LOG_LOSS_EPS, then the chord to (1, its minimum)."""
    if q <= LOG_LOSS_EPS:
        return LOG_LOSS_MAX
    return LOG_LOSS_MAX - (q - LOG_LOSS_EPS) * (LOG_LOSS_MAX - _LOG_LOSS_MIN) / (1.0 - LOG_LOSS_EPS)


def probability_sum_bounds(
    positives: float,
    negatives: float,
    score_sum_positive: float,
    score_sum_negative: float,
    *,
    tolerance: float = SUM_TOLERANCE,
) -> SumBounds:
    """What ``brier_sum`` and ``log_loss_sum`` can be, given the class counts and score sums.

    Each example gives its actual class a probability q (p for a positive,
    1 − p for a negative); a class of c examples has the mean m of its q
    (``score_sum_positive / positives``, ``1 − score_sum_negative / negatives``).
    Its Brier terms (1 − q)² are convex and at most 1 − q, so they sum to
    between c (1 − m)² and c (1 − m). Its log loss terms −ln clip(q) lie
    between a convex function below them and a concave one above
    (:func:`_log_loss_floor`, :func:`_log_loss_ceiling`), so by Jensen's
    inequality they sum to between c floor(m) and c ceiling(m): at most
    LOG_LOSS_MAX per example, and near 0 only when q is near 1. A class
    without examples adds nothing. ``tolerance`` widens every range for
    rounding: m moves by it, and the ends by it per example (times
    LOG_LOSS_MAX for the log loss).

    Examples
    --------
    >>> b = probability_sum_bounds(2, 0, 1.0, 0.0)  # two positives, scores summing to 1
    >>> [round(v, 6) for v in b.brier], [round(v, 4) for v in b.log_loss]
    ([0.5, 1.0], [1.3863, 34.5388])
    """
    brier = [0.0, 0.0]
    log_loss = [0.0, 0.0]
    for count, mean in (
        (positives, score_sum_positive / positives if positives > 0 else 0.0),
        (negatives, 1.0 - score_sum_negative / negatives if negatives > 0 else 0.0),
    ):
        if count <= 0:
            continue
        high, low = min(1.0, mean + tolerance), max(0.0, mean - tolerance)
        brier[0] += count * (1.0 - high) ** 2
        brier[1] += count * (1.0 - low)
        log_loss[0] += count * _log_loss_floor(high)
        log_loss[1] += count * _log_loss_ceiling(low)
    slack = tolerance * (positives + negatives)
    return SumBounds(
        brier=(brier[0] - slack, brier[1] + slack),
        log_loss=(log_loss[0] - slack * LOG_LOSS_MAX, log_loss[1] + slack * LOG_LOSS_MAX),
    )


def _mean(total: float, count: float) -> float:
    return total / count if count > 0 else float("nan")


def brier_score_loss(sums: ProbabilitySums) -> float:
    """Brier score, mean (y − p)², in [0, 1]; lower is better (nan when empty)."""
    return _mean(sums.brier_sum, sums.n)


def log_loss(sums: ProbabilitySums) -> float:
    """Log loss, mean −[y ln p + (1 − y) ln(1 − p)], in [0, ~34.5]; nan when empty."""
    return _mean(sums.log_loss_sum, sums.n)


def mean_score_positive(sums: ProbabilitySums) -> float:
    """Mean score of the actual positives (nan without positives)."""
    return _mean(sums.score_sum_positive, sums.positives)


def mean_score_negative(sums: ProbabilitySums) -> float:
    """Mean score of the actual negatives (nan without negatives)."""
    return _mean(sums.score_sum_negative, sums.negatives)


def population_stability_index(expected: Any, actual: Any, floor: float = 1e-4) -> float:
    """PSI = Σ_i (a_i − e_i) ln(a_i / e_i) between two histograms over the same bins.

    Parameters
    ----------
    expected : array_like of shape (J,)
        Reference counts per bin (e.g. the baseline period's histogram).
    actual : array_like of shape (J,)
        Current counts per bin.
    floor : float in (0, 1)
        Proportions below ``floor`` are raised to it (no renormalisation), so
        an empty bin contributes a finite term.

    Returns
    -------
    float
        PSI >= 0; 0 for identical distributions. Rules of thumb: < 0.1 stable,
        0.1-0.25 moderate shift, > 0.25 major shift. Meant for coarse bins
        (10-20 bins, e.g. reference deciles): with thousands of sparse bins the
        sampling noise alone makes PSI large.

    Examples
    --------
    >>> round(population_stability_index([50, 50], [40, 60]), 6)
    0.040547
    """
    f = float(floor)
    if not (np.isfinite(f) and 0.0 < f < 1.0):
        raise InvalidInput("floor", f"is {floor!r}, must be in (0, 1)")
    proportions = []
    for name, counts in (("expected", expected), ("actual", actual)):
        h = np.asarray(counts, dtype=np.float64)
        if h.ndim != 1 or h.size == 0:
            raise InvalidInput(name, "must be a non-empty one-dimensional array of bin counts")
        if not np.all(np.isfinite(h)) or np.any(h < 0.0) or not h.sum() > 0.0:
            raise InvalidInput(name, "bin counts must be finite, non-negative, not all zero")
        proportions.append(np.maximum(h / h.sum(), f))
    e, a = proportions
    if e.shape != a.shape:
        raise InvalidInput("actual", f"has {a.size} bins but expected has {e.size}")
    return float(np.sum((a - e) * np.log(a / e)))

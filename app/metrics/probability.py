"""Probability metrics from additive sums, and the population stability index.

Brier score, log loss and the mean score per class are means of per-example
terms, so a window stores their sums (:class:`ProbabilitySums`) and merges
batches and windows by adding them (spec section 4).
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Any

import numpy as np

from app.errors import InvalidInput
from app.metrics._validation import check_scores_labels

LOG_LOSS_EPS = 1e-15
"""Scores are clipped to [LOG_LOSS_EPS, 1 − LOG_LOSS_EPS] inside the log loss."""


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
        return np.array(astuple(self), dtype=np.float64)

    def __add__(self, other: ProbabilitySums) -> ProbabilitySums:
        return ProbabilitySums(
            self.positives + other.positives,
            self.negatives + other.negatives,
            self.brier_sum + other.brier_sum,
            self.log_loss_sum + other.log_loss_sum,
            self.score_sum_positive + other.score_sum_positive,
            self.score_sum_negative + other.score_sum_negative,
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

"""The client's copy of the service's additive score sums (``app.metrics.probability``).

A labelled histogram batch carries the Brier, log-loss and per-class score
sums of its rows, computed here exactly as the service computes them for a
scores batch (same operations in the same order: equal bit for bit);
tests/unit/client/test_parity.py checks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from priorwatch_client.binning import check_scores_labels

LOG_LOSS_EPS = 1e-15
"""Scores are clipped to [LOG_LOSS_EPS, 1 − LOG_LOSS_EPS] inside the log loss."""


@dataclass(frozen=True, slots=True)
class ProbabilitySums:
    """Sums over rows (score p, label y): class counts, Σ (y − p)², Σ log loss, Σ p per class."""

    positives: float
    negatives: float
    brier_sum: float
    log_loss_sum: float
    score_sum_positive: float
    score_sum_negative: float

    @classmethod
    def from_predictions(cls, scores: Any, labels: Any) -> ProbabilitySums:
        """The sums of scores in [0, 1] and 0/1 labels.

        >>> ProbabilitySums.from_predictions([0.8, 0.4], [1, 0]).brier_sum
        0.2
        """
        s, y = check_scores_labels(scores, labels)
        one_minus = 1.0 - s
        p_true = np.where(y, s, one_minus)  # probability given to the actual class
        miss = np.where(y, one_minus, s)  # |y - p|
        np.clip(p_true, LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS, out=p_true)
        log_loss_sum = -float(np.sum(np.log(p_true, out=p_true)))
        score_sum_positive = float(np.sum(s, where=y))
        positives = float(np.count_nonzero(y))
        return cls(
            positives=positives,
            negatives=float(s.size) - positives,
            brier_sum=float(np.sum(np.square(miss, out=miss))),
            log_loss_sum=log_loss_sum,
            score_sum_positive=score_sum_positive,
            score_sum_negative=float(np.sum(s)) - score_sum_positive,
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

"""Confusion counts and their (n, pi, alpha, beta) parametrisation.

Counts are floats so that the same type holds exact integer counts, weighted
counts and the normalised counts of a metric evaluated at a reference prior.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.metrics.validation import check_probability, check_scores_labels


@dataclass(frozen=True, slots=True)
class ConfusionCounts:
    """TP, FP, FN, TN of one confusion matrix (positive iff score >= threshold)."""

    tp: float
    fp: float
    fn: float
    tn: float

    @classmethod
    def from_predictions(
        cls, scores: object, labels: object, threshold: float = 0.5
    ) -> ConfusionCounts:
        """Count the matrix of ``scores >= threshold`` against ``labels``.

        >>> ConfusionCounts.from_predictions([0.9, 0.2, 0.6], [1, 0, 0])
        ConfusionCounts(tp=1.0, fp=1.0, fn=0.0, tn=1.0)
        """
        s, y = check_scores_labels(scores, labels)
        t = check_probability("threshold", threshold, open_interval=False)
        pred = s >= t
        tp = int(np.count_nonzero(pred & y))
        p = int(np.count_nonzero(y))
        pp = int(np.count_nonzero(pred))
        return cls(float(tp), float(pp - tp), float(p - tp), float(s.size - pp - p + tp))

    @classmethod
    def from_rates(cls, prior: float, alpha: float, beta: float, n: float = 1.0) -> ConfusionCounts:
        """The matrix with prevalence ``prior``, FPR ``alpha`` and FNR ``beta`` over ``n``."""
        p, neg = n * prior, n * (1.0 - prior)
        return cls(p * (1.0 - beta), neg * alpha, p * beta, neg * (1.0 - alpha))

    @property
    def positives(self) -> float:
        return self.tp + self.fn

    @property
    def negatives(self) -> float:
        return self.fp + self.tn

    @property
    def n(self) -> float:
        return self.positives + self.negatives

    @property
    def prior(self) -> float:
        """pi = P/n (nan for an empty matrix)."""
        return self.positives / self.n if self.n else float("nan")

    @property
    def alpha(self) -> float:
        """Type-I error, FPR = FP/N (nan without negatives)."""
        return self.fp / self.negatives if self.negatives else float("nan")

    @property
    def beta(self) -> float:
        """Type-II error, FNR = FN/P (nan without positives)."""
        return self.fn / self.positives if self.positives else float("nan")

    def at_prior(self, prior: float) -> ConfusionCounts:
        """The normalised matrix (n = 1) with the same alpha, beta at ``prior``.

        Any labeling metric of the result is that metric *at the reference
        prior*: M(prior, alpha, beta). Rates that are undefined stay nan.
        """
        return ConfusionCounts.from_rates(prior, self.alpha, self.beta)

    def __add__(self, other: ConfusionCounts) -> ConfusionCounts:
        return ConfusionCounts(
            self.tp + other.tp, self.fp + other.fp, self.fn + other.fn, self.tn + other.tn
        )

"""Cumulative counts over decreasing thresholds: the one source of every curve.

:class:`CurveCounts` holds, for each distinct threshold (decreasing), how many
actual positives and negatives score at or above it. ROC, PR, lift and gain
curves, their areas (:mod:`app.metrics.areas`), their point metrics
(:mod:`app.metrics.points`) and their forms at a reference prior all derive
from it. It is built either from per-example scores
(:func:`cumulative_counts`, exact) or from per-class histograms
(:func:`cumulative_counts_from_histograms`, exact at every bin edge).

The area and point functions are re-exported here so that callers can import
everything curve-related from one module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput
from app.metrics.areas import (
    average_precision_from_counts,
    gain_auc_from_counts,
    gain_auc_ideal,
    gini_from_counts,
    ks_from_counts,
    lift_auc_from_counts,
    lift_auc_ideal,
    nauc_lift_from_counts,
    pr_auc_trapezoid_from_counts,
    roc_auc_from_counts,
)
from app.metrics.binning import check_bin_edges
from app.metrics.confusion import ConfusionCounts
from app.metrics.points import (
    lift_at_fraction,
    precision_at_fraction,
    precision_at_recall,
    recall_at_fpr,
)
from app.metrics.validation import check_probability, check_scores_labels

Array = npt.NDArray[np.float64]

__all__ = [
    "CurveCounts",
    "average_precision_from_counts",
    "cumulative_counts",
    "cumulative_counts_from_histograms",
    "gain_auc_from_counts",
    "gain_auc_ideal",
    "gini_from_counts",
    "ks_from_counts",
    "lift_at_fraction",
    "lift_auc_from_counts",
    "lift_auc_ideal",
    "nauc_lift_from_counts",
    "pr_auc_trapezoid_from_counts",
    "pr_curve",
    "precision_at_fraction",
    "precision_at_recall",
    "recall_at_fpr",
    "roc_auc_from_counts",
    "roc_curve",
]


@dataclass(frozen=True, eq=False)
class CurveCounts:
    """Cumulative confusion counts at every distinct threshold, thresholds decreasing.

    Attributes
    ----------
    thresholds : ndarray of float64, shape (K,)
        Strictly decreasing. ``thresholds[k]`` is a score (raw curves) or a
        bin's lower edge (histogram curves).
    tps : ndarray of float64, shape (K,)
        ``tps[k]`` = number of actual positives with score >= ``thresholds[k]``.
    fps : ndarray of float64, shape (K,)
        ``fps[k]`` = number of actual negatives with score >= ``thresholds[k]``.

    Both count arrays are non-decreasing; the origin (0, 0) is not included and
    the last point holds everything: ``tps[-1] = P``, ``fps[-1] = N``.
    """

    thresholds: Array
    tps: Array
    fps: Array

    @property
    def positives(self) -> float:
        """P, the number of actual positives."""
        return float(self.tps[-1])

    @property
    def negatives(self) -> float:
        """N, the number of actual negatives."""
        return float(self.fps[-1])

    @property
    def n(self) -> float:
        """n = P + N."""
        return self.positives + self.negatives

    @property
    def prior(self) -> float:
        """pi = P/n, the prevalence of the data the curve was built from."""
        return self.positives / self.n

    def counts_at_prior(self, prior: float | None = None) -> tuple[Array, Array]:
        """Cumulative counts with the curve's error rates at another class mix.

        Parameters
        ----------
        prior : float or None
            ``None`` returns the raw counts. Otherwise the normalised counts
            (n = 1) at prevalence ``prior``: ``prior * TPR`` and
            ``(1 - prior) * FPR`` at every threshold (nan when the curve has
            no positives or no negatives, since its rates are undefined).

        Returns
        -------
        tps, fps : ndarray of float64, shape (K,)
        """
        if prior is None:
            return self.tps, self.fps
        pi = check_probability("prior", prior)
        p, neg = self.positives, self.negatives
        tpr = self.tps / p if p > 0 else np.full_like(self.tps, np.nan)
        fpr = self.fps / neg if neg > 0 else np.full_like(self.fps, np.nan)
        return pi * tpr, (1.0 - pi) * fpr

    def confusion_at(self, threshold: float) -> ConfusionCounts:
        """The confusion matrix of ``score >= threshold``.

        Exact for a raw curve, and for a histogram curve when ``threshold`` is
        one of the bin edges; otherwise the matrix at the lowest bin edge
        above ``threshold``.
        """
        t = check_probability("threshold", threshold, open_interval=False)
        at_or_above = self.thresholds.size - int(np.searchsorted(self.thresholds[::-1], t))
        tp = float(self.tps[at_or_above - 1]) if at_or_above else 0.0
        fp = float(self.fps[at_or_above - 1]) if at_or_above else 0.0
        return ConfusionCounts(tp, fp, self.positives - tp, self.negatives - fp)


def cumulative_counts(scores: Any, labels: Any) -> CurveCounts:
    """Cumulative counts at every distinct score (scikit-learn's grouping of ties).

    Tied scores form one point, as in scikit-learn's
    ``confusion_matrix_at_thresholds``. One sort, and no gather: each example
    becomes one int64 key, the bit pattern of its score (for non-negative
    floats it orders as the float does) shifted left with the label in the
    lowest bit; sorting the keys sorts the scores and carries the labels along.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Scores in [0, 1]; higher means more likely positive.
    labels : array_like of {0, 1} or bool, shape (n,)
        ``labels[i]`` is 1 when example i is an actual positive.

    Returns
    -------
    CurveCounts
        One point per distinct score, thresholds decreasing.

    Examples
    --------
    >>> c = cumulative_counts([0.9, 0.4, 0.4, 0.1], [1, 1, 0, 0])
    >>> c.thresholds.tolist(), c.tps.tolist(), c.fps.tolist()
    ([0.9, 0.4, 0.1], [1.0, 2.0, 2.0], [0.0, 1.0, 2.0])
    """
    s, y = check_scores_labels(scores, labels)
    key = (s + 0.0).view(np.int64) << 1  # + 0.0 turns -0.0 into 0.0
    key |= y
    key.sort()
    key = key[::-1]  # decreasing score
    score_bits = key >> 1
    ends = np.flatnonzero(score_bits[1:] != score_bits[:-1])  # last index of each tie group
    ends = np.append(ends, key.size - 1)
    tps = np.cumsum(key & 1)[ends].astype(np.float64)
    fps = (ends + 1).astype(np.float64) - tps
    return CurveCounts(thresholds=score_bits[ends].view(np.float64), tps=tps, fps=fps)


def _check_histogram(name: str, counts: Any, n_bins: int) -> npt.NDArray[Any]:
    """The counts as an array: integers as they are (converted to float64 only in
    the non-empty bins, by the caller), anything else as float64."""
    h = np.asarray(counts)
    if h.dtype.kind not in "iu":
        h = h.astype(np.float64)
    if h.ndim != 1 or h.shape[0] != n_bins:
        raise InvalidInput(name, f"must be a one-dimensional array of {n_bins} bin counts")
    # two reductions without temporaries (NaN propagates through min and max)
    if not (h.min() >= 0.0 and h.max() < np.inf):
        raise InvalidInput(name, "bin counts must be finite and non-negative")
    return h


def cumulative_counts_from_histograms(positives: Any, negatives: Any, edges: Any) -> CurveCounts:
    """Cumulative counts from per-class histograms over shared bin edges.

    Parameters
    ----------
    positives, negatives : array_like of shape (J,)
        ``positives[j]`` / ``negatives[j]`` = number of actual positives /
        negatives with score in bin j = [edges[j], edges[j+1]) (the last bin
        is closed at 1.0). Counts may be non-integer (weights).
    edges : array_like of float, shape (J + 1,)
        Strictly increasing, from 0.0 to 1.0.

    Returns
    -------
    CurveCounts
        One point per non-empty bin, its threshold the bin's lower edge:
        every example in bins at or above it is predicted positive, so the
        counts at a threshold that is an edge are exact. Empty bins are
        dropped; they would add repeated points, which change no area.

    Examples
    --------
    >>> c = cumulative_counts_from_histograms([0, 1, 2], [3, 0, 1], [0.0, 0.3, 0.6, 1.0])
    >>> c.thresholds.tolist(), c.tps.tolist(), c.fps.tolist()
    ([0.6, 0.3, 0.0], [2.0, 3.0, 3.0], [1.0, 1.0, 4.0])
    """
    e = check_bin_edges(edges)
    pos = _check_histogram("positives", positives, e.size - 1)[::-1]
    neg = _check_histogram("negatives", negatives, e.size - 1)[::-1]
    # Summed over the non-empty bins alone: adding an empty bin's 0.0 changes no
    # partial sum, so these are the running totals at those bins, bit for bit.
    keep = _non_empty(pos, neg)

    def running(counts: npt.NDArray[Any]) -> Array:
        return np.cumsum(counts[keep].astype(np.float64))

    return CurveCounts(e[-2::-1][keep], running(pos), running(neg))


def cumulative_counts_from_running_totals(
    positives: Array, negatives: Array, totals: tuple[Array, Array], edges: Array
) -> CurveCounts:
    """:func:`cumulative_counts_from_histograms` of whole counts over checked edges, from
    their running totals ``totals = (np.cumsum(positives), np.cumsum(negatives))``.

    The counts above each bin are the total minus the running total below it,
    exact for whole counts (every partial sum is an integer below 2^53), so the
    curve is the same, bit for bit, without summing the histograms again.
    """

    def above(running: Array) -> Array:
        counts: Array = running[-1] - np.concatenate((running[-2::-1], [0.0]))
        return counts

    keep = _non_empty(positives[::-1], negatives[::-1])
    return CurveCounts(edges[-2::-1][keep], above(totals[0])[keep], above(totals[1])[keep])


def _non_empty(pos: npt.NDArray[Any], neg: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The indices of the bins that hold an example (histograms highest bin first)."""
    keep = np.flatnonzero((pos + neg) > 0.0)
    if keep.size == 0:
        raise InvalidInput("positives", "the histograms are empty (no examples)")
    return keep


def roc_curve(curve: CurveCounts) -> tuple[Array, Array, Array]:
    """ROC curve points, the origin first (scikit-learn's ``roc_curve`` without dropping).

    Returns
    -------
    fpr, tpr : ndarray of float64, shape (K + 1,)
        False- and true-positive rate of ``score >= thresholds[k]``; point 0
        is the origin (nothing predicted positive). nan if the curve has no
        negatives (fpr) or no positives (tpr).
    thresholds : ndarray of float64, shape (K + 1,)
        Decreasing; ``thresholds[0] = inf`` for the origin (scikit-learn's
        convention; serialise it as null or drop it).
    """
    tps, fps = curve.counts_at_prior(None)
    p, neg = curve.positives, curve.negatives
    tpr = np.concatenate(([0.0], tps / p)) if p > 0 else np.full(tps.size + 1, np.nan)
    fpr = np.concatenate(([0.0], fps / neg)) if neg > 0 else np.full(fps.size + 1, np.nan)
    return fpr, tpr, np.concatenate(([np.inf], curve.thresholds))


def pr_curve(curve: CurveCounts, prior: float | None = None) -> tuple[Array, Array, Array]:
    """Precision-recall curve points in the order of decreasing threshold.

    Parameters
    ----------
    curve : CurveCounts
    prior : float or None
        ``None``: raw precision at the curve's own prior. Otherwise the
        precision at reference prior ``prior`` (calibrated PR curve),
        ``pi0·TPR / (pi0·TPR + (1 − pi0)·FPR)``.

    Returns
    -------
    recall : ndarray of float64, shape (K,)
        TPR of ``score >= thresholds[k]`` (non-decreasing).
    precision : ndarray of float64, shape (K,)
        Precision there (nan where undefined).
    thresholds : ndarray of float64, shape (K,)
        Decreasing, as in ``curve``. scikit-learn's ``precision_recall_curve``
        returns the same points in the reverse order, cut at full recall,
        plus a final (recall 0, precision 1) point.
    """
    tps, fps = curve.counts_at_prior(prior)
    p = tps[-1]
    recall = tps / p if p > 0 else np.full_like(tps, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = tps / (tps + fps)
    return recall, precision, curve.thresholds.copy()

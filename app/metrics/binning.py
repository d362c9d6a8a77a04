"""Score bins shared by the per-class histograms of a window.

A window stores, per class, how many scores fell in each bin
[edges[j], edges[j+1]) (the last bin closed at 1.0). Curves and their areas
are then computed from the histograms (:func:`app.metrics.curves.
cumulative_counts_from_histograms`); they are exact at every edge, and a
configured decision threshold is always an edge.

Default bins are uniform in logit space, logit(s) = ln(s/(1−s)), over
[LOGIT_LOW, LOGIT_HIGH] = [-24, 16] (scores from about 3.8e-11 to 1 − 1.1e-7),
plus the two outer bins [0, sigmoid(LOGIT_LOW)) and [sigmoid(LOGIT_HIGH), 1].
With the default 10,000 bins a bin is 0.004 logit wide.

Why this range: logit spacing puts fine bins where the scores of confident
classifiers crowd, near 0 and 1, and that is where the rare class sits when
the prior is small. The range is asymmetric because float32 scores cannot
resolve more than about 1 − 6e-8 near 1 (logit 16.6), while near 0 they keep
full resolution, and at small priors the bulk of the data (the negatives of an
over-confident model) reaches logits below −16. Measured on binormal-logit
scores (calibrated, or tempered by a factor 0.5 to 2), n = 1e6, priors 0.5 to
0.001: ROC-AUC and AUC-PR from default-bin histograms stay within 1e-3 of the
per-example values (docs/metrics.md has the figures, bench/bench_evaluate.py
re-measures them, tests/unit/metrics/test_binning.py checks them). The error grows
with the bin width relative to the spread of the scores: for scores squeezed
into a band narrower than about one logit unit, use more bins.

The Python client bins with its own copy of :func:`histogram_counts` and its
checks (priorwatch_client.binning): change both, tests/unit/client/test_parity.py
holds them equal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput
from app.metrics.validation import check_probability, check_scores_labels

Array = npt.NDArray[np.float64]
Counts = npt.NDArray[np.int64]
"""Counts per bin: element j counts the rows with a score in bin j (of one class)."""

LOGIT_LOW = -24.0
"""Lower end of the logit interval covered by the uniform default bins."""

LOGIT_HIGH = 16.0
"""Upper end of the logit interval covered by the uniform default bins."""

DEFAULT_N_BINS = 10_000
"""Number of uniform logit bins of :func:`default_bin_edges` (before thresholds)."""


def default_bin_edges(thresholds: Iterable[float] = (0.5,), n_bins: int = DEFAULT_N_BINS) -> Array:
    """Bin edges uniform in logit space, with each threshold as an exact edge.

    Parameters
    ----------
    thresholds : iterable of float in (0, 1)
        Decision thresholds; each becomes an edge, so the confusion matrix at
        it is exact. An edge is added per threshold that is not already one.
    n_bins : int, >= 2
        Number of bins before the thresholds are inserted: two outer bins and
        ``n_bins - 2`` bins of equal logit width over [LOGIT_LOW, LOGIT_HIGH].

    Returns
    -------
    edges : ndarray of float64, shape (J + 1,)
        Strictly increasing from ``edges[0] = 0.0`` to ``edges[-1] = 1.0``;
        J = ``n_bins`` plus the number of inserted thresholds.

    Examples
    --------
    >>> e = default_bin_edges((0.5, 0.8), n_bins=4)
    >>> float(e[0]), float(e[-1]), 0.8 in e, e.size - 1  # 4 bins + 2 thresholds
    (0.0, 1.0, True, 6)
    """
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 2:
        raise InvalidInput("n_bins", f"is {n_bins!r}, must be an integer >= 2")
    cuts = [check_probability("thresholds", t) for t in thresholds]
    inner = 1.0 / (1.0 + np.exp(-np.linspace(LOGIT_LOW, LOGIT_HIGH, int(n_bins) - 1)))
    return np.unique(np.concatenate(([0.0, 1.0], inner, cuts)))


def check_bin_edges(edges: Any) -> Array:
    """Validate bin edges: one-dimensional, strictly increasing, 0.0 first, 1.0 last."""
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2:
        raise InvalidInput("edges", "must be a one-dimensional array of at least two edges")
    if e[0] != 0.0 or e[-1] != 1.0:
        raise InvalidInput("edges", "must start at 0.0 and end at 1.0")
    if not np.all(np.diff(e) > 0.0):
        raise InvalidInput("edges", "must be strictly increasing")
    return e


def histogram_counts(scores: Any, labels: Any, edges: Any) -> tuple[Counts, Counts]:
    """Per-class counts of scores in each bin.

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Scores in [0, 1].
    labels : array_like of {0, 1} or bool, shape (n,)
    edges : array_like of float, shape (J + 1,)
        Bin edges (see :func:`check_bin_edges`).

    Returns
    -------
    positives, negatives : ndarray of int64, shape (J,)
        ``positives[j]`` / ``negatives[j]`` = number of actual positives /
        negatives with score in [edges[j], edges[j+1]) (the last bin also holds
        scores equal to 1.0).

    Examples
    --------
    >>> pos, neg = histogram_counts([0.1, 0.5, 0.7, 1.0], [0, 1, 0, 1], [0.0, 0.5, 1.0])
    >>> pos.tolist(), neg.tolist()
    ([0, 2], [1, 1])
    """
    s, y = check_scores_labels(scores, labels)
    return checked_histogram_counts(s, y, check_bin_edges(edges))


def checked_histogram_counts(s: Array, y: npt.NDArray[np.bool_], e: Array) -> tuple[Counts, Counts]:
    """:func:`histogram_counts` of inputs already checked: ``s`` and ``y`` by
    :func:`check_scores_labels`, ``e`` by :func:`check_bin_edges`.

    For the ingestion, which checks a batch's arrays as it parses them and holds
    the model's edges checked once (:class:`app.services.models.config.ModelConfig`):
    checking 10,001 edges again for every 100-row batch cost about as much as
    binning its scores.
    """
    if s.size * 4 <= e.size - 1:
        # A small batch: search each score in the edges and count the bins hit,
        # about 10 times faster than locating every edge at 100 scores in
        # 10,000 bins; the same counts (tests/unit/metrics/test_binning.py).
        bins = bin_indices(s, e)
        return (
            np.bincount(bins[y], minlength=e.size - 1),
            np.bincount(bins[~y], minlength=e.size - 1),
        )
    # Sort each class once and locate every edge in it: several times faster
    # than one binary search per score over J edges (bench/bench_ingest.py).
    return _sorted_bin_counts(s[y], e), _sorted_bin_counts(s[~y], e)


def bin_indices(scores: Array, edges: Array) -> npt.NDArray[np.intp]:
    """The bin j of each score in [0, 1]: edges[j] <= score < edges[j+1], the last bin closed.

    Examples
    --------
    >>> bin_indices(np.array([0.0, 0.5, 0.7, 1.0]), np.array([0.0, 0.5, 1.0])).tolist()
    [0, 1, 1, 1]
    """
    bins: npt.NDArray[np.intp] = np.minimum(
        np.searchsorted(edges, scores, side="right") - 1, edges.size - 2
    )
    return bins


def _sorted_bin_counts(values: Array, edges: Array) -> npt.NDArray[np.int64]:
    """Counts of ``values`` (in [0, 1]) per bin [edges[j], edges[j+1]), last bin closed.

    ``values`` is a copy of the caller's (a boolean selection): sorted in place.
    """
    values.sort()
    below = np.searchsorted(values, edges, side="left")  # below[k] = #{v < edges[k]}
    below[-1] = values.size  # every value is <= edges[-1] = 1.0: the last bin is closed
    return np.diff(below)

"""The client's copy of the service's row validation and binning (no ``app`` import).

The client bins rows into the model's bins before sending them, so its counts
must be the service's (``app.metrics.validation.check_scores_labels``,
``app.metrics.binning.check_bin_edges`` and ``histogram_counts``): the same
checks with the same messages, the same bins. The client ships without the
server, hence this copy; tests/unit/client/test_parity.py checks it against
the service's functions and tests/integration/test_client_inprocess.py
against what the service stores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from priorwatch_client.errors import InvalidInput

Edges = npt.NDArray[np.float64]
Counts = npt.NDArray[np.int64]


def check_scores_labels(
    scores: Any, labels: Any
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """``scores`` (finite, in [0, 1]) and ``labels`` (0/1) as float64 and bool arrays."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    if s.ndim != 1:
        raise InvalidInput("scores", "must be a one-dimensional array")
    if y.ndim != 1:
        raise InvalidInput("labels", "must be a one-dimensional array")
    if s.shape[0] == 0:
        raise InvalidInput("scores", "must not be empty")
    if s.shape != y.shape:
        raise InvalidInput("labels", f"has length {y.shape[0]} but scores has length {s.shape[0]}")
    if not (s.min() >= 0.0 and s.max() <= 1.0):  # NaN fails both
        finite = np.isfinite(s)
        if not finite.all():
            raise InvalidInput("scores", f"element {int(np.argmin(finite))} is not finite")
        i = int(np.argmax((s < 0.0) | (s > 1.0)))
        raise InvalidInput("scores", f"element {i} is {float(s[i])!r}, outside [0, 1]")
    if y.dtype == np.bool_:
        return s, y
    if y.dtype.kind in "iu":
        if y.min() >= 0 and y.max() <= 1:
            return s, y.astype(np.bool_)
        i = int(np.argmax((y < 0) | (y > 1)))
        raise InvalidInput("labels", f"element {i} is {y[i].item()!r}; labels must be 0 or 1")
    if y.dtype.kind != "f":
        raise InvalidInput("labels", "must be numbers 0 or 1")
    bad = (y != 0.0) & (y != 1.0)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidInput("labels", f"element {i} is {y[i].item()!r}; labels must be 0 or 1")
    return s, y == 1.0


def check_bin_edges(edges: Any) -> Edges:
    """Bin edges as float64: one-dimensional, strictly increasing, 0.0 first, 1.0 last."""
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2:
        raise InvalidInput("edges", "must be a one-dimensional array of at least two edges")
    if e[0] != 0.0 or e[-1] != 1.0:
        raise InvalidInput("edges", "must start at 0.0 and end at 1.0")
    if not np.all(np.diff(e) > 0.0):
        raise InvalidInput("edges", "must be strictly increasing")
    return e


def histogram_counts(scores: Any, labels: Any, edges: Any) -> tuple[Counts, Counts]:
    """Positives and negatives per bin [edges[j], edges[j+1]) (the last bin holds 1.0).

    >>> pos, neg = histogram_counts([0.1, 0.5, 0.7, 1.0], [0, 1, 0, 1], [0.0, 0.5, 1.0])
    >>> pos.tolist(), neg.tolist()
    ([0, 2], [1, 1])
    """
    s, y = check_scores_labels(scores, labels)
    e = check_bin_edges(edges)
    return _sorted_bin_counts(s[y], e), _sorted_bin_counts(s[~y], e)


def _sorted_bin_counts(values: Edges, edges: Edges) -> Counts:
    """Counts of ``values`` per bin; ``values`` is a copy (a selection), sorted in place."""
    values.sort()
    below = np.searchsorted(values, edges, side="left")  # below[k] = #{v < edges[k]}
    below[-1] = values.size  # the last bin is closed at 1.0
    return np.diff(below)

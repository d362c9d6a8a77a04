"""Validation at the public boundary of :mod:`app.metrics`.

Public functions call one ``check_*`` helper; private helpers trust its output.
Errors are :class:`app.errors.InvalidInput` with the offending field, so the HTTP layer can
turn them into problem+json without guessing. The layers above (ingestion,
drift, estimation, the command line) check their inputs with the same helpers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput


def check_scores_labels(
    scores: Any, labels: Any
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Normalise ``scores`` (finite, in [0, 1]) and ``labels`` (0/1) to arrays.

    Returns
    -------
    scores : ndarray of float64, shape (n,)
    labels : ndarray of bool, shape (n,); True marks an actual positive.
    """
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
    # Two reductions decide for every valid input (NaN propagates through min
    # and max); the element-wise masks that name the culprit are built only
    # for a refused array.
    if not (s.min() >= 0.0 and s.max() <= 1.0):
        finite = np.isfinite(s)
        if not finite.all():
            raise InvalidInput("scores", f"element {int(np.argmin(finite))} is not finite")
        i = int(np.argmax((s < 0.0) | (s > 1.0)))
        raise InvalidInput("scores", f"element {i} is {float(s[i])!r}, outside [0, 1]")
    if y.dtype == np.bool_:
        return s, y
    if y.dtype.kind in "iu":  # the JSON parsers' labels: exact, no float copy needed
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


def check_probability(name: str, value: float, *, open_interval: bool = True) -> float:
    """A finite probability; in (0, 1) when ``open_interval`` else in [0, 1]."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(name, f"is {value!r}, must be a number") from None
    ok = (0.0 < v < 1.0) if open_interval else (0.0 <= v <= 1.0)
    if not (math.isfinite(v) and ok):
        interval = "(0, 1)" if open_interval else "[0, 1]"
        raise InvalidInput(name, f"is {value!r}, must be in {interval}")
    return v


def check_count(name: str, value: Any) -> npt.NDArray[np.float64]:
    """A finite, non-negative count (or array of counts) as float64.

    Counts may be fractional (weighted or normalised matrices), never negative.
    """
    try:
        v = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(name, f"is {value!r}, must be a number") from None
    # Two reductions decide for every valid input (NaN propagates through min and
    # max); which rule is broken is looked for only in a refused value.
    if v.size and not (v.min() >= 0.0 and v.max() < np.inf):
        if not np.all(np.isfinite(v)):
            raise InvalidInput(name, f"is {value!r}, must be finite")
        raise InvalidInput(name, f"is {value!r}, must be >= 0")
    return v


def check_class_histograms(
    positives: Any, negatives: Any
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Two per-class histograms: one-dimensional counts (:func:`check_count`) of one shape."""
    pos = check_count("positives", positives)
    neg = check_count("negatives", negatives)
    if pos.ndim != 1:
        raise InvalidInput("positives", "must be a one-dimensional array of bin counts")
    if neg.shape != pos.shape:
        raise InvalidInput("negatives", f"has shape {neg.shape} but positives has {pos.shape}")
    return pos, neg

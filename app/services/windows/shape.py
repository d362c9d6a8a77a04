"""A window result's JSON shape: interval documents and curves as lists of points.

What :mod:`app.services.windows.compute` returns is stored and served as
JSON: non-finite numbers become null, and each curve is downsampled to at
most :data:`MAX_CURVE_POINTS` points along its length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from app.metrics.uncertainty import INTERVAL_LEVEL

Array = npt.NDArray[np.float64]

MAX_CURVE_POINTS = 200
"""Most points of each serialised curve (downsampled along its length)."""


def interval_doc(low: float, high: float, reason: str | None = None) -> dict[str, Any]:
    """``{"lower", "upper", "level"}`` (and ``"reason"``) of an interval at
    :data:`INTERVAL_LEVEL`; a non-finite bound is null."""
    doc: dict[str, Any] = {
        "lower": low if math.isfinite(low) else None,
        "upper": high if math.isfinite(high) else None,
        "level": INTERVAL_LEVEL,
    }
    if reason is not None:
        doc["reason"] = reason
    return doc


def downsample_indices(
    x: Array, y: Array, max_points: int = MAX_CURVE_POINTS
) -> npt.NDArray[np.intp]:
    """Indices of at most ``max_points`` points that keep a curve's shape.

    Points are taken at equal steps of arc length in the (x, y) plane (nan
    coordinates count as no length), always with the first and the last.

    Parameters
    ----------
    x, y : ndarray of float64, shape (K,)
        The curve's coordinates, in drawing order.
    max_points : int
        Upper bound on the number of indices returned (>= 2).

    Returns
    -------
    ndarray of intp
        Increasing indices into x and y.
    """
    k = x.size
    if k <= max_points:
        return np.arange(k)
    step = np.hypot(np.diff(x), np.diff(y))
    step = np.where(np.isfinite(step), step, 0.0)
    length = np.concatenate(([0.0], np.cumsum(step)))
    if length[-1] <= 0.0:
        return np.unique(np.linspace(0, k - 1, max_points).round().astype(np.intp))
    marks = np.linspace(0.0, length[-1], max_points)
    idx = np.searchsorted(length, marks, side="left")
    idx = np.clip(idx, 0, k - 1)
    idx[0], idx[-1] = 0, k - 1
    return np.unique(idx)


def json_floats(a: Array) -> list[float | None]:
    """``a`` as a JSON list (non-finite values null)."""
    return [float(v) if math.isfinite(v) else None for v in a.tolist()]


def curve_points(
    columns: dict[str, Array], shape_axes: Sequence[str]
) -> dict[str, list[float | None]]:
    """The ``columns`` of a curve at the points :func:`downsample_indices` keeps along
    its ``shape_axes`` (x, y), as JSON lists."""
    keep = downsample_indices(columns[shape_axes[0]], columns[shape_axes[1]])
    return {name: json_floats(values[keep]) for name, values in columns.items()}

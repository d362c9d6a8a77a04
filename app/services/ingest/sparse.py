"""The compact histogram batch form: sparse per-class counts and score sums.

A histogram batch gives each class either densely (``n_bins`` counts) or
sparsely, as the non-empty bins only::

    {"bins": [3, 17, 4051], "counts": [2, 1, 40]}

and may add the per-example score sums of all its rows::

    {"brier_sum": 1.9, "log_loss_sum": 7.2,
     "score_sum_positive": 11.5, "score_sum_negative": 3.1}

so that Brier score, log loss and the mean scores survive aggregation on the
client (they are sums, :class:`app.metrics.probability.ProbabilitySums`).
A batch with sums counts toward those metrics exactly as a scores batch of
the same rows does. Every error is :class:`InvalidInput` naming the element
at fault (``histogram.positives.bins[3]``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput
from app.metrics.binning import Counts
from app.metrics.probability import ProbabilitySums, probability_sum_bounds

SPARSE_FIELDS = frozenset({"bins", "counts"})
SUM_FIELDS = ("brier_sum", "log_loss_sum", "score_sum_positive", "score_sum_negative")


def integer_array(field: str, raw: list[Any], what: str) -> npt.NDArray[np.int64]:
    """The JSON array ``raw`` as int64: the one check of the integers of a histogram,
    dense or sparse.

    InvalidInput naming the first element that is not an integer (``true``
    and ``false`` included: JSON booleans are not counts, though Python
    takes them for 1 and 0), or the array when a value is beyond 64 bits.
    """
    if not set(map(type, raw)) <= {int}:  # one pass in C; the element is found on failure
        bad = next(i for i, v in enumerate(raw) if type(v) is not int)
        raise InvalidInput(f"{field}[{bad}]", f"must be one of {what}")
    try:
        return np.array(raw, dtype=np.int64)
    except OverflowError:  # beyond 64 bits
        raise InvalidInput(field, f"must be an array of {what} below 2^63") from None


def _integer_array(field: str, raw: Any, what: str, n_bins: int) -> npt.NDArray[np.int64]:
    if not isinstance(raw, list):
        raise InvalidInput(field, f"must be an array of {what}")
    if len(raw) > n_bins:
        raise InvalidInput(field, f"has {len(raw)} entries; the model has {n_bins} bins")
    return integer_array(field, raw, what)


def parse_sparse_counts(field: str, raw: Any, n_bins: int, *, max_count: int) -> Counts:
    """Dense int64 counts, shape (n_bins,), from ``{"bins": [...], "counts": [...]}``.

    Parameters
    ----------
    field : str
        Name of the object in errors, e.g. ``histogram.positives``.
    raw : Any
        The decoded JSON value.
    n_bins : int
        The model's number of bins; every index must lie in [0, n_bins).
    max_count : int
        Largest accepted count of one bin.

    Raises
    ------
    InvalidInput
        Naming the field or element: indices not strictly increasing or out
        of range, counts negative, above ``max_count`` or not integers,
        lengths that differ, unknown or missing keys.

    Examples
    --------
    >>> parse_sparse_counts("h", {"bins": [1, 3], "counts": [2, 5]}, 4, max_count=10).tolist()
    [0, 2, 0, 5]
    """
    if not isinstance(raw, dict):
        raise InvalidInput(field, 'must be an array of counts or an object {"bins", "counts"}')
    unknown = sorted(set(raw) - SPARSE_FIELDS)
    if unknown:
        raise InvalidInput(f"{field}.{unknown[0]}", "unknown field")
    for key in ("bins", "counts"):
        if key not in raw:
            raise InvalidInput(f"{field}.{key}", "is required")
    bins = _integer_array(f"{field}.bins", raw["bins"], "bin indices (integers)", n_bins)
    counts = _integer_array(f"{field}.counts", raw["counts"], "non-negative integers", n_bins)
    if counts.size != bins.size:
        raise InvalidInput(
            f"{field}.counts",
            f"has {counts.size} entries; bins has {bins.size} (one count per bin)",
        )
    if bins.size:
        outside = np.flatnonzero((bins < 0) | (bins >= n_bins))
        if outside.size:
            i = int(outside[0])
            raise InvalidInput(
                f"{field}.bins[{i}]",
                f"is {int(bins[i])}, outside [0, {n_bins}) (the model has {n_bins} bins)",
            )
        not_increasing = np.flatnonzero(np.diff(bins) <= 0)
        if not_increasing.size:
            i = int(not_increasing[0]) + 1
            raise InvalidInput(
                f"{field}.bins[{i}]",
                f"is {int(bins[i])}, not above bins[{i - 1}] (indices must be strictly increasing)",
            )
        negative = np.flatnonzero(counts < 0)
        if negative.size:
            raise InvalidInput(f"{field}.counts[{int(negative[0])}]", "is negative")
        large = np.flatnonzero(counts > max_count)
        if large.size:
            raise InvalidInput(f"{field}.counts[{int(large[0])}]", f"exceeds {max_count}")
    dense = np.zeros(n_bins, dtype=np.int64)
    dense[bins] = counts
    return dense


def parse_score_sums(raw: Any, positives: int, negatives: int) -> ProbabilitySums:
    """The ``histogram.sums`` object as :class:`ProbabilitySums` over the batch's rows.

    Every sum is a finite number in its range: ``0 <= score_sum_positive <=
    positives`` and ``0 <= score_sum_negative <= negatives``, then
    ``brier_sum`` and ``log_loss_sum`` within what rows with these counts and
    score sums can give (:func:`app.metrics.probability.probability_sum_bounds`:
    at most about 34.54 per row for the log loss), so that no batch can claim
    sums that no rows have.
    """
    field = "histogram.sums"
    if not isinstance(raw, dict):
        raise InvalidInput(field, "must be an object {" + ", ".join(SUM_FIELDS) + "}")
    unknown = sorted(set(raw) - set(SUM_FIELDS))
    if unknown:
        raise InvalidInput(f"{field}.{unknown[0]}", "unknown field")
    values: dict[str, float] = {}
    for name in SUM_FIELDS:
        value = raw.get(name)
        if value is None:
            raise InvalidInput(f"{field}.{name}", "is required")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidInput(f"{field}.{name}", "must be a number")
        number = float(value)  # JSON integers are at most 64-bit: always finite
        if not (math.isfinite(number) and number >= 0.0):
            raise InvalidInput(f"{field}.{name}", f"is {value!r}; must be finite, at least 0")
        values[name] = number
    for name, count in (("score_sum_positive", positives), ("score_sum_negative", negatives)):
        if values[name] > count:
            raise InvalidInput(
                f"{field}.{name}", f"is {raw[name]!r}; must be at most {count} (one per row)"
            )
    bounds = probability_sum_bounds(
        positives, negatives, values["score_sum_positive"], values["score_sum_negative"]
    )
    for name, (low, high) in (("brier_sum", bounds.brier), ("log_loss_sum", bounds.log_loss)):
        if not low <= values[name] <= high:
            raise InvalidInput(
                f"{field}.{name}",
                f"is {raw[name]!r}; rows with these counts and score sums give between "
                f"{max(low, 0.0):.6g} and {high:.6g}",
            )
    return ProbabilitySums(positives=float(positives), negatives=float(negatives), **values)

"""Read and update the sums stored in a window aggregate row.

The row layout is described on :class:`app.db.models.WindowAggregate`; these
helpers are the one place that converts between its columns and the metric
library's types (histogram arrays, ConfusionCounts, ProbabilitySums). They read
any object with those attributes (:class:`AggregateRow`): the window model loads
no database code.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from app.metrics.binning import Counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.probability import ProbabilitySums

_CELLS = ("tp", "fp", "fn", "tn")


class AggregateRow(Protocol):
    """What :meth:`WindowSums.from_row` reads: a ``WindowAggregate`` row, or a row of
    its :data:`app.db.models.SUM_COLUMNS`."""

    n: int
    positives: int
    hist_positives: Counts | None
    hist_negatives: Counts | None
    confusion: list[dict[str, float]]
    sums_positives: int | None
    sums_negatives: int | None
    brier_sum: float | None
    log_loss_sum: float | None
    score_sum_positive: float | None
    score_sum_negative: float | None
    hist_unlabelled: Counts | None


def histograms(
    aggregate: AggregateRow,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """(positives, negatives) per bin, int64 shape (n_bins,), or None without histogram data."""
    if aggregate.hist_positives is None or aggregate.hist_negatives is None:
        return None
    return aggregate.hist_positives, aggregate.hist_negatives


def confusion_counts(aggregate: AggregateRow, index: int = 0) -> ConfusionCounts:
    """The stored matrix at the model's ``thresholds[index]`` (0 = primary)."""
    cell = aggregate.confusion[index]
    return ConfusionCounts(*(float(cell[k]) for k in _CELLS))


def probability_sums(aggregate: AggregateRow) -> ProbabilitySums | None:
    """The per-example sums of the window's scores batches, or None if it had none."""
    a = aggregate
    values = (
        a.sums_positives,
        a.sums_negatives,
        a.brier_sum,
        a.log_loss_sum,
        a.score_sum_positive,
        a.score_sum_negative,
    )
    if any(v is None for v in values):
        return None
    return ProbabilitySums(*(float(v) for v in values if v is not None))

"""Read and update the sums stored in a window aggregate row.

The row layout is described on :class:`app.db.models.WindowAggregate`; these
helpers are the one place that converts between its columns and the metric
library's types (histogram arrays, ConfusionCounts, ProbabilitySums).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from app.db.models import WindowAggregate
from app.metrics.confusion import ConfusionCounts
from app.metrics.probability import ProbabilitySums

_CELLS = ("tp", "fp", "fn", "tn")


def histograms(
    aggregate: WindowAggregate,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
    """(positives, negatives) per bin, int64 shape (n_bins,), or None without histogram data."""
    if aggregate.hist_positives is None or aggregate.hist_negatives is None:
        return None
    return aggregate.hist_positives, aggregate.hist_negatives


def confusion_counts(aggregate: WindowAggregate, index: int = 0) -> ConfusionCounts:
    """The stored matrix at the model's ``thresholds[index]`` (0 = primary)."""
    cell = aggregate.confusion[index]
    return ConfusionCounts(*(float(cell[k]) for k in _CELLS))


def probability_sums(aggregate: WindowAggregate) -> ProbabilitySums | None:
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

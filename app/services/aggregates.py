"""Read and update the sums stored in a window aggregate row.

The row layout is described on :class:`app.db.models.WindowAggregate`; these
helpers are the one place that converts between its columns and the metric
library's types (histogram arrays, ConfusionCounts, ProbabilitySums).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import numpy.typing as npt

from app.db.models import WindowAggregate
from app.metrics.confusion import ConfusionCounts
from app.metrics.probability import ProbabilitySums
from app.services.batch_parsing import ParsedBatch

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


def _add(stored: npt.NDArray[np.int64] | None, new: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    if stored is None:
        return new.astype(np.int64, copy=True)
    if stored.shape != new.shape:
        raise ValueError(f"histogram of {new.size} bins added to one of {stored.size}")
    return stored + new


def apply_batch(aggregate: WindowAggregate, batch: ParsedBatch, now: datetime) -> None:
    """Add ``batch`` to ``aggregate`` (a locked row), bump its version, mark it dirty.

    Every stored field is a sum, so the result does not depend on the order
    in which batches arrive. New objects are assigned (never mutated in place)
    so that the ORM sees every change.
    """
    aggregate.n += batch.n
    aggregate.positives += batch.positives
    if batch.unlabelled is not None:
        aggregate.n_unlabelled += batch.n_unlabelled
        aggregate.hist_unlabelled = _add(aggregate.hist_unlabelled, batch.unlabelled)
    if batch.hist_positives is not None and batch.hist_negatives is not None:
        aggregate.hist_positives = _add(aggregate.hist_positives, batch.hist_positives)
        aggregate.hist_negatives = _add(aggregate.hist_negatives, batch.hist_negatives)
    if len(batch.confusion) != len(aggregate.confusion):
        raise ValueError("the batch and the aggregate disagree on the number of thresholds")
    merged = []
    for cell, add in zip(aggregate.confusion, batch.confusion, strict=True):
        cell = dict(cell)
        if add is not None:
            for k, v in zip(_CELLS, (add.tp, add.fp, add.fn, add.tn), strict=True):
                cell[k] = int(cell[k]) + int(v)
        merged.append(cell)
    aggregate.confusion = merged
    if batch.sums is not None:
        stored = probability_sums(aggregate)
        total = batch.sums if stored is None else stored + batch.sums
        aggregate.sums_positives = int(total.positives)
        aggregate.sums_negatives = int(total.negatives)
        aggregate.brier_sum = float(total.brier_sum)
        aggregate.log_loss_sum = float(total.log_loss_sum)
        aggregate.score_sum_positive = float(total.score_sum_positive)
        aggregate.score_sum_negative = float(total.score_sum_negative)
    aggregate.version += 1
    if not aggregate.dirty:
        aggregate.dirty = True
        aggregate.dirty_since = now
    aggregate.updated_at = now

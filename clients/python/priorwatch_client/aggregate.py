"""Client-side aggregation: rows -> per-(window, segment) histograms and score sums.

The client bins scores into the model's own bins as the service does
(:func:`priorwatch_client.binning.histogram_counts`) and sums the per-example
terms with :meth:`ProbabilitySums.from_predictions`, then adds them up per
window and segment exactly as the service adds batches (integer counts; sums
added in arrival order). A bucket becomes one histogram batch in the sparse
form (only non-empty bins), so a million rows travel as a few kilobytes and
count toward every metric, Brier score and log loss included, as a scores
batch of the same rows would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from priorwatch_client.binning import check_bin_edges, check_scores_labels, histogram_counts
from priorwatch_client.sums import ProbabilitySums
from priorwatch_client.windows import isoformat_z, window_start

Counts = npt.NDArray[np.int64]
Edges = npt.NDArray[np.float64]


@dataclass(frozen=True)
class BucketKey:
    """Where rows go: a window of the model, a segment (None: none), whether labelled,
    and the caller's Idempotency-Key of the batch (None: the client draws one)."""

    window_start: datetime
    segment: str | None
    labelled: bool
    idempotency_key: str | None = None


@dataclass
class Bucket:
    """The sums of the rows logged into one (window, segment, labelled) since the last flush.

    Attributes
    ----------
    counts : list of int64 arrays of shape (n_bins,)
        [positives, negatives] for labelled rows, [counts] for unlabelled.
    sums : score sums of the labelled rows (None for unlabelled buckets).
    rows : rows added.
    latest : latest event time of the rows (the batch's timestamp).
    """

    key: BucketKey
    counts: list[Counts]
    sums: ProbabilitySums | None
    rows: int
    latest: datetime

    def add(
        self, counts: list[Counts], sums: ProbabilitySums | None, rows: int, at: datetime
    ) -> None:
        """Add a contribution (same order of addition as the service's window aggregate)."""
        self.counts = [mine + theirs for mine, theirs in zip(self.counts, counts, strict=True)]
        if sums is not None:
            self.sums = sums if self.sums is None else self.sums + sums
        self.rows += rows
        self.latest = max(self.latest, at)

    def body(self) -> bytes:
        """The histogram batch (sparse form, with sums for labelled rows) as JSON bytes."""
        histogram: dict[str, Any] = {}
        names = ("positives", "negatives") if self.key.labelled else ("unlabelled",)
        for name, counts in zip(names, self.counts, strict=True):
            bins = np.flatnonzero(counts)
            histogram[name] = {"bins": bins, "counts": counts[bins]}
        if self.sums is not None:
            s = self.sums
            histogram["sums"] = {
                "brier_sum": s.brier_sum,
                "log_loss_sum": s.log_loss_sum,
                "score_sum_positive": s.score_sum_positive,
                "score_sum_negative": s.score_sum_negative,
            }
        doc: dict[str, Any] = {"timestamp": isoformat_z(self.latest)}
        if self.key.segment is not None:
            doc["segment"] = self.key.segment
        doc["histogram"] = histogram
        return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)


def event_time(timestamp: datetime | float | None, now: datetime) -> datetime:
    """The event time of a ``log`` call: ``now`` by default; naive datetimes are UTC.

    Numbers are seconds since the Unix epoch, like batch timestamps.
    """
    if timestamp is None:
        return now
    if isinstance(timestamp, datetime):
        return timestamp if timestamp.utcoffset() is not None else timestamp.replace(tzinfo=UTC)
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        raise TypeError(f"timestamp must be a datetime or epoch seconds, not {type(timestamp)}")
    if not math.isfinite(timestamp):
        raise ValueError("timestamp must be finite")
    return datetime.fromtimestamp(timestamp, tz=UTC)


@dataclass(frozen=True)
class Binner:
    """Turns arrays of rows into bucket contributions for one model."""

    edges: Edges
    window: str

    @classmethod
    def of(cls, edges: Any, window: str) -> Binner:
        window_start(datetime(2000, 1, 1, tzinfo=UTC), window)  # KeyError for unknown lengths
        return cls(check_bin_edges(edges), window)

    @property
    def n_bins(self) -> int:
        return int(self.edges.size - 1)

    def key(
        self, at: datetime, segment: str | None, labelled: bool, idempotency_key: str | None
    ) -> BucketKey:
        return BucketKey(window_start(at, self.window), segment, labelled, idempotency_key)

    def labelled(self, scores: Any, labels: Any) -> tuple[list[Counts], ProbabilitySums, int]:
        """Per-class counts and score sums of labelled rows (validated like a scores batch)."""
        s, y = check_scores_labels(scores, labels)
        pos, neg = histogram_counts(s, y, self.edges)
        return [pos, neg], ProbabilitySums.from_predictions(s, y), int(s.size)

    def unlabelled(self, scores: Any) -> tuple[list[Counts], None, int]:
        """Counts per bin of scores without labels."""
        s = np.asarray(scores)
        _, counts = histogram_counts(s, np.zeros(s.shape, dtype=np.bool_), self.edges)
        return [counts], None, int(s.size)

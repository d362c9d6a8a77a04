"""The additive content of one window (or of several merged windows).

:class:`WindowSums` is a window aggregate detached from the database: every
field is a sum over batches, so windows add exactly (re-windowing merges the
stored windows of a longer window). :func:`sums_seed` derives the seed of a
window's random draws from its content, which makes computed results a
function of the sums alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from app.metrics.binning import Counts, histogram_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import cumulative_counts_from_histograms
from app.metrics.probability import ProbabilitySums
from app.services.windows import aggregate_row
from app.services.windows.aggregate_row import AggregateRow
from app.services.windows.limits import check_merged_total


@dataclass(frozen=True, eq=False)
class WindowSums:
    """The additive content of a window aggregate, detached from the database.

    Attributes
    ----------
    n, positives : int
        Examples in the window, and actual positives among them (every batch).
    hist_positives, hist_negatives : int64 array of shape (n_bins,) or None
        Element j counts the actual positives / negatives with a score in bin
        j of the model's edges (batches with scores or histograms only); None
        when no such batch arrived.
    confusion : tuple of ConfusionCounts
        The exact matrix at each of the model's thresholds, primary first.
        ``confusion[0]`` covers every example; the others only the examples
        with histograms (a confusion-matrix batch knows the primary one alone).
    sums : ProbabilitySums or None
        Per-example sums of the ``scores`` batches (None without any).
    unlabelled : int64 array of shape (n_bins,) or None
        Element j counts the rows without labels with a score in bin j (not
        in ``n``); None when no such row arrived.

    Every field is a sum over batches, so ``a + b`` is the window holding both
    (:meth:`merge` for many): re-windowing is exact.
    """

    n: int
    positives: int
    hist_positives: Counts | None
    hist_negatives: Counts | None
    confusion: tuple[ConfusionCounts, ...]
    sums: ProbabilitySums | None
    unlabelled: Counts | None = None

    @classmethod
    def from_histograms(
        cls, positives: Any, negatives: Any, bin_edges: Any, thresholds: Sequence[float]
    ) -> WindowSums:
        """The sums of labelled rows given as per-class histograms (no score sums).

        The matrix at each of ``thresholds`` (bin edges of the model) is read off
        the histograms, as for a histogram batch.

        >>> w = WindowSums.from_histograms([0, 2], [1, 1], [0.0, 0.5, 1.0], (0.5,))
        >>> (w.n, w.positives, w.confusion[0].tp, w.confusion[0].fp, w.sums)
        (4, 2, 2.0, 1.0, None)
        """
        pos = np.asarray(positives, dtype=np.int64)
        neg = np.asarray(negatives, dtype=np.int64)
        curve = cumulative_counts_from_histograms(pos, neg, bin_edges)
        return cls(
            n=int(pos.sum() + neg.sum()),
            positives=int(pos.sum()),
            hist_positives=pos,
            hist_negatives=neg,
            confusion=tuple(curve.confusion_at(t) for t in thresholds),
            sums=None,
        )

    @classmethod
    def from_predictions(
        cls, scores: Any, labels: Any, bin_edges: Any, thresholds: Sequence[float]
    ) -> WindowSums:
        """What ingestion stores for one batch of scores and labels: the histograms,
        the matrices at ``thresholds`` (bin edges) and the per-example sums.

        >>> scores, labels = [0.1, 0.5, 0.7, 1.0], [0, 1, 0, 1]
        >>> w = WindowSums.from_predictions(scores, labels, [0.0, 0.5, 1.0], (0.5,))
        >>> (w.n, w.positives, w.hist_positives.tolist(), w.sums.positives)
        (4, 2, [0, 2], 2.0)
        """
        pos, neg = histogram_counts(scores, labels, bin_edges)
        window = cls.from_histograms(pos, neg, bin_edges, thresholds)
        return replace(window, sums=ProbabilitySums.from_predictions(scores, labels))

    @classmethod
    def from_row(cls, row: AggregateRow) -> WindowSums:
        """The sums held by a ``WindowAggregate`` row (read by :mod:`.aggregate_row`)."""
        hists = aggregate_row.histograms(row)
        return cls(
            n=int(row.n),
            positives=int(row.positives),
            hist_positives=None if hists is None else np.asarray(hists[0], dtype=np.int64),
            hist_negatives=None if hists is None else np.asarray(hists[1], dtype=np.int64),
            confusion=tuple(
                aggregate_row.confusion_counts(row, i) for i in range(len(row.confusion))
            ),
            sums=aggregate_row.probability_sums(row),
            unlabelled=None
            if row.hist_unlabelled is None
            else np.asarray(row.hist_unlabelled, dtype=np.int64),
        )

    @property
    def negatives(self) -> int:
        return self.n - self.positives

    @property
    def n_unlabelled(self) -> int:
        """Rows without labels."""
        return 0 if self.unlabelled is None else int(self.unlabelled.sum())

    @property
    def has_full_histograms(self) -> bool:
        """True when the histograms count every example of the window."""
        if self.hist_positives is None or self.hist_negatives is None:
            return False
        return int(self.hist_positives.sum()) + int(self.hist_negatives.sum()) == self.n

    def __add__(self, other: WindowSums) -> WindowSums:
        if len(self.confusion) != len(other.confusion):
            raise ValueError("windows with different numbers of thresholds cannot be merged")
        sums = (
            other.sums
            if self.sums is None
            else self.sums
            if other.sums is None
            else self.sums + other.sums
        )
        check_merged_total(self.n + other.n)
        check_merged_total(self.n_unlabelled + other.n_unlabelled)
        return WindowSums(
            n=self.n + other.n,
            positives=self.positives + other.positives,
            hist_positives=_add_counts(self.hist_positives, other.hist_positives),
            hist_negatives=_add_counts(self.hist_negatives, other.hist_negatives),
            confusion=tuple(a + b for a, b in zip(self.confusion, other.confusion, strict=True)),
            sums=sums,
            unlabelled=_add_counts(self.unlabelled, other.unlabelled),
        )

    @classmethod
    def merge(cls, windows: Iterable[WindowSums]) -> WindowSums | None:
        """The sum of ``windows`` (None for none): e.g. the hours of a day."""
        total: WindowSums | None = None
        for w in windows:
            total = w if total is None else total + w
        return total

    def digest(self) -> bytes:
        """SHA-256 of the exact content; equal sums give equal digests."""
        h = hashlib.sha256()
        h.update(np.array([self.n, self.positives], dtype="<i8").tobytes())
        for hist in (self.hist_positives, self.hist_negatives):
            h.update(b"-" if hist is None else np.ascontiguousarray(hist, dtype="<i8").tobytes())
        if self.unlabelled is not None:  # (absent: the digest of a labelled-only window)
            h.update(b"u" + np.ascontiguousarray(self.unlabelled, dtype="<i8").tobytes())
        for c in self.confusion:
            h.update(np.array([c.tp, c.fp, c.fn, c.tn], dtype="<f8").tobytes())
        if self.sums is not None:
            h.update(self.sums.as_array().astype("<f8", copy=False).tobytes())
        return h.digest()


def _add_counts(a: Counts | None, b: Counts | None) -> Counts | None:
    if a is None:
        return None if b is None else b.copy()
    if b is None:
        return a.copy()
    if a.shape != b.shape:
        raise ValueError(f"histograms of {a.size} and {b.size} bins cannot be merged")
    return a + b


def sums_seed(window: WindowSums) -> int:
    """Seed of the interval draws for ``window``: a hash of its sums (deterministic)."""
    return int.from_bytes(window.digest()[:8], "little")

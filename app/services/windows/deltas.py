"""Batch deltas: what one batch adds to a window, stored apart and folded in later.

Ingestion appends a :class:`Delta` per aggregate a batch counts in (a row of
``batch_delta``, sparse: only the bins where the batch has scores); the
worker folds a window's deltas into its aggregate (:func:`fold`). Every
field is a sum, and the sums of scores are added as exact fixed-point
integers (:class:`ExactSums`), so any order and any grouping of the deltas
gives the same aggregate, bit for bit (docs/design.md, "Append, then fold").
:func:`fold_rows` folds stored delta rows and sets aside any that cannot be
folded (an overflow, a malformed row), so that one never blocks the others.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from app.metrics.binning import Counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.probability import ProbabilitySums
from app.services.windows.limits import check_merged_total
from app.services.windows.sums import WindowSums

FIXED_POINT_BITS = 128
"""Fraction bits of the exact sums: a float sum x is held as the integer
floor-toward-zero of x * 2**128 (exact for every value above 2**-75)."""

_UNKNOWN = -1
"""A confusion cell of a delta that does not tell the matrix at that threshold."""


def _to_fixed(value: float) -> int:
    return int(math.ldexp(value, FIXED_POINT_BITS))


def _from_fixed(value: int) -> float:
    return value / (1 << FIXED_POINT_BITS)  # int / int: correctly rounded


@dataclass(frozen=True)
class ExactSums:
    """The per-example sums of :class:`ProbabilitySums`, as exact integers.

    The counts are plain integers, the four sums fixed-point integers
    (:data:`FIXED_POINT_BITS`): addition is exact, hence associative and
    commutative, and :meth:`to_probability_sums` rounds once.

    >>> a = ExactSums.from_floats(ProbabilitySums(1, 0, 0.1, 0.2, 0.9, 0.0))
    >>> b = ExactSums.from_floats(ProbabilitySums(0, 1, 0.2, 0.3, 0.0, 0.3))
    >>> (a + b).to_probability_sums().brier_sum  # 0.1 + 0.2 rounded once
    0.30000000000000004
    """

    positives: int
    negatives: int
    brier: int
    log_loss: int
    score_positive: int
    score_negative: int

    @classmethod
    def from_floats(cls, sums: ProbabilitySums) -> ExactSums:
        """The exact value of stored or computed floating-point sums."""
        return cls(
            positives=int(sums.positives),
            negatives=int(sums.negatives),
            brier=_to_fixed(sums.brier_sum),
            log_loss=_to_fixed(sums.log_loss_sum),
            score_positive=_to_fixed(sums.score_sum_positive),
            score_negative=_to_fixed(sums.score_sum_negative),
        )

    def __add__(self, other: ExactSums) -> ExactSums:
        return ExactSums(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(ExactSums))
        )

    def to_probability_sums(self) -> ProbabilitySums:
        """The sums as floats (each rounded once)."""
        return ProbabilitySums(
            float(self.positives),
            float(self.negatives),
            _from_fixed(self.brier),
            _from_fixed(self.log_loss),
            _from_fixed(self.score_positive),
            _from_fixed(self.score_negative),
        )

    def to_document(self) -> dict[str, str]:
        """As stored in ``window_aggregate.exact_sums`` (decimal strings: JSON numbers
        would lose digits)."""
        return {f.name: str(getattr(self, f.name)) for f in fields(ExactSums)}

    @classmethod
    def from_document(cls, document: Mapping[str, str]) -> ExactSums:
        return cls(*(int(document[f.name]) for f in fields(ExactSums)))


class DeltaRow(Protocol):
    """What :meth:`Delta.from_row` reads (a ``BatchDelta`` row)."""

    batch_id: uuid.UUID
    n: int
    positives: int
    confusion: Counts
    bins: npt.NDArray[np.int32] | None
    bin_positives: Counts | None
    bin_negatives: Counts | None
    n_unlabelled: int
    bin_unlabelled: Counts | None
    sums: npt.NDArray[np.float64] | None


@dataclass(frozen=True, eq=False)
class Delta:
    """One batch's contribution to one window aggregate (sparse histograms).

    Attributes
    ----------
    batch_id : the batch.
    n, positives : its rows and positives.
    confusion : per model threshold, its matrix there or None (unknown).
    bins : int32 indices of the non-empty bins, ascending (None: no histogram).
    bin_positives, bin_negatives : int64 counts of labelled rows in those bins
        (None without labelled histogram).
    n_unlabelled : its rows without labels (not in ``n``).
    bin_unlabelled : int64 counts of rows without labels in those bins (None
        without unlabelled rows).
    sums : its probability sums (scores batches), else None.
    """

    batch_id: uuid.UUID
    n: int
    positives: int
    confusion: tuple[ConfusionCounts | None, ...]
    bins: npt.NDArray[np.int32] | None
    bin_positives: Counts | None
    bin_negatives: Counts | None
    sums: ProbabilitySums | None
    n_unlabelled: int = 0
    bin_unlabelled: Counts | None = None

    def to_row(
        self, model_id: int, segment: str, window_start: datetime, received_at: datetime
    ) -> dict[str, Any]:
        """The column values of its ``batch_delta`` row."""
        cells = [
            _UNKNOWN if c is None else int(v)
            for c in self.confusion
            for v in ((c.tp, c.fp, c.fn, c.tn) if c is not None else (0, 0, 0, 0))
        ]
        s = self.sums
        return {
            "model_id": model_id,
            "segment": segment,
            "window_start": window_start,
            "batch_id": self.batch_id,
            "received_at": received_at,
            "n": self.n,
            "positives": self.positives,
            "confusion": np.array(cells, dtype=np.int64),
            "bins": self.bins,
            "bin_positives": self.bin_positives,
            "bin_negatives": self.bin_negatives,
            "n_unlabelled": self.n_unlabelled,
            "bin_unlabelled": self.bin_unlabelled,
            "sums": None if s is None else s.as_array(),
        }

    @classmethod
    def from_row(cls, row: DeltaRow) -> Delta:
        cells = np.asarray(row.confusion, dtype=np.int64).reshape(-1, 4)
        return cls(
            batch_id=row.batch_id,
            n=int(row.n),
            positives=int(row.positives),
            confusion=tuple(
                None if int(c[0]) == _UNKNOWN else ConfusionCounts(*(float(v) for v in c))
                for c in cells
            ),
            bins=row.bins,
            bin_positives=row.bin_positives,
            bin_negatives=row.bin_negatives,
            sums=None if row.sums is None else ProbabilitySums(*(float(v) for v in row.sums)),
            n_unlabelled=int(row.n_unlabelled),
            bin_unlabelled=row.bin_unlabelled,
        )


@dataclass(frozen=True, eq=False)
class Folded:
    """An aggregate after a fold: its sums, their exact form, the batches folded, and
    its rows without labels (the ``n_unlabelled`` counter)."""

    sums: WindowSums
    exact: ExactSums | None
    batches: int
    n_unlabelled: int


def exact_of(sums: WindowSums, document: Mapping[str, str] | None) -> ExactSums | None:
    """The exact sums of an aggregate: stored, or (rows written before deltas) its floats."""
    if document is not None:
        return ExactSums.from_document(document)
    return None if sums.sums is None else ExactSums.from_floats(sums.sums)


def fold(
    base: WindowSums,
    exact: ExactSums | None,
    deltas: Iterable[Delta],
    n_bins: int,
    *,
    stored_unlabelled: int | None = None,
) -> Folded:
    """``base`` plus ``deltas``: every count added as an integer, the score sums exactly.

    Parameters
    ----------
    base : WindowSums
        The aggregate's stored sums.
    exact : ExactSums or None
        Their exact form (:func:`exact_of`).
    deltas : iterable of Delta
    n_bins : int
        The model's bin count (histograms are created at this size).
    stored_unlabelled : int or None
        The aggregate's ``n_unlabelled`` counter (None: the total of its
        unlabelled histogram); the deltas' ``n_unlabelled`` are added to it.

    The result depends only on the multiset of deltas, never on their order
    or on how they were grouped into folds.

    Raises
    ------
    CountOverflow
        The folded window would count more than int64 holds (the ingest
        ceilings leave 2^10 times the window ceiling of headroom, so this
        would take millions of unfolded batches of the largest size).
    """
    n, positives, batches = base.n, base.positives, 0
    hists = (
        None
        if base.hist_positives is None or base.hist_negatives is None
        else (base.hist_positives.copy(), base.hist_negatives.copy())
    )
    unlabelled = None if base.unlabelled is None else base.unlabelled.copy()
    n_unlabelled = base.n_unlabelled if stored_unlabelled is None else stored_unlabelled
    cells = [[int(c.tp), int(c.fp), int(c.fn), int(c.tn)] for c in base.confusion]
    for d in deltas:
        batches += 1
        n += d.n
        positives += d.positives
        if d.bins is not None and d.bin_positives is not None and d.bin_negatives is not None:
            if hists is None:
                hists = (np.zeros(n_bins, dtype=np.int64), np.zeros(n_bins, dtype=np.int64))
            hists[0][d.bins] += d.bin_positives
            hists[1][d.bins] += d.bin_negatives
        if d.bins is not None and d.bin_unlabelled is not None:
            if unlabelled is None:
                unlabelled = np.zeros(n_bins, dtype=np.int64)
            unlabelled[d.bins] += d.bin_unlabelled
        n_unlabelled += d.n_unlabelled
        if len(d.confusion) != len(cells):
            raise ValueError("the delta and the aggregate disagree on the number of thresholds")
        for cell, add in zip(cells, d.confusion, strict=True):
            if add is not None:
                for k, v in enumerate((add.tp, add.fp, add.fn, add.tn)):
                    cell[k] += int(v)
        if d.sums is not None:
            added = ExactSums.from_floats(d.sums)
            exact = added if exact is None else exact + added
    check_merged_total(n)  # unreachable past the ingest ceilings' headroom; never wraps
    check_merged_total(n_unlabelled)
    sums = WindowSums(
        n=n,
        positives=positives,
        hist_positives=None if hists is None else hists[0],
        hist_negatives=None if hists is None else hists[1],
        confusion=tuple(ConfusionCounts(*(float(v) for v in c)) for c in cells),
        sums=None if exact is None else exact.to_probability_sums(),
        unlabelled=unlabelled,
    )
    return Folded(sums, exact, batches, n_unlabelled)


RowT = TypeVar("RowT", bound=DeltaRow)


@dataclass(frozen=True, eq=False)
class RowsFolded(Generic[RowT]):
    """What :func:`fold_rows` did: the aggregate with the foldable rows, those rows'
    deltas, and the rows left out with the reason each could not be folded."""

    folded: Folded
    deltas: tuple[Delta, ...]
    unfoldable: tuple[tuple[RowT, str], ...] = ()


def fold_rows(
    base: WindowSums,
    exact: ExactSums | None,
    rows: Sequence[RowT],
    n_bins: int,
    *,
    stored_unlabelled: int | None = None,
) -> RowsFolded[RowT]:
    """:func:`fold` of the delta ``rows`` that can be folded; the others left out.

    The rows are folded together first. Only when that fails (an input
    ingestion should have refused: sums beyond the fixed-point range, a
    malformed row) is each row read and folded onto the previous result in
    turn, and every row that fails is left out with the error as its reason.
    Either way the result is the fold of exactly the deltas returned, so one
    poison row can neither block its window nor be retried forever.
    """
    try:
        deltas = tuple(Delta.from_row(r) for r in rows)
        folded = fold(base, exact, deltas, n_bins, stored_unlabelled=stored_unlabelled)
    except MemoryError:
        raise  # the machine's condition, not the input's
    except Exception:
        return _fold_one_by_one(base, exact, rows, n_bins, stored_unlabelled)
    return RowsFolded(folded, deltas)


def _fold_one_by_one(
    base: WindowSums,
    exact: ExactSums | None,
    rows: Sequence[RowT],
    n_bins: int,
    stored_unlabelled: int | None,
) -> RowsFolded[RowT]:
    folded = fold(base, exact, (), n_bins, stored_unlabelled=stored_unlabelled)
    kept: list[Delta] = []
    unfoldable: list[tuple[RowT, str]] = []
    for row in rows:
        try:
            delta = Delta.from_row(row)
            step = fold(
                folded.sums, folded.exact, (delta,), n_bins, stored_unlabelled=folded.n_unlabelled
            )
        except MemoryError:
            raise
        except Exception as exc:
            unfoldable.append((row, f"{type(exc).__name__}: {exc}"))
            continue
        folded = Folded(step.sums, step.exact, folded.batches + 1, step.n_unlabelled)
        kept.append(delta)
    return RowsFolded(folded, tuple(kept), tuple(unfoldable))


def aggregate_columns(folded: Folded, thresholds: Iterable[float]) -> dict[str, Any]:
    """The ``window_aggregate`` column values holding ``folded`` (batches and version aside)."""
    s, p = folded.sums, folded.sums.sums
    return {
        "n": s.n,
        "positives": s.positives,
        "hist_positives": s.hist_positives,
        "hist_negatives": s.hist_negatives,
        "n_unlabelled": folded.n_unlabelled,
        "hist_unlabelled": s.unlabelled,
        "confusion": [
            {
                "threshold": float(t),
                "tp": int(c.tp),
                "fp": int(c.fp),
                "fn": int(c.fn),
                "tn": int(c.tn),
            }
            for t, c in zip(thresholds, s.confusion, strict=True)
        ],
        "sums_positives": None if p is None else int(p.positives),
        "sums_negatives": None if p is None else int(p.negatives),
        "brier_sum": None if p is None else p.brier_sum,
        "log_loss_sum": None if p is None else p.log_loss_sum,
        "score_sum_positive": None if p is None else p.score_sum_positive,
        "score_sum_negative": None if p is None else p.score_sum_negative,
        "exact_sums": None if folded.exact is None else folded.exact.to_document(),
    }

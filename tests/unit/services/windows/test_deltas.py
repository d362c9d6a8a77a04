"""Batch deltas folded into a window aggregate: exact sums, any order and grouping, bit for bit."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from itertools import pairwise, permutations
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson
import pytest
from builders import model_config
from hypothesis import given, settings
from hypothesis import strategies as st

from app.config import Settings
from app.db.models import SUM_COLUMNS, WindowAggregate
from app.metrics.confusion import ConfusionCounts
from app.metrics.probability import ProbabilitySums
from app.services.ingest.batch import batch_delta
from app.services.ingest.parse import ParsedBatch, parse_batch
from app.services.windows.aggregate_row import AggregateRow
from app.services.windows.deltas import (
    Delta,
    ExactSums,
    Folded,
    aggregate_columns,
    exact_of,
    fold,
    fold_rows,
)
from app.services.windows.sums import WindowSums

NOW = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
MODEL = model_config((0.5, 0.7), n_bins=64, window="1d")
SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]


EMPTY = WindowSums(
    n=0,
    positives=0,
    hist_positives=None,
    hist_negatives=None,
    confusion=(ConfusionCounts(0, 0, 0, 0),) * len(MODEL.thresholds),
    sums=None,
)


def _documents(rng: np.random.Generator, sizes: tuple[int, ...] = (40, 25)) -> list[bytes]:
    ts = NOW.isoformat()
    docs = []
    for n in sizes:
        y = rng.random(n) < 0.4
        docs.append(
            {"timestamp": ts, "scores": rng.random(n).tolist(), "labels": y.astype(int).tolist()}
        )
    pos = rng.integers(0, 5, MODEL.n_bins).tolist()
    neg = rng.integers(0, 5, MODEL.n_bins).tolist()
    docs.append({"timestamp": ts, "histogram": {"positives": pos, "negatives": neg}})
    docs.append({"timestamp": ts, "confusion_matrix": {"tp": 2, "fp": 3, "fn": 4, "tn": 5}})
    return [orjson.dumps(d) for d in docs]


def _unlabelled_documents(rng: np.random.Generator) -> list[bytes]:
    """Scores without labels; a histogram of unlabelled rows; one with all three classes."""
    ts = NOW.isoformat()
    unl = (rng.integers(0, 4, MODEL.n_bins) * (rng.random(MODEL.n_bins) < 0.3)).tolist()
    pos = rng.integers(0, 3, MODEL.n_bins).tolist()
    neg = rng.integers(0, 3, MODEL.n_bins).tolist()
    return [
        orjson.dumps(d)
        for d in (
            {"timestamp": ts, "scores": rng.random(30).tolist()},
            {"timestamp": ts, "histogram": {"unlabelled": unl}},
            {"timestamp": ts, "histogram": {"positives": pos, "negatives": neg, "unlabelled": unl}},
        )
    ]


def _unlabelled_batches(seed: int = 5) -> list[ParsedBatch]:
    rng = np.random.default_rng(seed)
    return [parse_batch(doc, MODEL, SETTINGS, NOW) for doc in _unlabelled_documents(rng)]


def _batches(seed: int = 3, sizes: tuple[int, ...] = (40, 25)) -> list[ParsedBatch]:
    rng = np.random.default_rng(seed)
    return [parse_batch(doc, MODEL, SETTINGS, NOW) for doc in _documents(rng, sizes)]


def _stored(delta: Delta) -> Delta:
    """The delta after a round trip through its row's column values."""
    return Delta.from_row(SimpleNamespace(**delta.to_row(1, "*", NOW, NOW)))  # type: ignore[arg-type]


def _deltas(batches: list[ParsedBatch]) -> list[Delta]:
    return [_stored(batch_delta(uuid.UUID(int=i + 1), b)) for i, b in enumerate(batches)]


def _fold_in_groups(deltas: list[Delta], groups: list[list[int]]) -> Folded:
    """Fold ``deltas`` as successive claims would: group by group, through the stored row."""
    sums, exact, batches, unlabelled = EMPTY, None, 0, 0
    for group in groups:
        folded = fold(
            sums, exact, [deltas[i] for i in group], MODEL.n_bins, stored_unlabelled=unlabelled
        )
        columns = aggregate_columns(folded, MODEL.thresholds)
        row = SimpleNamespace(**columns)  # what the worker stores, read back
        sums = WindowSums.from_row(row)  # type: ignore[arg-type]
        exact = exact_of(sums, columns["exact_sums"])
        batches += folded.batches
        unlabelled = row.n_unlabelled
    return Folded(sums, exact, batches, unlabelled)


def _bits(folded: Folded) -> bytes:
    """Every stored bit of the folded aggregate (floats by their bytes)."""
    counts = (folded.batches, folded.n_unlabelled)
    return folded.sums.digest() + repr(folded.exact).encode() + repr(counts).encode()


def test_sparse_delta_round_trips_and_is_compact() -> None:
    batch = _batches()[0]
    delta = _stored(batch_delta(uuid.UUID(int=7), batch))
    assert delta.bins is not None and delta.bin_positives is not None
    assert delta.bins.size <= batch.n < MODEL.n_bins  # only the non-empty bins
    dense = np.zeros(MODEL.n_bins, dtype=np.int64)
    dense[delta.bins] = delta.bin_positives
    np.testing.assert_array_equal(dense, batch.hist_positives)  # type: ignore[arg-type]
    assert delta.confusion == batch.confusion and delta.sums == batch.sums
    cm = _stored(batch_delta(uuid.UUID(int=8), _batches()[3]))
    assert cm.bins is None and cm.sums is None
    assert cm.confusion[0] == ConfusionCounts(2, 3, 4, 5) and cm.confusion[1] is None


def test_sums_are_the_batch_totals() -> None:
    batches = _batches()
    folded = _fold_in_groups(_deltas(batches), [[0, 1, 2, 3]])
    agg = folded.sums
    assert folded.batches == 4
    assert agg.n == sum(b.n for b in batches) and agg.positives == sum(b.positives for b in batches)
    hist_batches = [b for b in batches if b.hist_positives is not None]
    np.testing.assert_array_equal(agg.hist_positives, sum(b.hist_positives for b in hist_batches))  # type: ignore[misc]
    np.testing.assert_array_equal(agg.hist_negatives, sum(b.hist_negatives for b in hist_batches))  # type: ignore[misc]
    primary, second = agg.confusion
    assert primary.n == agg.n  # every row, confusion-matrix batch included
    assert second.n == sum(b.n for b in hist_batches)  # histogram rows only
    expected = batches[0].sums + batches[1].sums  # type: ignore[operator]
    assert isinstance(agg.sums, ProbabilitySums)
    assert (agg.sums.positives, agg.sums.negatives) == (expected.positives, expected.negatives)
    assert np.isclose(agg.sums.brier_sum, expected.brier_sum, rtol=1e-15)


def test_label_only_windows_have_no_histograms_or_sums() -> None:
    folded = _fold_in_groups(_deltas(_batches()[3:]), [[0]])
    assert folded.sums.hist_positives is None and folded.sums.sums is None and folded.exact is None
    assert folded.sums.confusion[0].tp == 2 and folded.sums.confusion[1].n == 0


def test_any_order_gives_the_same_bits() -> None:
    deltas = _deltas(_batches())
    states = {_bits(_fold_in_groups(deltas, [list(order)])) for order in permutations(range(4))}
    assert len(states) == 1


def test_legacy_float_sums_fold_exactly() -> None:
    """An aggregate written before deltas (floats, no exact form) keeps its floats."""
    legacy = ProbabilitySums(3.0, 4.0, 0.1, 1e-30 + 0.7, 2.2, 1.3)
    exact = exact_of(WindowSums(7, 3, None, None, EMPTY.confusion, legacy), None)
    assert exact is not None and exact.to_probability_sums() == legacy
    assert ExactSums.from_document(exact.to_document()) == exact


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_any_order_and_grouping_folds_bit_for_bit(seed: int, data: st.DataObject) -> None:
    """Every permutation and split into successive folds gives one aggregate, bit for bit."""
    deltas = _deltas(_batches(seed, sizes=(17, 1, 33, 60)) + _unlabelled_batches(seed))
    reference = _bits(_fold_in_groups(deltas, [list(range(len(deltas)))]))
    order = data.draw(st.permutations(range(len(deltas))))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(deltas) - 1))))
    bounds = [0, *cuts, len(deltas)]
    groups = [list(order[a:b]) for a, b in pairwise(bounds)]
    assert _bits(_fold_in_groups(deltas, groups)) == reference


def test_unlabelled_rows_travel_sparse_and_fold_into_their_own_counts() -> None:
    labelled, unlabelled = _batches(), _unlabelled_batches()
    scores_only, hist_only, mixed = (
        _stored(batch_delta(uuid.UUID(int=20 + i), b)) for i, b in enumerate(unlabelled)
    )
    assert (scores_only.n, scores_only.n_unlabelled) == (0, 30)
    assert scores_only.bin_positives is None and scores_only.bin_negatives is None
    assert scores_only.bins is not None and scores_only.bin_unlabelled is not None
    assert hist_only.bins is not None and hist_only.bins.size < MODEL.n_bins  # non-empty bins only
    assert mixed.bins is not None and mixed.bin_positives is not None
    assert mixed.bin_unlabelled is not None  # one list of bins for the three classes
    for delta, batch in zip((scores_only, hist_only, mixed), unlabelled, strict=True):
        dense = np.zeros(MODEL.n_bins, dtype=np.int64)
        dense[delta.bins] = delta.bin_unlabelled  # type: ignore[index]
        np.testing.assert_array_equal(dense, batch.unlabelled)  # type: ignore[arg-type]
        assert delta.n_unlabelled == batch.n_unlabelled == int(dense.sum())

    only = _fold_in_groups(_deltas(unlabelled[:2]), [[0], [1]])
    assert (only.sums.n, only.n_unlabelled, only.batches) == (
        0,
        unlabelled[0].n_unlabelled + unlabelled[1].n_unlabelled,
        2,
    )
    assert only.sums.hist_positives is None and only.sums.sums is None  # no labelled row

    folded = _fold_in_groups(_deltas(labelled + unlabelled), [[0, 5], [1, 2, 3], [4, 6]])
    assert folded.sums.n == sum(b.n for b in labelled + unlabelled)
    assert (
        folded.n_unlabelled == folded.sums.n_unlabelled == sum(b.n_unlabelled for b in unlabelled)
    )
    np.testing.assert_array_equal(folded.sums.unlabelled, sum(b.unlabelled for b in unlabelled))  # type: ignore[misc]
    hist = [b for b in labelled + unlabelled if b.hist_positives is not None]
    np.testing.assert_array_equal(folded.sums.hist_positives, sum(b.hist_positives for b in hist))  # type: ignore[misc]
    # a stored counter is added to, not recomputed from the histogram
    more = fold(
        folded.sums, folded.exact, _deltas(unlabelled[:1]), MODEL.n_bins, stored_unlabelled=7
    )
    assert more.n_unlabelled == 7 + 30


def _rows(batches: list[ParsedBatch]) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(**batch_delta(uuid.UUID(int=i + 1), b).to_row(1, "*", NOW, NOW))
        for i, b in enumerate(batches)
    ]


def test_rows_that_cannot_be_folded_are_left_out_and_the_rest_folded_exactly() -> None:
    """A sum beyond the fixed-point range and a malformed row are each left out with
    the reason; the others fold to the same bits as a fold of them alone."""
    rows = _rows(_batches())
    good = fold(EMPTY, None, [Delta.from_row(r) for r in rows[1:]], MODEL.n_bins)  # type: ignore[arg-type]
    assert fold_rows(EMPTY, None, rows, MODEL.n_bins).unfoldable == ()  # type: ignore[arg-type]
    rows[0].sums = rows[0].sums.copy()
    rows[0].sums[3] = 2.0**900  # log loss: past 2^896, math.ldexp overflows
    malformed = SimpleNamespace(**vars(rows[2]) | {"batch_id": uuid.UUID(int=99)})
    malformed.confusion = malformed.confusion[:-1]  # not 4 cells per threshold
    done = fold_rows(EMPTY, None, [*rows, malformed], MODEL.n_bins)  # type: ignore[arg-type]
    assert [(r.batch_id.int, reason.split(":")[0]) for r, reason in done.unfoldable] == [
        (1, "OverflowError"),
        (99, "ValueError"),
    ]
    assert [d.batch_id for d in done.deltas] == [r.batch_id for r in rows[1:]]
    assert _bits(done.folded) == _bits(good)


def test_a_memory_error_is_raised_not_taken_for_a_poison_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Running out of memory says nothing about a row: never quarantine for it, in the
    fold of all rows or in the fold row by row."""
    rows = _rows(_batches())
    rows[0].sums = rows[0].sums.copy()
    rows[0].sums[3] = 2.0**900  # the fold of all rows fails: folded row by row
    read = Delta.from_row
    for failing_call in (1, len(rows) + 2):  # all rows together; the second row alone
        calls = iter(range(1, 100))

        def from_row(row: Any, failing: int = failing_call, calls: Any = calls) -> Delta:
            if next(calls) == failing:
                raise MemoryError
            return read(row)

        monkeypatch.setattr(Delta, "from_row", from_row)
        with pytest.raises(MemoryError):
            fold_rows(EMPTY, None, rows, MODEL.n_bins)  # type: ignore[arg-type]


def test_the_sum_columns_are_what_the_window_model_reads_of_a_row() -> None:
    """app/db selects SUM_COLUMNS for the drift references; WindowSums.from_row reads
    AggregateRow: the same names, each a column of window_aggregate."""
    assert tuple(AggregateRow.__annotations__) == SUM_COLUMNS
    assert set(SUM_COLUMNS) <= set(WindowAggregate.__table__.columns.keys())

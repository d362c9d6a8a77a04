"""The sparse histogram batch form and score sums (app/services/ingest/sparse.py)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
import pytest
from builders import model_config
from hypothesis import given, settings
from hypothesis import strategies as st

from app.config import Settings
from app.errors import InvalidInput
from app.metrics.probability import LOG_LOSS_MAX, ProbabilitySums, probability_sum_bounds
from app.services.ingest.parse import ParsedBatch, parse_batch
from app.services.windows.limits import MAX_BATCH_COUNT
from unit.metrics.test_probability import EDGE_SCORES

NOW = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
TS = "2026-11-26T12:10:00Z"
MODEL = model_config((0.5, 0.3), n_bins=300, segments=frozenset({"eu"}))
J = MODEL.n_bins
SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]


def _parse(doc: Any) -> ParsedBatch:
    return parse_batch(orjson.dumps(doc), MODEL, SETTINGS, NOW)


def _sparse(counts: np.ndarray[Any, Any]) -> dict[str, list[int]]:
    bins = np.flatnonzero(counts)
    return {"bins": bins.tolist(), "counts": counts[bins].tolist()}


def _scores_and_sparse(rng: np.random.Generator, n: int) -> tuple[ParsedBatch, dict[str, Any]]:
    labels = (rng.random(n) < 0.3).astype(int)
    scores = np.clip(rng.normal(0.35 + 0.3 * labels, 0.2), 0.0, 1.0)
    raw = _parse(
        {"timestamp": TS, "segment": "eu", "scores": scores.tolist(), "labels": labels.tolist()}
    )
    sums = ProbabilitySums.from_predictions(scores, labels)
    assert raw.hist_positives is not None and raw.hist_negatives is not None
    doc = {
        "timestamp": TS,
        "segment": "eu",
        "histogram": {
            "positives": _sparse(raw.hist_positives),
            "negatives": _sparse(raw.hist_negatives),
            "sums": {
                "brier_sum": sums.brier_sum,
                "log_loss_sum": sums.log_loss_sum,
                "score_sum_positive": sums.score_sum_positive,
                "score_sum_negative": sums.score_sum_negative,
            },
        },
    }
    return raw, doc


def test_sparse_batch_with_sums_equals_the_scores_batch_of_its_rows() -> None:
    from_scores, doc = _scores_and_sparse(np.random.default_rng(3), 700)
    parsed = _parse(doc)
    assert parsed.kind == "histogram"
    assert (parsed.n, parsed.positives, parsed.segment) == (700, from_scores.positives, "eu")
    assert parsed.window_start == from_scores.window_start
    assert parsed.hist_positives is not None and from_scores.hist_positives is not None
    assert parsed.hist_negatives is not None and from_scores.hist_negatives is not None
    np.testing.assert_array_equal(parsed.hist_positives, from_scores.hist_positives)
    np.testing.assert_array_equal(parsed.hist_negatives, from_scores.hist_negatives)
    assert parsed.confusion == from_scores.confusion
    assert parsed.sums == from_scores.sums  # bit for bit: JSON floats round-trip


def test_dense_and_sparse_classes_mix_and_sums_are_optional() -> None:
    dense_pos = np.zeros(J, dtype=np.int64)
    dense_pos[[0, 7, J - 1]] = [3, 1, 2]
    doc = {
        "timestamp": TS,
        "histogram": {"positives": dense_pos.tolist(), "negatives": {"bins": [], "counts": []}},
    }
    parsed = _parse(doc)
    assert (parsed.n, parsed.positives, parsed.sums) == (6, 6, None)
    assert parsed.hist_negatives is not None and not parsed.hist_negatives.any()
    np.testing.assert_array_equal(parsed.hist_positives, dense_pos)  # type: ignore[arg-type]


def _with(histogram: dict[str, Any]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "positives": {"bins": [1, 5], "counts": [2, 3]},
        "negatives": {"bins": [0], "counts": [4]},
    }
    return {"timestamp": TS, "histogram": {**base, **histogram}}


SUMS = {"brier_sum": 1.0, "log_loss_sum": 2.5, "score_sum_positive": 4.0, "score_sum_negative": 1.0}


@pytest.mark.parametrize(
    ("histogram", "field"),
    [
        ({"positives": {"bins": [1, 5]}}, "histogram.positives.counts"),
        ({"positives": {"bins": [1, 5], "counts": [2]}}, "histogram.positives.counts"),
        ({"positives": {"bins": [1, 5], "counts": [2, 3], "x": 1}}, "histogram.positives.x"),
        ({"positives": {"bins": [1, J], "counts": [2, 3]}}, "histogram.positives.bins[1]"),
        ({"positives": {"bins": [-1, 5], "counts": [2, 3]}}, "histogram.positives.bins[0]"),
        ({"negatives": {"bins": [0, 3, 3], "counts": [1, 1, 1]}}, "histogram.negatives.bins[2]"),
        ({"negatives": {"bins": [4, 3], "counts": [1, 1]}}, "histogram.negatives.bins[1]"),
        ({"negatives": {"bins": [0, 1.5], "counts": [1, 1]}}, "histogram.negatives.bins[1]"),
        ({"negatives": {"bins": [0, True], "counts": [1, 1]}}, "histogram.negatives.bins[1]"),
        ({"negatives": {"bins": [0, 2], "counts": [1, -1]}}, "histogram.negatives.counts[1]"),
        ({"negatives": {"bins": [0, 2], "counts": [1, 0.5]}}, "histogram.negatives.counts[1]"),
        (
            {"negatives": {"bins": [0, 2], "counts": [1, MAX_BATCH_COUNT + 1]}},
            "histogram.negatives.counts[1]",
        ),
        ({"negatives": {"bins": "0", "counts": [1]}}, "histogram.negatives.bins"),
        ({"negatives": 3}, "histogram.negatives"),
        (
            {"positives": {"bins": [], "counts": []}, "negatives": {"bins": [], "counts": []}},
            "histogram",
        ),
        ({"sums": [1, 2]}, "histogram.sums"),
        ({"sums": {**SUMS, "extra": 1.0}}, "histogram.sums.extra"),
        (
            {"sums": {k: v for k, v in SUMS.items() if k != "log_loss_sum"}},
            "histogram.sums.log_loss_sum",
        ),
        ({"sums": {**SUMS, "brier_sum": 9.5}}, "histogram.sums.brier_sum"),  # n = 9
        ({"sums": {**SUMS, "brier_sum": -0.1}}, "histogram.sums.brier_sum"),
        ({"sums": {**SUMS, "log_loss_sum": -1e-9}}, "histogram.sums.log_loss_sum"),
        ({"sums": {**SUMS, "score_sum_positive": 5.5}}, "histogram.sums.score_sum_positive"),
        ({"sums": {**SUMS, "score_sum_negative": 4.01}}, "histogram.sums.score_sum_negative"),
        ({"sums": {**SUMS, "score_sum_negative": "1"}}, "histogram.sums.score_sum_negative"),
        ({"sums": {**SUMS, "score_sum_negative": True}}, "histogram.sums.score_sum_negative"),
        ({"unlabelled": {"bins": [J], "counts": [5]}}, "histogram.unlabelled.bins[0]"),
        ({"other": 1}, "histogram.other"),
    ],
)
def test_bad_sparse_histograms_name_the_element(histogram: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _parse(_with(histogram))
    assert info.value.field == field


def test_unlabelled_counts_in_the_sparse_form() -> None:
    dense = [0] * J
    dense[2], dense[J - 1] = 5, 1
    sparse = {"bins": [2, J - 1], "counts": [5, 1]}
    alone = _parse({"timestamp": TS, "histogram": {"unlabelled": sparse}})
    assert (alone.n, alone.n_unlabelled) == (0, 6)
    assert alone.unlabelled is not None and alone.unlabelled.tolist() == dense
    beside = _parse(_with({"unlabelled": sparse}))
    assert beside.n_unlabelled == 6 and beside.n == _parse(_with({})).n


def _sums(brier: float, log_loss: float, s1: float = 2.5, s0: float = 2.0) -> dict[str, Any]:
    """Sums of the batch of :func:`_with` (5 positives, 4 negatives)."""
    return {
        "sums": {
            "brier_sum": brier,
            "log_loss_sum": log_loss,
            "score_sum_positive": s1,
            "score_sum_negative": s0,
        }
    }


def test_sums_at_their_joint_bounds_are_accepted() -> None:
    """Every end of the ranges that 5 positives scoring 2.5 and 4 negatives scoring 2
    allow: Brier in [(P - S1)^2/P + S0^2/N, (P - S1) + S0] = [2.25, 4.5], the log
    loss from 9 ln 2 (every score 1/2) to about 9 x 34.54 / 2 (every score 0 or 1)."""
    exact = probability_sum_bounds(5, 4, 2.5, 2.0, tolerance=0.0)
    assert exact.brier == (2.25, 4.5)
    assert exact.log_loss[0] == pytest.approx(9 * math.log(2), rel=1e-12)
    assert exact.log_loss[1] == pytest.approx(9 * LOG_LOSS_MAX / 2, rel=1e-9)
    for brier, log_loss in zip(exact.brier, exact.log_loss, strict=True):
        parsed = _parse(_with(_sums(brier, log_loss)))
        assert parsed.sums == ProbabilitySums(5.0, 4.0, brier, log_loss, 2.5, 2.0)
    perfect = _parse(_with(_sums(0, 0, s1=5, s0=0)))  # integers are numbers too
    assert perfect.sums == ProbabilitySums(5.0, 4.0, 0.0, 0.0, 5.0, 0.0)


@pytest.mark.parametrize(
    ("sums", "field"),
    [
        (_sums(2.25 * (1 - 1e-6), 7.0), "histogram.sums.brier_sum"),
        (_sums(4.5 * (1 + 1e-6), 7.0), "histogram.sums.brier_sum"),
        (_sums(3.0, 9 * math.log(2) * (1 - 1e-6)), "histogram.sums.log_loss_sum"),
        (_sums(3.0, 9 * LOG_LOSS_MAX / 2 * (1 + 1e-6)), "histogram.sums.log_loss_sum"),
        (_sums(3.0, 5e269), "histogram.sums.log_loss_sum"),  # the fold's overflow: 2^896
        (_sums(3.0, 1.8e19 * 9), "histogram.sums.log_loss_sum"),
        (_sums(0.01, 0.01, s1=5, s0=0), "histogram.sums.brier_sum"),  # perfect scores
        (_sums(0.0, 0.01, s1=5, s0=0), "histogram.sums.log_loss_sum"),
        (_sums(9.0, 50.0, s1=5, s0=4), "histogram.sums.brier_sum"),  # negatives at 1: 4
    ],
)
def test_sums_just_outside_their_joint_bounds_are_refused(sums: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _parse(_with(sums))
    assert info.value.field == field
    assert "rows with these counts and score sums give between" in info.value.reason


def test_unlabelled_rows_carry_no_sums() -> None:
    """Sums are of labelled rows only: a histogram of unlabelled rows cannot claim any."""
    unlabelled = {"bins": [2], "counts": [5]}
    with pytest.raises(InvalidInput) as info:
        _parse({"timestamp": TS, "histogram": {"unlabelled": unlabelled, **_sums(0.0, 0.0)}})
    assert info.value.field == "histogram.sums"


@settings(max_examples=40)
@given(
    st.lists(
        st.tuples(st.one_of(st.sampled_from(EDGE_SCORES), st.floats(0.0, 1.0)), st.booleans()),
        min_size=1,
        max_size=200,
    )
)
def test_a_histogram_batch_of_real_predictions_is_always_accepted(
    rows: list[tuple[float, bool]],
) -> None:
    """Predictions binned with their sums, as a client sends them: never refused, and
    counted as the scores batch of the same rows is."""
    scores = [r[0] for r in rows]
    labels = [int(r[1]) for r in rows]
    from_scores = _parse({"timestamp": TS, "scores": scores, "labels": labels})
    assert from_scores.hist_positives is not None and from_scores.hist_negatives is not None
    assert from_scores.sums is not None
    s = from_scores.sums
    histogram = {
        "positives": _sparse(from_scores.hist_positives),
        "negatives": _sparse(from_scores.hist_negatives),
        **_sums(s.brier_sum, s.log_loss_sum, s.score_sum_positive, s.score_sum_negative),
    }
    parsed = _parse({"timestamp": TS, "histogram": histogram})
    assert parsed.sums == from_scores.sums


@pytest.mark.parametrize(
    ("negatives", "field"),
    [
        ({"bins": list(range(J + 1)), "counts": [1] * (J + 1)}, "histogram.negatives.bins"),
        ({"bins": [0], "counts": [2**64 - 1]}, "histogram.negatives.counts"),
        ({"bins": [0], "counts": "1"}, "histogram.negatives.counts"),
    ],
)
def test_oversized_or_overflowing_sparse_arrays(negatives: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _parse(_with({"negatives": negatives}))
    assert info.value.field == field

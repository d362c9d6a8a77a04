"""Batch bodies -> validated sums (app/services/ingest/parse.py), no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import orjson
import pytest
from builders import model_config

from app.config import Settings
from app.errors import InvalidInput, MalformedBody
from app.metrics.confusion import ConfusionCounts
from app.metrics.probability import ProbabilitySums
from app.services.ingest.parse import parse_batch
from app.services.models.config import ModelConfig
from app.services.windows.limits import (
    INT64_MAX,
    MAX_BATCH_COUNT,
    MAX_MODEL_COUNT,
    MAX_WINDOW_COUNT,
)

NOW = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
THRESHOLDS = (0.5, 0.3, 0.8)


def _model(thresholds: tuple[float, ...] = THRESHOLDS, n_bins: int = 200) -> ModelConfig:
    return model_config(thresholds, n_bins=n_bins, segments=frozenset({"eu", "us"}))


MODEL = _model()
J = MODEL.n_bins
SETTINGS = Settings(_env_file=None, max_batch_rows=1000)  # type: ignore[call-arg]


def _parse(doc: Any, model: ModelConfig = MODEL, settings: Settings = SETTINGS) -> Any:
    return parse_batch(orjson.dumps(doc), model, settings, NOW)


def _scores(rng: np.random.Generator, n: int) -> tuple[list[float], list[int]]:
    labels = rng.random(n) < 0.3
    scores = np.clip(rng.normal(0.35 + 0.3 * labels, 0.2), 0.0, 1.0)
    # put some scores exactly on the thresholds: ties go to the positive side
    scores[: len(THRESHOLDS)] = THRESHOLDS
    return scores.tolist(), labels.astype(int).tolist()


def test_scores_batch_reduces_to_exact_sums() -> None:
    rng = np.random.default_rng(7)
    scores, labels = _scores(rng, 500)
    parsed = _parse({"timestamp": "2026-11-26T12:10:00Z", "scores": scores, "labels": labels})
    s, y = np.array(scores), np.array(labels, dtype=bool)
    assert parsed.kind == "scores"
    assert parsed.window_start == datetime(2026, 11, 26, 12, tzinfo=UTC)
    assert (parsed.n, parsed.positives) == (500, int(y.sum()))
    # histograms: brute-force bin assignment
    edges = MODEL.bin_edges
    index = np.array([max(j for j in range(edges.size - 1) if edges[j] <= v) for v in s])
    assert parsed.hist_positives is not None and parsed.hist_negatives is not None
    np.testing.assert_array_equal(
        parsed.hist_positives, np.bincount(index[y], minlength=edges.size - 1)
    )
    np.testing.assert_array_equal(
        parsed.hist_negatives, np.bincount(index[~y], minlength=edges.size - 1)
    )
    # confusion at every threshold: independent count on the raw scores
    for t, cm in zip(THRESHOLDS, parsed.confusion, strict=True):
        pred = s >= t
        assert cm == ConfusionCounts(
            float(np.sum(pred & y)),
            float(np.sum(pred & ~y)),
            float(np.sum(~pred & y)),
            float(np.sum(~pred & ~y)),
        )
    assert parsed.sums == ProbabilitySums.from_predictions(s, y)


def test_histogram_batch_gives_the_same_counts_as_its_scores() -> None:
    rng = np.random.default_rng(8)
    scores, labels = _scores(rng, 400)
    from_scores = _parse({"timestamp": "2026-11-26T12:00:00Z", "scores": scores, "labels": labels})
    assert from_scores.hist_positives is not None and from_scores.hist_negatives is not None
    doc = {
        "timestamp": "2026-11-26T12:00:00Z",
        "segment": "eu",
        "histogram": {
            "positives": from_scores.hist_positives.tolist(),
            "negatives": from_scores.hist_negatives.tolist(),
        },
    }
    parsed = _parse(doc)
    assert parsed.kind == "histogram" and parsed.segment == "eu"
    assert (parsed.n, parsed.positives) == (from_scores.n, from_scores.positives)
    assert parsed.confusion == from_scores.confusion
    assert parsed.sums is None


def test_confusion_matrix_batch_only_knows_the_primary_threshold() -> None:
    doc = {
        "timestamp": "2026-11-26T12:00:00+01:00",
        "confusion_matrix": {"tp": 4, "fp": 1, "fn": 2, "tn": 9},
    }
    parsed = _parse(doc)
    assert parsed.kind == "confusion_matrix"
    assert parsed.window_start == datetime(2026, 11, 26, 11, tzinfo=UTC)
    assert (parsed.n, parsed.positives) == (16, 6)
    assert parsed.confusion == (ConfusionCounts(4.0, 1.0, 2.0, 9.0), None, None)
    assert parsed.hist_positives is None and parsed.sums is None


GOOD_TS = "2026-11-26T12:00:00Z"


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"timestamp": GOOD_TS, "scores": [0.1, 1.5], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [0.1, -0.01], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [0.1, None], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [0.1, "x"], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [[0.1], [0.2]], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [[0.1], 0.2], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": ["0.1", "0.2"], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [1, 2**64 - 1], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [True, False], "labels": [0, 1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [0.1, 0.2], "labels": [[0], 1]}, "labels"),
        ({"timestamp": GOOD_TS, "scores": [0.1, 0.2], "labels": [0, 2]}, "labels"),
        ({"timestamp": GOOD_TS, "scores": [0.1, 0.2], "labels": [0, 0.5]}, "labels"),
        ({"timestamp": GOOD_TS, "scores": [0.1, 0.2], "labels": ["0", "1"]}, "labels"),
        ({"timestamp": GOOD_TS, "scores": [0.1, 0.2], "labels": [0, None]}, "labels"),
        ({"timestamp": GOOD_TS, "scores": [0.1, 0.2], "labels": [0]}, "labels"),
        ({"timestamp": GOOD_TS, "scores": [], "labels": []}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [0.5] * 1001, "labels": [0] * 1001}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [0.5], "labels": None}, "labels"),
        ({"timestamp": GOOD_TS, "labels": [1]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": "0.5", "labels": [1]}, "scores"),
        ({"scores": [0.5], "labels": [1]}, "timestamp"),
        ({"timestamp": 1764158400, "scores": [0.5], "labels": [1]}, "timestamp"),
        ({"timestamp": "yesterday", "scores": [0.5], "labels": [1]}, "timestamp"),
        ({"timestamp": float("inf"), "scores": [0.5], "labels": [1]}, "timestamp"),
        ({"timestamp": 1e20, "scores": [0.5], "labels": [1]}, "timestamp"),
        ({"timestamp": True, "scores": [0.5], "labels": [1]}, "timestamp"),
        ({"timestamp": "2026-11-26T12:40:00Z", "scores": [0.5], "labels": [1]}, "timestamp"),
        ({"timestamp": "2026-10-26T12:00:00Z", "scores": [0.5], "labels": [1]}, "timestamp"),
        ({"timestamp": GOOD_TS, "segment": "apac", "scores": [0.5], "labels": [1]}, "segment"),
        ({"timestamp": GOOD_TS, "segment": "*", "scores": [0.5], "labels": [1]}, "segment"),
        ({"timestamp": GOOD_TS, "segment": 3, "scores": [0.5], "labels": [1]}, "segment"),
        ({"timestamp": GOOD_TS, "score": [0.5], "labels": [1]}, "score"),
        ({"timestamp": GOOD_TS}, "body"),
        (
            {
                "timestamp": GOOD_TS,
                "scores": [0.5],
                "labels": [1],
                "confusion_matrix": {"tp": 1, "fp": 0, "fn": 0, "tn": 0},
            },
            "body",
        ),
        (
            {"timestamp": GOOD_TS, "confusion_matrix": {"tp": 0, "fp": 0, "fn": 0, "tn": 0}},
            "confusion_matrix",
        ),
        (
            {"timestamp": GOOD_TS, "confusion_matrix": {"tp": -1, "fp": 0, "fn": 0, "tn": 3}},
            "confusion_matrix.tp",
        ),
        (
            {"timestamp": GOOD_TS, "confusion_matrix": {"tp": 1.5, "fp": 0, "fn": 0, "tn": 3}},
            "confusion_matrix.tp",
        ),
        (
            {"timestamp": GOOD_TS, "confusion_matrix": {"tp": True, "fp": 0, "fn": 0, "tn": 3}},
            "confusion_matrix.tp",
        ),
        (
            {"timestamp": GOOD_TS, "confusion_matrix": {"tp": 1, "fp": 0, "fn": 0}},
            "confusion_matrix.tn",
        ),
        (
            {
                "timestamp": GOOD_TS,
                "confusion_matrix": {"tp": 1, "fp": 0, "fn": 0, "tn": 0, "x": 1},
            },
            "confusion_matrix.x",
        ),
        ({"timestamp": GOOD_TS, "confusion_matrix": [1, 0, 0, 0]}, "confusion_matrix"),
        ({"timestamp": GOOD_TS, "histogram": {"positives": [1] * J}}, "histogram"),
        (
            {"timestamp": GOOD_TS, "histogram": {"positives": [1] * 10, "negatives": [0] * 10}},
            "histogram.positives",
        ),
        (
            {"timestamp": GOOD_TS, "histogram": {"positives": [0] * J, "negatives": [0] * J}},
            "histogram",
        ),
        (
            {"timestamp": GOOD_TS, "histogram": {"positives": [0.5] * J, "negatives": [0] * J}},
            "histogram.positives[0]",
        ),
        (  # a JSON boolean is not a count, dense as in the sparse form
            {
                "timestamp": GOOD_TS,
                "histogram": {"positives": [1, True] + [0] * (J - 2), "negatives": [0] * J},
            },
            "histogram.positives[1]",
        ),
        (
            {"timestamp": GOOD_TS, "histogram": {"positives": [True] * J, "negatives": [0] * J}},
            "histogram.positives[0]",
        ),
        (
            {"timestamp": GOOD_TS, "histogram": {"unlabelled": [0] * (J - 1) + [False]}},
            f"histogram.unlabelled[{J - 1}]",
        ),
        (
            {"timestamp": GOOD_TS, "histogram": {"positives": [None] * J, "negatives": [0] * J}},
            "histogram.positives[0]",
        ),
        (
            {
                "timestamp": GOOD_TS,
                "histogram": {"positives": [1] * J, "negatives": [-1] + [0] * (J - 1)},
            },
            "histogram.negatives",
        ),
        (
            {
                "timestamp": GOOD_TS,
                "histogram": {"positives": [1] * J, "negatives": [2**60] + [0] * (J - 1)},
            },
            "histogram.negatives",
        ),
        (
            {"timestamp": GOOD_TS, "histogram": {"positives": [2**39] * J, "negatives": [0] * J}},
            "histogram",
        ),
        (
            {
                "timestamp": GOOD_TS,
                "histogram": {"positives": [2**64 - 1] + [0] * (J - 1), "negatives": [0] * J},
            },
            "histogram.positives",
        ),
    ],
)
def test_bad_batches_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _parse(doc)
    assert info.value.field == field


def test_count_ceilings_leave_headroom() -> None:
    # a full window is exact in float64 (2^53 + 1 is not representable)
    assert MAX_WINDOW_COUNT == 2**53 and float(MAX_WINDOW_COUNT) + 1 == float(MAX_WINDOW_COUNT)
    # four million unfolded batches of the largest size past a full window still fit int64
    assert MAX_WINDOW_COUNT + 2**22 * MAX_BATCH_COUNT <= INT64_MAX
    assert MAX_MODEL_COUNT + 2**21 * MAX_BATCH_COUNT <= INT64_MAX


@pytest.mark.parametrize("body", [b"", b"{", b"[1, 2]", b'"x"', b"null", b"{'a': 1}"])
def test_malformed_bodies(body: bytes) -> None:
    with pytest.raises(MalformedBody):
        parse_batch(body, MODEL, SETTINGS, NOW)


def test_overflowing_numbers_are_malformed_json() -> None:
    body = b'{"timestamp": "2026-11-26T12:00:00Z", "scores": [0.1, 1e999], "labels": [0, 1]}'
    with pytest.raises(MalformedBody, match="infinity"):
        parse_batch(body, MODEL, SETTINGS, NOW)


def test_non_finite_scores_are_refused_by_the_shared_check() -> None:
    # JSON has no inf/nan, but the array check (shared with the metrics) refuses them.
    from app.services.ingest.parse import scores_labels_arrays

    with pytest.raises(InvalidInput, match="not finite") as info:
        scores_labels_arrays({"scores": [0.2, float("nan")], "labels": [0, 1]}, max_rows=10)
    assert info.value.field == "scores"


def test_timestamp_bounds_follow_the_settings() -> None:
    doc = {"scores": [0.5], "labels": [1]}
    lenient = Settings(_env_file=None, backfill_max_age_days=60, future_skew_seconds=3600)  # type: ignore[call-arg]
    for moment in (NOW - timedelta(days=59), NOW + timedelta(minutes=59)):
        parsed = _parse({**doc, "timestamp": moment.isoformat()}, settings=lenient)
        assert parsed.event_at == moment
    for moment in (NOW - timedelta(days=31), NOW + timedelta(minutes=6)):
        with pytest.raises(InvalidInput, match="timestamp"):
            _parse({**doc, "timestamp": moment.isoformat()})


def _general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.services.ingest import parse as batch_parsing

    monkeypatch.setattr(batch_parsing, "_fast_scores_document", lambda body: None)


@pytest.mark.parametrize(
    "body",
    [
        b'{"timestamp": "2026-11-26T12:00:00Z", "scores": [0.1, 0.5, 1, 0],'
        b' "labels": [0, 1, 1, 0]}',
        b'{ "labels" : [ 1 ,0 ] , "segment":"eu", "scores":[ 2.5e-1 , 1E-3 ],'
        b' "timestamp":"2026-11-26T12:00:00+00:00" }',
        b'{"timestamp": "2026-11-26T12:00:00Z", "scores": [0.1, 0.5], "labels": [0.0, 1.0]}',
        b'{"timestamp": "2026-11-26T12:00:00Z", "scores": [0.1, 0.5], "labels": [false, true]}',
    ],
)
def test_fast_and_general_parsers_agree(body: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = parse_batch(body, MODEL, SETTINGS, NOW)
    _general_path(monkeypatch)
    general = parse_batch(body, MODEL, SETTINGS, NOW)
    for name in ("kind", "event_at", "segment", "n", "positives", "confusion", "sums"):
        assert getattr(fast, name) == getattr(general, name), name
    np.testing.assert_array_equal(fast.hist_positives, general.hist_positives)  # type: ignore[arg-type]


def test_fast_path_takes_plain_batches_and_declines_the_rest() -> None:
    from app.services.ingest.parse import _fast_scores_document

    doc = _fast_scores_document(b'{"timestamp": "t", "scores": [0.5, 1], "labels": [1, 0]}')
    assert doc is not None and doc["timestamp"] == "t"
    assert doc["scores"].dtype == np.float64 and doc["labels"].dtype == np.int64
    for body in [
        b'{"scores": [[0.5], 1], "labels": [1, 0]}',  # nested: simdjson would flatten
        b'{"scores": [0.5, 1], "labels": [1.0, 0]}',  # float labels
        b'{"scores": [0.5, "1"], "labels": [1, 0]}',  # a string
        b'{"scores": [0.5, null], "labels": [1, 0]}',
        b'{"scores": [0.5, 1], "labels": [1, 0], "x": {"a": 1}}',  # an object value
        b'{"scores": [0.5, 1], "labels": [1, 0]',  # malformed
        b'[{"scores": 1, "labels": 2}]',
        b'{"scores": [0.5, 1e999], "labels": [1, 0]}',
        b'{"histogram": {"positives": [1], "negatives": [2]}}',
    ]:
        assert _fast_scores_document(body) is None, body


def test_fast_path_reuses_its_parsers_without_mixing_documents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.services.ingest import parse as batch_parsing

    monkeypatch.setattr(batch_parsing, "_IDLE_PARSERS", [])
    rng = np.random.default_rng(7)
    docs = []
    for size in (5, 300, 2):  # a smaller document after a larger one reuses its buffers
        scores = rng.random(size)
        labels = rng.integers(0, 2, size)
        body = orjson.dumps({"scores": scores.tolist(), "labels": labels.tolist()})
        docs.append((batch_parsing._fast_scores_document(body), scores, labels))
        assert len(batch_parsing._IDLE_PARSERS) == 1  # one parser, returned after each use
    for doc, scores, labels in docs:  # every result keeps its own values
        assert doc is not None
        np.testing.assert_array_equal(doc["scores"], scores)
        np.testing.assert_array_equal(doc["labels"], labels)
    # a declined body returns the parser too; a body above the size cap drops it
    assert batch_parsing._fast_scores_document(b'{"scores": [0.5], "labels": [1.5]}') is None
    assert len(batch_parsing._IDLE_PARSERS) == 1
    monkeypatch.setattr(batch_parsing, "POOLED_PARSER_MAX_BYTES", 10)
    assert batch_parsing._fast_scores_document(b'{"scores": [0.5], "labels": [1]}') is not None
    assert batch_parsing._IDLE_PARSERS == []


def test_declined_bodies_get_the_general_answer() -> None:
    with pytest.raises(InvalidInput) as info:
        _parse({"timestamp": GOOD_TS, "scores": [[0.5], 0.25], "labels": [1, 0]})
    assert info.value.field == "scores"
    with pytest.raises(MalformedBody):
        parse_batch(
            b'{"timestamp": "2026-11-26T12:00:00Z", "scores": [0.5, 1e999], "labels": [1, 0]}',
            MODEL,
            SETTINGS,
            NOW,
        )


@pytest.mark.parametrize(
    "timestamp",
    ["2026-11-26T12:10:00Z", "2026-11-26T12:10:00", "2026-11-26T13:10:00+01:00", 1795695000],
)
def test_timestamp_forms_name_the_same_instant(timestamp: object) -> None:
    """ISO 8601 with an offset, without one (taken as UTC), or epoch seconds."""
    parsed = _parse({"timestamp": timestamp, "scores": [0.5], "labels": [1]})
    assert parsed.event_at == datetime(2026, 11, 26, 12, 10, tzinfo=UTC)

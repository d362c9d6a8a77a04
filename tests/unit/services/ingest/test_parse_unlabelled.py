"""Batches without labels: scores alone, or a histogram's unlabelled counts (no database)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pytest

from app.errors import InvalidInput
from app.services.ingest.parse import parse_batch
from unit.services.ingest.test_parse import GOOD_TS, MODEL, NOW, SETTINGS, J

SCORES = [0.0, 0.1, 0.3, 0.3, 0.5, 0.79, 0.8, 1.0]


def _parse(doc: Any) -> Any:
    return parse_batch(orjson.dumps(doc), MODEL, SETTINGS, NOW)


def test_scores_without_labels_count_as_unlabelled_rows_only() -> None:
    parsed = _parse({"timestamp": GOOD_TS, "segment": "eu", "scores": SCORES})
    labelled = _parse({"timestamp": GOOD_TS, "scores": SCORES, "labels": [0] * len(SCORES)})
    assert parsed.kind == "scores" and parsed.segment == "eu"
    assert (parsed.n, parsed.positives, parsed.n_unlabelled) == (0, 0, len(SCORES))
    assert parsed.hist_positives is None and parsed.hist_negatives is None
    assert parsed.sums is None
    assert parsed.confusion == (None,) * len(MODEL.thresholds)
    assert parsed.unlabelled is not None
    np.testing.assert_array_equal(parsed.unlabelled, labelled.hist_negatives)
    edges = MODEL.bin_edges
    for s in SCORES:  # each score lands in the bin [edges[j], edges[j+1]) that holds it
        j = min(int(np.searchsorted(edges, s, side="right")) - 1, J - 1)
        assert parsed.unlabelled[j] >= 1


def test_histogram_with_unlabelled_counts_alone_or_beside_the_labelled_ones() -> None:
    unlabelled = [0] * J
    unlabelled[3], unlabelled[J - 1] = 5, 2
    alone = _parse({"timestamp": GOOD_TS, "histogram": {"unlabelled": unlabelled}})
    assert alone.kind == "histogram"
    assert (alone.n, alone.n_unlabelled) == (0, 7)
    assert alone.unlabelled is not None and alone.unlabelled.tolist() == unlabelled
    assert alone.hist_positives is None and alone.confusion == (None,) * len(MODEL.thresholds)
    positives, negatives = [1] * J, [0] * J
    both = _parse(
        {
            "timestamp": GOOD_TS,
            "histogram": {"positives": positives, "negatives": negatives, "unlabelled": unlabelled},
        }
    )
    assert (both.n, both.positives, both.n_unlabelled) == (J, J, 7)
    labelled_only = _parse(
        {"timestamp": GOOD_TS, "histogram": {"positives": positives, "negatives": negatives}}
    )
    assert both.confusion == labelled_only.confusion
    assert labelled_only.unlabelled is None and labelled_only.n_unlabelled == 0


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"timestamp": GOOD_TS, "scores": [0.1, 1.5]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [0.1, None]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [[0.1, 0.2]]}, "scores"),
        ({"timestamp": GOOD_TS, "scores": []}, "scores"),
        ({"timestamp": GOOD_TS, "scores": "0.5"}, "scores"),
        ({"timestamp": GOOD_TS, "scores": [0.5] * 1001}, "scores"),
        ({"timestamp": GOOD_TS, "scores": None}, "scores"),
        ({"timestamp": GOOD_TS, "histogram": {"unlabelled": [0] * J}}, "histogram"),
        ({"timestamp": GOOD_TS, "histogram": {"unlabelled": [1] * 10}}, "histogram.unlabelled"),
        ({"timestamp": GOOD_TS, "histogram": {"unlabelled": [-1] * J}}, "histogram.unlabelled"),
        ({"timestamp": GOOD_TS, "histogram": {"unlabelled": [2**41] * J}}, "histogram.unlabelled"),
        ({"timestamp": GOOD_TS, "histogram": {"unlabelled": [0.5] * J}}, "histogram.unlabelled[0]"),
        (
            {"timestamp": GOOD_TS, "histogram": {"positives": [1] * J, "unlabelled": [1] * J}},
            "histogram",
        ),
        ({"timestamp": GOOD_TS, "histogram": {}}, "histogram"),
        ({"timestamp": GOOD_TS, "histogram": {"unlabelled": [1] * J, "x": 1}}, "histogram.x"),
        ({"timestamp": GOOD_TS, "histogram": [1] * J}, "histogram"),
        (
            {"timestamp": GOOD_TS, "histogram": {"unlabelled": [2**39] * 3 + [0] * (J - 3)}},
            "histogram",
        ),
    ],
)
def test_bad_unlabelled_batches_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        _parse(doc)
    assert info.value.field == field

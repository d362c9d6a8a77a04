"""Small batches are binned sparsely: the same bins, sums and matrices as the dense path."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
import orjson
from builders import model_config
from hypothesis import given, settings
from hypothesis import strategies as st

from app.config import Settings
from app.metrics.binning import _sorted_bin_counts, default_bin_edges, histogram_counts
from app.metrics.curves import cumulative_counts_from_histograms
from app.metrics.probability import ProbabilitySums
from app.services.ingest.parse import parse_batch

NOW = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
THRESHOLDS = (0.5, 0.3, 0.05)
EDGES = default_bin_edges(THRESHOLDS)  # 10,000 bins: a 100-row batch takes the sparse path
MODEL = model_config(THRESHOLDS, bin_edges=EDGES)
SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]
# 0, 1, the thresholds, edges and their neighbours: where a search can be off by one bin
SPECIAL = [0.0, 1.0, *THRESHOLDS, *EDGES[[1, 2, 4999, 5000, -3, -2]].tolist()]
SPECIAL += [float(np.nextafter(v, 0.5)) for v in SPECIAL]
SCORES = st.one_of(
    st.sampled_from(SPECIAL), st.floats(0.0, 1.0, allow_nan=False, allow_subnormal=True)
)


def _dense(scores: list[float], labels: list[int]) -> tuple[Any, Any]:
    """The dense path: every edge located in each class's sorted scores."""
    s, y = np.array(scores, dtype=np.float64), np.array(labels, dtype=np.bool_)
    return _sorted_bin_counts(s[y], EDGES), _sorted_bin_counts(s[~y], EDGES)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(SCORES, st.integers(0, 1)), min_size=1, max_size=300))
def test_small_batches_store_the_dense_paths_bins_sums_and_matrices(rows: Any) -> None:
    scores, labels = [r[0] for r in rows], [r[1] for r in rows]
    pos, neg = _dense(scores, labels)
    body = {"timestamp": "2026-11-26T12:10:00Z", "scores": scores, "labels": labels}
    parsed = parse_batch(orjson.dumps(body), MODEL, SETTINGS, NOW)
    assert parsed.hist_positives is not None and parsed.hist_negatives is not None
    assert parsed.hist_positives.dtype == pos.dtype == np.int64
    np.testing.assert_array_equal(parsed.hist_positives, pos)
    np.testing.assert_array_equal(parsed.hist_negatives, neg)
    assert (parsed.n, parsed.positives) == (len(rows), sum(labels))
    assert parsed.sums == ProbabilitySums.from_predictions(
        np.array(scores), np.array(labels, dtype=np.bool_)
    )
    curve = cumulative_counts_from_histograms(pos, neg, EDGES)
    assert parsed.confusion == tuple(curve.confusion_at(t) for t in THRESHOLDS)
    # the same matrices from the same counts sent as a histogram batch
    histogram = {
        "positives": {"bins": np.flatnonzero(pos).tolist(), "counts": pos[pos > 0].tolist()},
        "negatives": {"bins": np.flatnonzero(neg).tolist(), "counts": neg[neg > 0].tolist()},
    }
    body = {"timestamp": "2026-11-26T12:10:00Z", "histogram": histogram}
    assert parse_batch(orjson.dumps(body), MODEL, SETTINGS, NOW).confusion == parsed.confusion
    # unlabelled scores take the same path
    body = {"timestamp": "2026-11-26T12:10:00Z", "scores": scores}
    unlabelled = parse_batch(orjson.dumps(body), MODEL, SETTINGS, NOW).unlabelled
    np.testing.assert_array_equal(unlabelled, pos + neg)


def test_a_threshold_off_the_edges_counts_from_the_next_edge_up() -> None:
    model = model_config(THRESHOLDS, bin_edges=default_bin_edges((), n_bins=4))
    scores, labels = [0.1, 0.45, 0.55, 0.9, 1.0], [0, 1, 0, 1, 1]
    body = {"timestamp": "2026-11-26T12:10:00Z", "scores": scores, "labels": labels}
    parsed = parse_batch(orjson.dumps(body), model, SETTINGS, NOW)
    curve = cumulative_counts_from_histograms(
        *histogram_counts(scores, labels, model.bin_edges), model.bin_edges
    )
    assert parsed.confusion == tuple(curve.confusion_at(t) for t in THRESHOLDS)

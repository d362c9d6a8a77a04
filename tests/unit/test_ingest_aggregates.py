"""Adding batches to a window aggregate: exact sums, order independence, version, dirty."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import permutations

import numpy as np
import orjson

from app.config import Settings
from app.db.models import WindowAggregate
from app.metrics.binning import default_bin_edges
from app.metrics.probability import ProbabilitySums
from app.services.aggregates import apply_batch, confusion_counts, histograms, probability_sums
from app.services.batch_parsing import ParsedBatch, parse_batch
from app.services.model_config import ModelConfig

NOW = datetime(2026, 11, 26, 12, 30, tzinfo=UTC)
MODEL = ModelConfig(
    id=1,
    name="m",
    window="1d",
    thresholds=(0.5, 0.7),
    pi0=0.1,
    cost_ratio=None,
    segments=frozenset(),
    sla=(),
    drift={},
    bin_edges=default_bin_edges((0.5, 0.7), n_bins=64),
)
SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]


def _empty() -> WindowAggregate:
    return WindowAggregate(
        model_id=1,
        segment="*",
        window_start=NOW,
        n=0,
        positives=0,
        confusion=[{"threshold": t, "tp": 0, "fp": 0, "fn": 0, "tn": 0} for t in MODEL.thresholds],
        version=0,
        dirty=False,
        created_at=NOW,
        updated_at=NOW,
    )


def _batches() -> list[ParsedBatch]:
    rng = np.random.default_rng(3)
    ts = NOW.isoformat()
    docs = []
    for n in (40, 25):
        y = rng.random(n) < 0.4
        docs.append(
            {"timestamp": ts, "scores": rng.random(n).tolist(), "labels": y.astype(int).tolist()}
        )
    pos = rng.integers(0, 5, MODEL.n_bins).tolist()
    neg = rng.integers(0, 5, MODEL.n_bins).tolist()
    docs.append({"timestamp": ts, "histogram": {"positives": pos, "negatives": neg}})
    docs.append({"timestamp": ts, "confusion_matrix": {"tp": 2, "fp": 3, "fn": 4, "tn": 5}})
    return [parse_batch(orjson.dumps(d), MODEL, SETTINGS, NOW) for d in docs]


def _state(a: WindowAggregate) -> tuple[object, ...]:
    h = histograms(a)
    assert h is not None
    sums = probability_sums(a)
    assert sums is not None
    return (
        a.n,
        a.positives,
        h[0].tolist(),
        h[1].tolist(),
        a.confusion,
        a.version,
        sums.positives,
        sums.negatives,
        round(sums.brier_sum, 9),
        round(sums.log_loss_sum, 9),
    )


def test_any_order_gives_the_same_sums() -> None:
    batches = _batches()
    states = set()
    for order in permutations(range(len(batches))):
        agg = _empty()
        for i in order:
            apply_batch(agg, batches[i], NOW)
        states.add(repr(_state(agg)))
    assert len(states) == 1


def test_sums_are_the_batch_totals() -> None:
    batches = _batches()
    agg = _empty()
    for step, b in enumerate(batches, start=1):
        apply_batch(agg, b, NOW + timedelta(seconds=step))
    assert agg.n == sum(b.n for b in batches) and agg.positives == sum(b.positives for b in batches)
    assert agg.version == 4 and agg.dirty
    assert agg.dirty_since == NOW + timedelta(seconds=1)  # the first unprocessed change
    assert agg.updated_at == NOW + timedelta(seconds=4)
    pos, neg = histograms(agg) or (None, None)
    hist_batches = [b for b in batches if b.hist_positives is not None]
    np.testing.assert_array_equal(pos, sum(b.hist_positives for b in hist_batches))  # type: ignore[misc]
    np.testing.assert_array_equal(neg, sum(b.hist_negatives for b in hist_batches))  # type: ignore[misc]
    primary, second = confusion_counts(agg, 0), confusion_counts(agg, 1)
    assert primary.n == agg.n  # every row, confusion-matrix batch included
    assert second.n == sum(b.n for b in hist_batches)  # histogram rows only
    expected = batches[0].sums + batches[1].sums  # type: ignore[operator]
    sums = probability_sums(agg)
    assert isinstance(sums, ProbabilitySums)
    assert (sums.positives, sums.negatives) == (expected.positives, expected.negatives)
    assert np.isclose(sums.brier_sum, expected.brier_sum, rtol=1e-12)


def test_label_only_windows_have_no_histograms_or_sums() -> None:
    agg = _empty()
    apply_batch(agg, _batches()[3], NOW)
    assert histograms(agg) is None and probability_sums(agg) is None
    assert confusion_counts(agg, 0).tp == 2 and confusion_counts(agg, 1).n == 0

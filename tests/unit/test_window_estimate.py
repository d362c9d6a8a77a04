"""A window's label-free estimate in the service's computation (no database)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.drift.histograms import WindowHistograms
from app.drift.simulation import BinormalStream
from app.estimation import MixtureReference, estimate_window
from app.metrics.binning import default_bin_edges
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import cumulative_counts_from_histograms
from app.services.models.config import ModelConfig
from app.services.windows import estimate as window_estimate
from app.services.windows.compute import NO_UNLABELLED, compute_window_result
from app.services.windows.estimate import (
    ERROR_REASON_KEY,
    MORE_LABELLED_REASON,
    NO_REFERENCE,
    UnusableReference,
    estimate_document,
    estimate_error,
    guarded_estimate_document,
)
from app.services.windows.sums import WindowSums, sums_seed

THRESHOLDS = (0.5, 0.3)
EDGES = default_bin_edges(THRESHOLDS, n_bins=2_000)
STREAM = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-1.5)
MODEL = ModelConfig(
    id=1,
    name="fraud",
    window="1h",
    thresholds=THRESHOLDS,
    pi0=0.1,
    cost_ratio=0.7,
    segments=frozenset(),
    sla=(),
    drift={"reference": {"trailing_windows": 3}, "alpha": 0.01},
    bin_edges=EDGES,
)


def _labelled(h: WindowHistograms) -> WindowSums:
    pos, neg = h.positives.astype(np.int64), h.negatives.astype(np.int64)
    curve = cumulative_counts_from_histograms(pos, neg, EDGES)
    return WindowSums(
        n=int(h.n),
        positives=int(h.n_positives),
        hist_positives=pos,
        hist_negatives=neg,
        confusion=tuple(curve.confusion_at(t) for t in THRESHOLDS),
        sums=None,
    )


def _unlabelled(h: WindowHistograms) -> WindowSums:
    empty = ConfusionCounts(0.0, 0.0, 0.0, 0.0)
    return WindowSums(
        n=0,
        positives=0,
        hist_positives=None,
        hist_negatives=None,
        confusion=(empty,) * len(THRESHOLDS),
        sums=None,
        unlabelled=(h.positives + h.negatives).astype(np.int64),
    )


def test_a_window_of_unlabelled_rows_only_has_an_estimate_and_no_metrics() -> None:
    rng = np.random.default_rng(1)
    ref_h = STREAM.window(rng, n=50_000, prior=0.1)
    window_h = STREAM.window(rng, n=5_000, prior=0.03)
    result = compute_window_result(MODEL, _unlabelled(window_h), _labelled(ref_h))
    assert (result.metrics, result.intervals, result.curves) == ({}, {}, None)
    assert result.reasons == {"maturity": "assumption-none"}  # MODEL completes no window
    assert result.drift["verdict"] == "none" and result.drift["status"] == "insufficient_data"
    expected = estimate_window(
        MixtureReference.from_histograms(ref_h),
        window_h.positives + window_h.negatives,
        thresholds=THRESHOLDS,
        pi0=0.1,
        cost_ratio=0.7,
    )
    assert result.estimate is not None
    assert result.estimate == {**expected.to_document(), "error": None}
    assert result.estimate["metrics"]["f1@t=0.3"] == expected.metrics["f1@t=0.3"]
    assert compute_window_result(MODEL, _unlabelled(window_h), None).estimate is None


def test_labels_that_arrive_later_give_the_error() -> None:
    rng = np.random.default_rng(2)
    ref_h = STREAM.window(rng, n=50_000, prior=0.1)
    window_h = STREAM.window(rng, n=5_000, prior=0.05)
    both = _labelled(window_h) + _unlabelled(window_h)
    assert (both.n, both.n_unlabelled) == (5_000, 5_000)
    result = compute_window_result(MODEL, both, _labelled(ref_h))
    assert result.estimate is not None
    error = result.estimate["error"]
    assert error == estimate_error(result.estimate["metrics"], result.metrics)
    assert (
        error["precision"] == result.estimate["metrics"]["precision"] - result.metrics["precision"]
    )
    assert "brier" not in error and set(error) <= set(result.metrics)
    labelled_only = compute_window_result(MODEL, _labelled(window_h), _labelled(ref_h))
    assert labelled_only.estimate is None
    assert labelled_only.metrics == result.metrics  # unlabelled rows never enter the metrics


def test_no_error_when_more_rows_are_labelled_than_scored() -> None:
    """Issue 20: 1,000 unlabelled rows then 5,000 labelled ones (never sent unlabelled)
    reported an error of the estimate, as if it had been wrong."""
    rng = np.random.default_rng(7)
    ref = _labelled(STREAM.window(rng, n=50_000, prior=0.1))
    scored = _unlabelled(STREAM.window(rng, n=1_000, prior=0.1))
    labels = _labelled(STREAM.window(rng, n=5_000, prior=0.3))
    for detail in (False, True):
        result = compute_window_result(MODEL, scored + labels, ref, detail=detail)
        assert result.estimate is not None and result.estimate["reliable"] is True
        assert result.estimate["error"] is None
        assert result.reasons[ERROR_REASON_KEY] == MORE_LABELLED_REASON
        assert result.metrics["prior"] is not None  # the labelled metrics are kept
    as_many = _labelled(STREAM.window(rng, n=1_000, prior=0.1))
    result = compute_window_result(MODEL, scored + as_many, ref)
    assert result.estimate is not None and result.estimate["error"]
    assert ERROR_REASON_KEY not in result.reasons
    alone = compute_window_result(MODEL, labels, ref)  # no estimate, no reason for its error
    assert alone.estimate is None and ERROR_REASON_KEY not in alone.reasons


def test_no_estimate_without_a_usable_reference_and_the_reason() -> None:
    rng = np.random.default_rng(3)
    window = _unlabelled(STREAM.window(rng, n=1_000, prior=0.1))
    assert estimate_document(MODEL, window.unlabelled, None, None) is None
    assert guarded_estimate_document(MODEL, window.unlabelled, None, None) == (None, NO_REFERENCE)
    negatives_only = STREAM.window(rng, n=1_000, prior=0.0)
    ref = (negatives_only.positives.astype(np.int64), negatives_only.negatives.astype(np.int64))
    with pytest.raises(UnusableReference, match="needs examples of both classes"):
        estimate_document(MODEL, window.unlabelled, ref, None)
    estimate, why = guarded_estimate_document(MODEL, window.unlabelled, ref, None)
    assert estimate is None and why is not None and "cannot identify a prior" in why
    # no unlabelled row: nothing to estimate, and nothing to explain
    assert estimate_document(MODEL, None, ref, None) is None
    assert guarded_estimate_document(MODEL, None, ref, None) == (None, None)
    empty = np.zeros(EDGES.size - 1, dtype=np.int64)
    assert guarded_estimate_document(MODEL, empty, ref, None) == (None, None)


@pytest.mark.parametrize(
    ("drift", "in_period", "with_reference", "reason"),
    [
        ({}, False, False, "no drift reference is configured for this model"),
        (MODEL.drift, True, False, "the window belongs to the drift reference period"),
        (MODEL.drift, False, False, "the reference period holds no data yet"),
    ],
)
def test_a_window_with_unlabelled_rows_says_why_it_has_no_estimate(
    drift: dict[str, object], in_period: bool, with_reference: bool, reason: str
) -> None:
    """reasons["estimate"] names the missing reference, labelled rows or not."""
    rng = np.random.default_rng(8)
    model = replace(MODEL, drift=drift)
    scored = _unlabelled(STREAM.window(rng, n=2_000, prior=0.1))
    labelled = _labelled(STREAM.window(rng, n=2_000, prior=0.1))
    for window in (scored, scored + labelled):
        result = compute_window_result(model, window, None, in_reference_period=in_period)
        assert result.estimate is None
        assert result.reasons["estimate"] == reason
    alone = compute_window_result(model, labelled, None, in_reference_period=in_period)
    assert alone.reasons["estimate"] == NO_UNLABELLED  # every null document says why
    if not in_period:
        assert result.drift.get("detail") == reason  # the drift verdict says the same


def test_unlabelled_rows_merge_and_enter_the_digest() -> None:
    rng = np.random.default_rng(4)
    h = STREAM.window(rng, n=1_000, prior=0.1)
    a, b = _unlabelled(h), _labelled(h)
    merged = WindowSums.merge([a, b, a])
    assert merged is not None and merged.unlabelled is not None
    np.testing.assert_array_equal(merged.unlabelled, 2 * (h.positives + h.negatives))
    assert merged.n_unlabelled == 2_000 and merged.n == 1_000
    assert b.n_unlabelled == 0
    assert sums_seed(b + a) != sums_seed(b)  # a new unlabelled row changes the result's seed
    with pytest.raises(ValueError, match="no examples"):
        compute_window_result(MODEL, WindowSums(0, 0, None, None, a.confusion, None), None)


def test_a_failing_estimate_leaves_the_labelled_result_with_a_reason(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(5)
    ref_h = STREAM.window(rng, n=50_000, prior=0.1)
    window_h = STREAM.window(rng, n=5_000, prior=0.05)
    both = _labelled(window_h) + _unlabelled(window_h)
    healthy = compute_window_result(MODEL, both, _labelled(ref_h), rng=np.random.default_rng(0))
    assert healthy.estimate is not None and "estimate" not in healthy.reasons

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Failed to converge after 100 iterations.")

    monkeypatch.setattr(window_estimate, "estimate_window", broken)
    result = compute_window_result(MODEL, both, _labelled(ref_h), rng=np.random.default_rng(0))
    assert result.estimate is None
    assert result.reasons == {
        **healthy.reasons,
        "estimate": "the label-free estimate failed "
        "(RuntimeError: Failed to converge after 100 iterations.)",
    }
    assert (result.metrics, result.intervals, result.drift, result.curves) == (
        healthy.metrics,
        healthy.intervals,
        healthy.drift,
        healthy.curves,
    )
    assert "label-free estimate" in caplog.text
    unlabelled_only = compute_window_result(MODEL, _unlabelled(window_h), _labelled(ref_h))
    assert unlabelled_only.estimate is None
    assert set(unlabelled_only.reasons) == {"estimate", "maturity"}

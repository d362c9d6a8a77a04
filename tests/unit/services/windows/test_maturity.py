"""A partially labelled window in the service's computation (no database): its maturity
document, the drift verdict on its completed prior, merged windows, the drift reference,
and a summary refresh carrying the completed metrics' intervals over."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from app.drift.histograms import WindowHistograms
from app.drift.simulation import BinormalStream
from app.maturity import NoCompletion, complete
from app.metrics.binning import default_bin_edges
from app.services.models.config import ModelConfig
from app.services.refresh.document import window_document
from app.services.windows import maturity
from app.services.windows.compute import Tier, compute_window_result
from app.services.windows.maturity import reference_window, whole_counts
from app.services.windows.sums import WindowSums

THRESHOLDS = (0.5,)
EDGES = default_bin_edges(THRESHOLDS, n_bins=500)
STREAM = BinormalStream(EDGES, mu_positive=0.5, mu_negative=-1.5)
MODEL = ModelConfig(
    id=1,
    name="fraud",
    window="1h",
    thresholds=THRESHOLDS,
    pi0=0.05,
    cost_ratio=None,
    segments=frozenset(),
    sla=(),
    drift={"reference": {"trailing_windows": 1}, "alpha": 0.01},
    bin_edges=EDGES,
    label_missingness="class",
)


def _sums(pos: np.ndarray, neg: np.ndarray, unlabelled: np.ndarray | None = None) -> WindowSums:
    return replace(WindowSums.from_histograms(pos, neg, EDGES, THRESHOLDS), unlabelled=unlabelled)


def _full(h: WindowHistograms) -> WindowSums:
    return _sums(h.positives, h.negatives)


def _partial(
    rng: np.random.Generator, rates: tuple[float, float], n: int = 20_000
) -> tuple[WindowSums, WindowHistograms]:
    """A window of n predictions at prior 0.06, with the labels of a share of each class."""
    h = STREAM.window(rng, n=n, prior=0.06)
    pos = rng.binomial(h.positives.astype(np.int64), rates[0])
    neg = rng.binomial(h.negatives.astype(np.int64), rates[1])
    unlabelled = (h.positives + h.negatives).astype(np.int64)
    return _sums(pos, neg, unlabelled), h


def test_the_prior_test_reads_the_completed_prior() -> None:
    rng = np.random.default_rng(11)
    reference = _full(STREAM.window(rng, n=40_000, prior=0.06))
    window, _ = _partial(rng, (0.6, 0.15))
    completed = compute_window_result(MODEL, window, reference, tier=Tier.SUMMARY)
    labelled = compute_window_result(
        replace(MODEL, label_missingness="none"), window, reference, tier=Tier.SUMMARY
    )
    assert labelled.drift["prior"]["flag"] is True  # the labels' arrival order
    assert completed.drift["prior"]["flag"] is False
    assert completed.drift["likelihood"] == labelled.drift["likelihood"]  # labelled rows


def test_the_document_and_the_estimate_error_against_completed_values() -> None:
    rng = np.random.default_rng(12)
    window, truth = _partial(rng, (0.6, 0.15))
    reference = _full(STREAM.window(rng, n=40_000, prior=0.06))
    result = compute_window_result(MODEL, window, reference)
    maturity = result.maturity
    assert maturity is not None and "maturity" not in result.reasons
    assert window.hist_positives is not None and window.hist_negatives is not None
    expected = complete(
        window.unlabelled,
        window.hist_positives,
        window.hist_negatives,
        assumption="class",
        threshold_bins=(int(np.searchsorted(EDGES, 0.5)),),
        alpha=0.01,
    )
    assert maturity["prior"]["value"] == pytest.approx(expected.prior.value, rel=1e-12)
    assert (
        abs(maturity["prior"]["value"] - truth.prior)
        < 0.01
        < abs(window.positives / window.n - truth.prior)
    )
    estimate = result.estimate
    assert estimate is not None and estimate["error_against"] == "completed"
    for name in ("prior", "precision", "f1"):
        assert estimate["error"][name] == pytest.approx(
            estimate["metrics"][name] - maturity["metrics"][name], abs=1e-12
        )
    assert {"prior", "precision", "recall"} <= set(maturity["intervals"])


def test_merged_windows_sum_each_windows_completion() -> None:
    rng = np.random.default_rng(13)
    a, _ = _partial(rng, (0.6, 0.15))
    b, _ = _partial(rng, (0.9, 0.6), n=10_000)
    merged = a + b
    result = compute_window_result(MODEL, merged, None, parts=(a, b))
    parts = [compute_window_result(MODEL, w, None).maturity for w in (a, b)]
    assert result.maturity is not None and all(p is not None for p in parts)
    whole = [p["labelled"] / p["completeness"] for p in parts if p is not None]
    positives = sum(p["prior"]["value"] * n for p, n in zip(parts, whole, strict=True) if p)
    assert result.maturity["prior"]["value"] == pytest.approx(positives / sum(whole), rel=1e-9)
    summed = compute_window_result(MODEL, merged, None)  # completing the sum instead
    assert summed.maturity is not None
    assert summed.maturity["prior"]["value"] != pytest.approx(
        result.maturity["prior"]["value"], abs=1e-4
    )


def test_a_merged_window_has_intervals_drawn_from_each_stored_window() -> None:
    rng = np.random.default_rng(16)
    a, _ = _partial(rng, (0.6, 0.15))
    b, _ = _partial(rng, (0.9, 0.6), n=10_000)
    m = compute_window_result(MODEL, a + b, None, parts=(a, b)).maturity
    assert m is not None and "intervals" not in m["reasons"]
    names = ("prior", "precision", "recall", "f1", "mcc", "accuracy", "auc_roc", "calibrated_f1")
    for name in names:
        interval = m["intervals"][name]
        assert interval["lower"] <= m["metrics"][name] <= interval["upper"], name
        assert interval["upper"] - interval["lower"] > 0.0, name


def test_a_merged_window_of_too_many_stored_windows_has_its_prior_interval_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(17)
    a, _ = _partial(rng, (0.6, 0.15))
    b, _ = _partial(rng, (0.9, 0.6), n=10_000)
    monkeypatch.setattr(maturity, "MAX_MERGED_INTERVAL_PARTS", 1)
    m = compute_window_result(MODEL, a + b, None, parts=(a, b)).maturity
    assert m is not None and set(m["intervals"]) == {"prior"}
    assert m["intervals"]["prior"]["lower"] < m["prior"]["value"] < m["intervals"]["prior"]["upper"]
    assert m["reasons"]["intervals"] == maturity.MERGED_TOO_MANY


def test_the_reference_sums_completed_windows() -> None:
    rng = np.random.default_rng(14)
    window, truth = _partial(rng, (0.6, 0.15))
    completed = reference_window(MODEL, window)
    assert completed.unlabelled is None and completed.has_full_histograms
    assert completed.n == window.n_unlabelled
    assert abs(completed.positives / completed.n - truth.prior) < 0.01
    assert reference_window(replace(MODEL, label_missingness="none"), window) is window
    values = np.array([0.4, 0.4, 0.4, 1.8, 0.0, 2.5])
    rounded = whole_counts(values)
    assert rounded.sum() == round(values.sum())
    assert np.all(np.abs(np.cumsum(rounded) - np.cumsum(values)) <= 0.5)


def test_a_summary_carries_the_completed_intervals_over() -> None:
    rng = np.random.default_rng(15)
    window, _ = _partial(rng, (0.6, 0.15))
    full = compute_window_result(MODEL, window, None)
    summary = compute_window_result(MODEL, window, None, tier=Tier.SUMMARY)
    assert summary.maturity is not None and summary.maturity["intervals"] == {}
    assert full.maturity is not None
    now = datetime(2026, 11, 27, tzinfo=UTC)
    doc = window_document(summary, full.intervals, full.maturity, version=2, computed_at=now)
    assert doc["maturity"]["intervals"] == full.maturity["intervals"]
    assert doc["maturity"]["metrics"] == full.maturity["metrics"]


def test_a_fine_models_intervals_are_drawn_on_coarse_bins_and_agree_with_the_fine_draws(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """500 bins > INTERVAL_BINS: the bootstrap runs on the coarse bins, each interval
    moved onto the window's completed value; the fine bootstrap (the bound lifted)
    gives intervals within Monte-Carlo noise of them, and each brackets the value."""
    window, _ = _partial(np.random.default_rng(61), (0.6, 0.15))
    monkeypatch.setattr(maturity, "INTERVAL_BINS", 100)
    coarse = compute_window_result(MODEL, window, None).maturity
    monkeypatch.setattr(maturity, "INTERVAL_BINS", 10_000)
    fine = compute_window_result(MODEL, window, None).maturity
    assert coarse is not None and fine is not None
    compared = ("precision", "recall", "f1", "mcc", "accuracy", "auc_roc", "calibrated_f1")
    for name in compared:
        value, a, b = coarse["metrics"][name], coarse["intervals"][name], fine["intervals"][name]
        assert a["lower"] <= value <= a["upper"], name
        width = b["upper"] - b["lower"]
        assert abs(a["lower"] - b["lower"]) < 0.25 * width, name
        assert abs(a["upper"] - b["upper"]) < 0.25 * width, name


def test_coarse_rows_that_cannot_be_completed_fall_back_to_the_fine_bins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bootstrap never pairs the fine completion with coarse rows (shapes differ)."""
    window, _ = _partial(np.random.default_rng(62), (0.6, 0.15))
    completion = complete(
        window.unlabelled, window.hist_positives, window.hist_negatives, assumption="class"
    )
    assert not isinstance(completion, NoCompletion)
    monkeypatch.setattr(maturity, "INTERVAL_BINS", 100)
    monkeypatch.setattr(maturity, "complete", lambda *a, **k: NoCompletion("labels-exceed-scores"))
    rows = (window.unlabelled, window.hist_positives, window.hist_negatives)
    drawn_rows, edges, drawn = maturity._coarse(MODEL, rows, completion)
    assert drawn is completion and len(edges) == len(EDGES)
    assert all(len(r) == len(EDGES) - 1 for r in drawn_rows)
    monkeypatch.undo()
    drawn_rows, edges, drawn = maturity._coarse(MODEL, rows, completion)
    assert drawn is not completion
    assert len(EDGES) > len(edges) - 1 <= maturity.INTERVAL_BINS + len(THRESHOLDS)
    assert all(len(r) == len(edges) - 1 for r in drawn_rows)

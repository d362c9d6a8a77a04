"""Estimated metrics equal the labelled metrics of a window that is exactly the mixture."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, f1_score, precision_score, roc_auc_score

from app.drift.histograms import WindowHistograms
from app.drift.simulation import BinormalStream
from app.estimation import MixtureReference, estimate_window
from app.estimation.metrics import estimated_metrics, mixture_curve
from app.metrics.binning import default_bin_edges
from app.metrics.confusion import ConfusionCounts
from app.metrics.evaluate import evaluate, evaluate_at_thresholds, evaluate_counts, threshold_suffix

THRESHOLDS = (0.5, 0.3, 0.7)
EDGES = default_bin_edges(THRESHOLDS)
STREAM = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-1.5)
OPTIONS = {"pi0": 0.1, "cost_ratio": 0.3}


@pytest.fixture(scope="module")
def reference_histograms() -> WindowHistograms:
    return STREAM.window(np.random.default_rng(11), n=20_000, prior=0.1)


def _examples(positives: np.ndarray, negatives: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-example scores (each bin's lower edge) and labels of whole-number histograms."""
    lower = EDGES[:-1]
    scores = np.concatenate(
        (np.repeat(lower, positives.astype(int)), np.repeat(lower, negatives.astype(int)))
    )
    labels = np.concatenate((np.ones(int(positives.sum())), np.zeros(int(negatives.sum()))))
    return scores, labels


def _labelled_window_metrics(
    positives: np.ndarray, negatives: np.ndarray
) -> dict[str, float | None]:
    scores, labels = _examples(positives, negatives)
    out = evaluate(scores, labels, threshold=THRESHOLDS[0], **OPTIONS)
    out.pop("brier"), out.pop("log_loss")
    others = THRESHOLDS[1:]
    out.update(
        evaluate_at_thresholds(
            others,
            [ConfusionCounts.from_predictions(scores, labels, t) for t in others],
            **OPTIONS,
        )
    )
    return out


def _assert_same(got: dict[str, float | None], want: dict[str, float | None], tol: float) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if value is None:
            assert got[key] is None, key
        else:
            assert got[key] == pytest.approx(value, rel=tol, abs=tol), key


def test_estimated_metrics_are_those_of_the_mixture_window(
    reference_histograms: WindowHistograms,
) -> None:
    """Window = 3 x the reference's positives + 1 x its negatives: prior 3 P / (3 P + N)."""
    ref = MixtureReference.from_histograms(reference_histograms)
    pos, neg = 3.0 * reference_histograms.positives, reference_histograms.negatives
    n = float(pos.sum() + neg.sum())
    prior = float(pos.sum()) / n
    got = estimated_metrics(ref, prior, n, THRESHOLDS, **OPTIONS)
    want = _labelled_window_metrics(pos, neg)
    _assert_same(got, want, 1e-9)
    # and independently of this project's code, where scikit-learn has the metric
    scores, labels = _examples(pos, neg)
    predicted = scores >= 0.5
    assert got["precision"] == pytest.approx(precision_score(labels, predicted), rel=1e-12)
    assert got["f1"] == pytest.approx(f1_score(labels, predicted), rel=1e-12)
    assert got["f1@t=0.3"] == pytest.approx(f1_score(labels, scores >= 0.3), rel=1e-12)
    assert got["auc_pr"] == pytest.approx(average_precision_score(labels, scores), rel=1e-9)
    assert got["auc_roc"] == pytest.approx(roc_auc_score(labels, scores), rel=1e-9)
    assert got["prior"] == pytest.approx(prior, rel=1e-12)


@pytest.mark.slow
def test_prior_free_and_calibrated_metrics_are_the_references(
    reference_histograms: WindowHistograms,
) -> None:
    ref = MixtureReference.from_histograms(reference_histograms)
    at_reference = _labelled_window_metrics(
        reference_histograms.positives, reference_histograms.negatives
    )
    at_shifted = estimated_metrics(ref, 0.02, 50_000.0, THRESHOLDS, **OPTIONS)
    for key in (
        "auc_roc",
        "ks",
        "recall",
        "fpr",
        "balanced_accuracy",
        "calibrated_f1",
        "calibrated_precision",
        "calibrated_auc_pr",
        "calibrated_mcc@t=0.3",
    ):
        assert at_shifted[key] == pytest.approx(at_reference[key], rel=1e-9), key
    for key in ("precision", "f1", "auc_pr", "npv@t=0.7"):
        assert at_shifted[key] != pytest.approx(at_reference[key], rel=1e-3), key


def test_the_whole_estimate_recovers_the_mixture_window(
    reference_histograms: WindowHistograms,
) -> None:
    """With a reference so large that the pseudo-count vanishes, the estimate is exact."""
    big = WindowHistograms(
        reference_histograms.positives * 10_000, reference_histograms.negatives * 10_000, EDGES
    )
    ref = MixtureReference.from_histograms(big)
    pos, neg = 3.0 * reference_histograms.positives, reference_histograms.negatives
    est = estimate_window(ref, pos + neg, thresholds=THRESHOLDS, **OPTIONS)
    assert est.prior.value == pytest.approx(pos.sum() / (pos.sum() + neg.sum()), abs=1e-6)
    assert est.prior.fit.p_value == pytest.approx(1.0, abs=1e-6)
    _assert_same(est.metrics, _labelled_window_metrics(pos, neg), 1e-4)
    doc = est.to_document()
    assert set(doc) == {"n", "prior", "metrics", "fit", "reliable", "unreliable_reason"}
    assert set(doc["prior"]) >= {"value", "lower", "upper", "bbse"}
    assert set(doc["fit"]) >= {"p_value", "verdict"}
    assert doc["n"] == pos.sum() + neg.sum()
    assert doc["fit"]["verdict"] == "prior" and doc["reliable"] is True
    assert doc["metrics"] == est.metrics


def test_a_prior_of_zero_leaves_class_metrics_undefined(
    reference_histograms: WindowHistograms,
) -> None:
    ref = MixtureReference.from_histograms(reference_histograms)
    got = estimated_metrics(ref, 0.0, 1_000.0, THRESHOLDS, **OPTIONS)
    assert got["prior"] == 0.0
    assert got["precision"] == 0.0 and got["recall"] is None and got["auc_pr"] is None
    assert got["specificity"] == pytest.approx(1.0 - ref.curve.confusion_at(0.5).alpha)
    curve = mixture_curve(ref, 0.0, 1_000.0)
    assert curve.n == pytest.approx(1_000.0) and curve.positives == 0.0


def test_evaluate_at_thresholds_suffixes_and_skips_empty_matrices() -> None:
    counts = ConfusionCounts(8, 2, 2, 88)
    out = evaluate_at_thresholds([0.25, 0.75], [counts, ConfusionCounts(0, 0, 0, 0)], pi0=0.2)
    assert threshold_suffix(0.25) == "@t=0.25"
    assert out["f1@t=0.25"] == 0.8
    assert "prior@t=0.25" not in out and not any(k.endswith("@t=0.75") for k in out)
    plain = evaluate_counts(None, counts, None, pi0=0.2)
    assert {k.removesuffix("@t=0.25") for k in out} == set(plain) - {"prior"}

"""ConfusionCounts against scikit-learn and its (n, pi, alpha, beta) parametrisation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn import metrics as skm

from app.errors import InvalidInput
from app.metrics.confusion import ConfusionCounts


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.77, 1.0])
def test_from_predictions_matches_sklearn_confusion_matrix(threshold: float) -> None:
    rng = np.random.default_rng(1)
    s = np.round(rng.random(500), 2)
    y = (rng.random(500) < s).astype(int)
    c = ConfusionCounts.from_predictions(s, y, threshold)
    tn, fp, fn, tp = skm.confusion_matrix(y, s >= threshold, labels=[0, 1]).ravel()
    assert (c.tp, c.fp, c.fn, c.tn) == (tp, fp, fn, tn)


def test_ties_at_the_threshold_are_predicted_positive() -> None:
    c = ConfusionCounts.from_predictions([0.5, 0.5, 0.4999], [1, 0, 1], 0.5)
    assert c == ConfusionCounts(tp=1, fp=1, fn=1, tn=0)


def test_rates_prior_and_their_round_trip() -> None:
    c = ConfusionCounts(tp=30, fp=10, fn=20, tn=140)
    assert c.positives == 50 and c.negatives == 150 and c.n == 200
    assert c.prior == 0.25 and c.alpha == pytest.approx(10 / 150) and c.beta == 0.4
    back = ConfusionCounts.from_rates(c.prior, c.alpha, c.beta, n=c.n)
    for field in ("tp", "fp", "fn", "tn"):
        assert getattr(back, field) == pytest.approx(getattr(c, field), rel=1e-14)


def test_at_prior_keeps_error_rates_and_sets_the_prior() -> None:
    c = ConfusionCounts(tp=30, fp=10, fn=20, tn=140)
    ref = c.at_prior(0.02)
    assert ref.n == pytest.approx(1.0)
    assert ref.prior == pytest.approx(0.02)
    assert ref.alpha == pytest.approx(c.alpha) and ref.beta == pytest.approx(c.beta)


def test_undefined_rates_are_nan_and_propagate() -> None:
    empty = ConfusionCounts(0, 0, 0, 0)
    assert math.isnan(empty.prior) and math.isnan(empty.alpha) and math.isnan(empty.beta)
    no_neg = ConfusionCounts(3, 0, 1, 0)
    assert math.isnan(no_neg.alpha) and no_neg.beta == 0.25
    ref = no_neg.at_prior(0.5)
    assert math.isnan(ref.fp) and math.isnan(ref.tn)


def test_addition_is_cellwise() -> None:
    a, b = ConfusionCounts(1, 2, 3, 4), ConfusionCounts(10, 20, 30, 40)
    assert a + b == ConfusionCounts(11, 22, 33, 44)


def test_from_predictions_validates_threshold() -> None:
    with pytest.raises(InvalidInput) as err:
        ConfusionCounts.from_predictions([0.2], [1], threshold=1.5)
    assert err.value.field == "threshold"

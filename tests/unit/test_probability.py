"""Brier score, log loss, class means and PSI against scikit-learn and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn import metrics as skm

from app.errors import InvalidInput
from app.metrics.probability import (
    LOG_LOSS_EPS,
    ProbabilitySums,
    brier_score_loss,
    log_loss,
    mean_score_negative,
    mean_score_positive,
    population_stability_index,
)


def _data(seed: int, n: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(int)
    s = np.clip(rng.beta(2, 5, n) + 0.3 * y, 0.001, 0.999)
    return s, y


@pytest.mark.parametrize("seed", [0, 1])
def test_brier_log_loss_and_class_means_match_sklearn_and_numpy(seed: int) -> None:
    s, y = _data(seed)
    sums = ProbabilitySums.from_predictions(s, y)
    assert brier_score_loss(sums) == pytest.approx(skm.brier_score_loss(y, s), rel=1e-12)
    assert log_loss(sums) == pytest.approx(skm.log_loss(y, s), rel=1e-12)
    assert mean_score_positive(sums) == pytest.approx(s[y == 1].mean(), rel=1e-12)
    assert mean_score_negative(sums) == pytest.approx(s[y == 0].mean(), rel=1e-12)
    assert sums.positives == y.sum() and sums.negatives == (1 - y).sum()


def test_sums_are_additive_over_batches() -> None:
    s, y = _data(2)
    whole = ProbabilitySums.from_predictions(s, y)
    parts = ProbabilitySums.from_predictions(s[:300], y[:300]) + ProbabilitySums.from_predictions(
        s[300:], y[300:]
    )
    for field in ProbabilitySums.__slots__:
        assert getattr(parts, field) == pytest.approx(getattr(whole, field), rel=1e-12), field
    assert parts.n == s.size


def test_log_loss_clips_certain_mistakes() -> None:
    sums = ProbabilitySums.from_predictions([0.0, 1.0, 1.0, 0.0], [1, 0, 1, 0])
    assert log_loss(sums) == pytest.approx(-2 * math.log(LOG_LOSS_EPS) / 4, rel=1e-9)
    assert brier_score_loss(sums) == 0.5


def test_empty_sums_and_missing_classes_are_undefined() -> None:
    empty = ProbabilitySums(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert math.isnan(brier_score_loss(empty)) and math.isnan(log_loss(empty))
    only_neg = ProbabilitySums.from_predictions([0.2, 0.4], [0, 0])
    assert math.isnan(mean_score_positive(only_neg))
    assert mean_score_negative(only_neg) == pytest.approx(0.3)


def test_psi_matches_hand_computation() -> None:
    e = np.array([10.0, 20.0, 30.0, 40.0])
    a = np.array([20.0, 20.0, 20.0, 40.0])
    pe, pa = e / e.sum(), a / a.sum()
    want = sum((x - w) * math.log(x / w) for x, w in zip(pa, pe, strict=True))
    assert population_stability_index(e, a) == pytest.approx(want, rel=1e-12)
    assert population_stability_index(e, 3 * e) == pytest.approx(0.0, abs=1e-15)
    assert population_stability_index(e, a) == pytest.approx(
        population_stability_index(a, e), rel=1e-12
    )  # symmetric


def test_psi_floors_empty_bins() -> None:
    got = population_stability_index([0, 50, 50], [10, 45, 45], floor=1e-3)
    pe = np.array([1e-3, 0.5, 0.5])
    pa = np.array([0.1, 0.45, 0.45])
    assert got == pytest.approx(float(np.sum((pa - pe) * np.log(pa / pe))), rel=1e-12)


@pytest.mark.parametrize(
    ("expected", "actual", "floor", "field"),
    [
        ([1, 2], [1, 2, 3], 1e-4, "actual"),
        ([0, 0], [1, 2], 1e-4, "expected"),
        ([1, -2], [1, 2], 1e-4, "expected"),
        ([1, 2], [1, np.nan], 1e-4, "actual"),
        ([], [], 1e-4, "expected"),
        ([1, 2], [1, 2], 0.0, "floor"),
    ],
)
def test_psi_validates_input(
    expected: list[float], actual: list[float], floor: float, field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        population_stability_index(expected, actual, floor=floor)
    assert err.value.field == field

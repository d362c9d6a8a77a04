"""Brier score, log loss, class means and PSI against scikit-learn and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sklearn import metrics as skm

from app.errors import InvalidInput
from app.metrics.probability import (
    LOG_LOSS_EPS,
    LOG_LOSS_MAX,
    ProbabilitySums,
    SumBounds,
    brier_score_loss,
    log_loss,
    mean_score_negative,
    mean_score_positive,
    population_stability_index,
    probability_sum_bounds,
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


# --- bounds of the sums (what a histogram batch's sums may claim) -------------------

EDGE_SCORES = (0.0, 1e-300, 1e-16, LOG_LOSS_EPS, math.e * LOG_LOSS_EPS, 1e-9, 0.5,
               1 - 1e-9, 1 - LOG_LOSS_EPS, 1 - 1e-16, 1.0)  # fmt: skip
"""Scores where the clipped log loss bends, and around them."""


def _bounds(s: np.ndarray, y: np.ndarray) -> tuple[ProbabilitySums, SumBounds]:
    """The sums of scores ``s`` and labels ``y``, and their bounds without slack."""
    sums = ProbabilitySums.from_predictions(s, y)
    counts = (sums.positives, sums.negatives, sums.score_sum_positive, sums.score_sum_negative)
    return sums, probability_sum_bounds(*counts, tolerance=0.0)


@given(
    st.lists(
        st.tuples(st.one_of(st.sampled_from(EDGE_SCORES), st.floats(0.0, 1.0)), st.booleans()),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 4),
)
@example([(0.0, True), (math.e * LOG_LOSS_EPS, True)], 1)  # below the tangent point
@example([(1 - 1e-16, False)] * 7, 1)  # 1 - S0/N rounds to about 0
def test_sums_of_real_predictions_always_lie_within_their_bounds(
    rows: list[tuple[float, bool]], chunks: int
) -> None:
    """Sums of actual scores and labels (one batch, or added over ``chunks`` batches
    as a client aggregates them) are inside the bounds their counts give."""
    s = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows], dtype=int)
    sums = ProbabilitySums(0, 0, 0, 0, 0, 0)
    for i in range(min(chunks, s.size)):
        sums += ProbabilitySums.from_predictions(s[i::chunks], y[i::chunks])
    bounds = probability_sum_bounds(
        sums.positives, sums.negatives, sums.score_sum_positive, sums.score_sum_negative
    )
    assert bounds.brier[0] <= sums.brier_sum <= bounds.brier[1]
    assert bounds.log_loss[0] <= sums.log_loss_sum <= bounds.log_loss[1]
    assert bounds.log_loss[1] <= LOG_LOSS_MAX * sums.n * (1 + 1e-8)


def test_equal_scores_reach_the_lower_bounds_and_certain_scores_the_upper() -> None:
    """Jensen's inequality is tight when every example of a class has the same score;
    the upper bounds when every score is 0 or 1 (closed forms, no slack)."""
    same, bounds = _bounds(np.array([0.3] * 4 + [0.2] * 6), np.array([1] * 4 + [0] * 6))
    assert same.brier_sum == pytest.approx(bounds.brier[0], rel=1e-12)
    assert same.log_loss_sum == pytest.approx(bounds.log_loss[0], rel=1e-12)
    assert bounds.brier[0] == pytest.approx(4 * 0.7**2 + 6 * 0.2**2, rel=1e-12)
    certain, bounds = _bounds(np.array([1.0, 0.0, 0.0, 1.0]), np.array([1, 1, 0, 0]))
    assert certain.brier_sum == bounds.brier[1] == 2.0  # (P - S1) + S0
    assert certain.log_loss_sum == pytest.approx(bounds.log_loss[1], rel=1e-12)
    assert bounds.log_loss[1] == pytest.approx(2 * LOG_LOSS_MAX, rel=1e-12)


def test_the_log_loss_floor_follows_the_clip_below_its_tangent_point() -> None:
    """Below LOG_LOSS_EPS the clipped loss is flat, not convex: two positives scored 0
    and e*eps have a smaller sum than -2 ln(mean) says, and the bound allows it."""
    s, y = np.array([0.0, math.e * LOG_LOSS_EPS]), np.array([1, 1])
    sums, bounds = _bounds(s, y)
    assert sums.log_loss_sum == pytest.approx(2 * LOG_LOSS_MAX - 1, rel=1e-12)
    naive = -2 * math.log(max(sums.score_sum_positive / 2, LOG_LOSS_EPS))
    assert sums.log_loss_sum < naive - 0.3  # the bound of the plain formula is wrong here
    assert bounds.log_loss[0] == pytest.approx(sums.log_loss_sum, rel=1e-12)  # and tight


def test_a_class_without_examples_adds_nothing_to_the_bounds() -> None:
    only_negatives = probability_sum_bounds(0, 3, 0.0, 0.6, tolerance=0.0)
    assert only_negatives.brier == pytest.approx((3 * 0.2**2, 0.6), rel=1e-12)
    assert only_negatives.log_loss[0] == pytest.approx(-3 * math.log(0.8), rel=1e-12)

"""Point metrics on a curve against brute-force rankings and resampled data."""

from __future__ import annotations

import numpy as np
import pytest

from app.errors import InvalidInput
from app.metrics.curves import (
    cumulative_counts,
    lift_at_fraction,
    precision_at_fraction,
    precision_at_recall,
    recall_at_fpr,
)


def _distinct(seed: int, n: int = 200, prior: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prior).astype(np.int8)
    y[:2] = (1, 0)
    s = 1.0 / (1.0 + np.exp(-(rng.normal(size=n) + y)))
    return s, y


def _ranked(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    return y[np.argsort(-s, kind="stable")]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_precision_at_recall_hit_exactly_and_between_positives(seed: int) -> None:
    s, y = _distinct(seed)
    c = cumulative_counts(s, y)
    ranked = _ranked(s, y)
    pos_rank = np.flatnonzero(ranked) + 1  # 1-based rank of the j-th positive
    p = pos_rank.size
    for j in (1, 2, p // 2, p):
        assert precision_at_recall(c, j / p) == pytest.approx(j / pos_rank[j - 1], rel=1e-12)
    for j in (1, p // 3, p - 1):
        negatives_before_next = pos_rank[j] - (j + 1)
        want = (j + 0.5) / (j + 0.5 + negatives_before_next)
        assert precision_at_recall(c, (j + 0.5) / p) == pytest.approx(want, rel=1e-12)


def test_precision_at_fraction_is_top_k_precision_with_ties_split_evenly() -> None:
    s, y = _distinct(3)
    c = cumulative_counts(s, y)
    ranked = _ranked(s, y)
    n = s.size
    for k in (1, 5, 37, 100, n):
        want = ranked[:k].mean()
        assert precision_at_fraction(c, k / n) == pytest.approx(want, rel=1e-12)
        assert lift_at_fraction(c, k / n) == pytest.approx(want / c.prior, rel=1e-12)
    # one tied group of 10 (4 positives) after 5 untied examples; top-8 takes 3 of the group
    s2 = np.concatenate((np.linspace(0.9, 0.8, 5), np.full(10, 0.5)))
    y2 = np.array([1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 0, 1, 0, 0])  # untied, then the group
    c2 = cumulative_counts(s2, y2)
    want_tp = 3 + 3 * 4 / 10
    assert precision_at_fraction(c2, 8 / 15) == pytest.approx(want_tp / 8, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 4])
def test_recall_at_fpr_is_the_best_tpr_within_the_fpr_budget(seed: int) -> None:
    s, y = _distinct(seed)
    c = cumulative_counts(s, y)
    ranked = _ranked(s, y)
    neg_rank = np.flatnonzero(ranked == 0)
    n_neg, p = neg_rank.size, ranked.sum()
    for i in (0, 1, 10, n_neg // 2, n_neg - 1):
        want = ranked[: neg_rank[i]].sum() / p  # positives above the (i+1)-th negative
        assert recall_at_fpr(c, i / n_neg) == pytest.approx(want, rel=1e-12)
    assert recall_at_fpr(c, 1.0) == 1.0


def test_point_metrics_at_a_reference_prior_match_resampled_data() -> None:
    s, y = _distinct(5)
    c = cumulative_counts(s, y)
    k = 4  # every negative duplicated k times: same (alpha, beta), prior P/(P + kN)
    s_k = np.concatenate((s[y == 1], np.repeat(s[y == 0], k)))
    y_k = np.concatenate((np.ones(int(c.positives)), np.zeros(k * int(c.negatives))))
    c_k = cumulative_counts(s_k, y_k)
    u = np.array([0.05, 0.3, 0.55, 1.0])
    np.testing.assert_allclose(
        precision_at_recall(c, u, prior=c_k.prior), precision_at_recall(c_k, u), rtol=1e-12
    )
    x = np.array([0.01, 0.2, 0.7, 1.0])
    np.testing.assert_allclose(
        precision_at_fraction(c, x, prior=c_k.prior), precision_at_fraction(c_k, x), rtol=1e-12
    )
    np.testing.assert_allclose(
        lift_at_fraction(c, x, prior=c_k.prior), lift_at_fraction(c_k, x), rtol=1e-12
    )
    np.testing.assert_allclose(recall_at_fpr(c, x), recall_at_fpr(c_k, x), rtol=1e-12)


def test_array_queries_keep_their_shape_and_match_scalar_queries() -> None:
    c = cumulative_counts(*_distinct(6))
    q = np.array([[0.1, 0.5], [0.9, 1.0]])
    for f in (precision_at_recall, precision_at_fraction, lift_at_fraction, recall_at_fpr):
        got = f(c, q)
        assert got.shape == (2, 2)
        assert [f(c, float(v)) for v in q.ravel()] == pytest.approx(got.ravel(), rel=1e-15)
        assert isinstance(f(c, 0.5), float)


def test_undefined_point_metrics_are_nan() -> None:
    no_pos = cumulative_counts([0.9, 0.2], [0, 0])
    no_neg = cumulative_counts([0.9, 0.2], [1, 1])
    assert np.isnan(precision_at_recall(no_pos, 0.5))
    assert np.isnan(precision_at_fraction(no_pos, 0.5))
    assert np.isnan(lift_at_fraction(no_pos, 0.5))
    assert np.isnan(recall_at_fpr(no_pos, 0.5)) and np.isnan(recall_at_fpr(no_neg, 0.5))
    assert precision_at_recall(no_neg, 0.5) == 1.0  # own prior: every prediction is right
    assert np.isnan(precision_at_recall(no_neg, 0.5, prior=0.1))  # FPR unknown
    assert np.all(np.isnan(precision_at_fraction(no_neg, np.array([0.5, 1.0]), prior=0.1)))


@pytest.mark.parametrize(
    ("func", "value", "field"),
    [
        (precision_at_recall, 0.0, "u"),
        (precision_at_recall, 1.5, "u"),
        (precision_at_fraction, 0.0, "x"),
        (lift_at_fraction, np.nan, "x"),
        (recall_at_fpr, -0.1, "fpr"),
    ],
)
def test_query_values_are_validated(func: object, value: float, field: str) -> None:
    c = cumulative_counts([0.9, 0.2], [1, 0])
    with pytest.raises(InvalidInput) as err:
        func(c, value)  # type: ignore[operator]
    assert err.value.field == field

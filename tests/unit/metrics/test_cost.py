"""Cost-sensitive metrics (app/metrics/cost.py) against independent computations.

References: scikit-learn's (weighted) accuracy, brute-force per-example costs,
explicit resampling, scipy's hypergeometric function and weighted quadrature,
Monte-Carlo, closed forms for the uniform and arcsine weights, and the
trapezoid EWA of the authors' code (Beta placed on c = 1 − w).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special, stats
from sklearn.metrics import accuracy_score

from app.errors import InvalidInput
from app.metrics.confusion import ConfusionCounts
from app.metrics.cost import (
    UnitCosts,
    beta_from_moments,
    expected_weighted_accuracy,
    target_weight,
    weight_range,
    weighted_accuracy,
    weighted_accuracy_from_counts,
)
from app.metrics.undefined import to_optional

count = st.integers(min_value=0, max_value=10_000)
positive_count = st.integers(min_value=1, max_value=10_000)
unit = st.floats(min_value=0.0, max_value=1.0)
open_unit = st.floats(min_value=1e-3, max_value=1.0 - 1e-3)
cost = st.floats(min_value=-100.0, max_value=100.0, allow_nan=False)
gap = st.floats(min_value=1e-2, max_value=100.0)


@st.composite
def unit_costs(draw: st.DrawFn) -> UnitCosts:
    c_tp, c_tn = draw(cost), draw(cost)
    return UnitCosts(c_tp=c_tp, c_fn=c_tp + draw(gap), c_tn=c_tn, c_fp=c_tn + draw(gap))


def _brute_force_wa(tp: float, fp: float, fn: float, tn: float, w: float) -> float:
    return (w * tp + (1 - w) * tn) / (w * (tp + fn) + (1 - w) * (fp + tn))


# ---------------------------------------------------------------- WA itself


@given(count, count, count, count)
def test_weighted_accuracy_at_one_half_is_accuracy(tp: int, fp: int, fn: int, tn: int) -> None:
    n = tp + fp + fn + tn
    wa = weighted_accuracy(tp, fp, fn, tn, 0.5)
    if n == 0:
        assert math.isnan(wa)
    else:
        assert wa == pytest.approx((tp + tn) / n, rel=1e-12, abs=1e-15)


def test_weighted_accuracy_is_sklearn_accuracy_with_class_weights() -> None:
    rng = np.random.default_rng(11)
    y = rng.random(2_000) < 0.07
    pred = np.where(y, rng.random(y.size) < 0.8, rng.random(y.size) < 0.1)
    c = ConfusionCounts.from_predictions(pred.astype(float), y.astype(int), 0.5)
    for w in (0.0, 0.1, 0.5, 0.93, 1.0):
        expected = accuracy_score(y, pred, sample_weight=np.where(y, w, 1.0 - w))
        assert weighted_accuracy(c.tp, c.fp, c.fn, c.tn, w) == pytest.approx(expected, rel=1e-12)


@given(count, count, count, count, unit)
def test_weighted_accuracy_matches_formula_and_bounds(
    tp: int, fp: int, fn: int, tn: int, w: float
) -> None:
    wa = weighted_accuracy(tp, fp, fn, tn, w)
    den = w * (tp + fn) + (1 - w) * (fp + tn)
    if den == 0:
        assert math.isnan(wa)
        assert to_optional(wa) is None
    else:
        assert 0.0 <= wa <= 1.0
        assert wa == pytest.approx(_brute_force_wa(tp, fp, fn, tn, w), rel=1e-9, abs=1e-12)


def test_weighted_accuracy_undefined_cases_are_nan_not_zero() -> None:
    assert math.isnan(weighted_accuracy(0, 0, 0, 0, 0.3))
    assert math.isnan(weighted_accuracy(5, 0, 2, 0, 0.0))  # no negatives, all weight on them
    assert math.isnan(weighted_accuracy(0, 4, 0, 3, 1.0))  # no positives, all weight on them
    assert weighted_accuracy(5, 0, 2, 0, 0.3) == pytest.approx(5 / 7)


def test_vectorised_form_broadcasts_over_weights() -> None:
    w = np.linspace(0.0, 1.0, 11)
    got = weighted_accuracy_from_counts(8.0, 2.0, 2.0, 88.0, w)
    expected = [_brute_force_wa(8, 2, 2, 88, x) for x in w]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((-1, 2, 3, 4, 0.5), "tp"),
        ((1, -2, 3, 4, 0.5), "fp"),
        ((1, 2, float("nan"), 4, 0.5), "fn"),
        ((1, 2, 3, float("inf"), 0.5), "tn"),
        ((1, 2, 3, 4, 1.5), "w"),
        ((1, 2, 3, 4, -0.1), "w"),
        ((1, 2, 3, 4, float("nan")), "w"),
        (("x", 2, 3, 4, 0.5), "tp"),
    ],
)
def test_weighted_accuracy_rejects_bad_input(args: tuple[float, ...], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        weighted_accuracy(*args)
    assert err.value.field == field


# ---------------------------------------------------------------- costs


@given(count, count, count, count, unit_costs())
def test_wa_at_cost_ratio_is_one_minus_normalised_total_cost(
    tp: int, fp: int, fn: int, tn: int, costs: UnitCosts
) -> None:
    p, n = tp + fn, fp + tn
    # TCC_min / TCC_max are the costs of the always-right / always-wrong matrices.
    tcc_min = float(costs.total_cost(p, 0, 0, n))
    tcc_max = float(costs.total_cost(0, n, p, 0))
    assert float(costs.min_total_cost(p, n)) == pytest.approx(tcc_min, abs=1e-9)
    assert float(costs.max_total_cost(p, n)) == pytest.approx(tcc_max, abs=1e-9)
    # spec: TCC = C_FN·FN + C_FP·FP + TCC_min, and TCC_max − TCC_min = C_FN·P + C_FP·N
    tcc = float(costs.total_cost(tp, fp, fn, tn))
    assert tcc == pytest.approx(costs.shifted_fn * fn + costs.shifted_fp * fp + tcc_min, abs=1e-6)
    assert tcc_max - tcc_min == pytest.approx(
        costs.shifted_fn * p + costs.shifted_fp * n, rel=1e-9, abs=1e-6
    )
    wa = weighted_accuracy(tp, fp, fn, tn, costs.cost_ratio)
    if p + n == 0:
        assert math.isnan(wa)
        return
    expected = 1.0 - (tcc - tcc_min) / (tcc_max - tcc_min)
    assert wa == pytest.approx(expected, rel=1e-7, abs=1e-9)
    assert 1.0 - float(costs.normalised_cost(tp, fp, fn, tn)) == pytest.approx(wa, abs=1e-12)


def test_maximising_wa_over_thresholds_minimises_total_cost() -> None:
    rng = np.random.default_rng(5)
    costs = UnitCosts(c_tp=-2.0, c_fp=1.5, c_fn=40.0, c_tn=0.25)
    y = rng.random(600) < 0.1
    scores = np.clip(rng.normal(np.where(y, 0.6, 0.4), 0.15), 0.0, 1.0)
    thresholds = np.unique(np.concatenate([scores, [0.0, 1.0]]))
    wa, tcc = [], []
    for t in thresholds:  # brute force: per-example costs summed
        pred = scores >= t
        per_example = np.select(
            [pred & y, pred & ~y, ~pred & y, ~pred & ~y],
            [costs.c_tp, costs.c_fp, costs.c_fn, costs.c_tn],
        )
        tcc.append(per_example.sum())
        c = ConfusionCounts.from_predictions(scores, y, t)
        wa.append(weighted_accuracy(c.tp, c.fp, c.fn, c.tn, costs.cost_ratio))
    wa_a, tcc_a = np.array(wa), np.array(tcc)
    best_wa = set(np.flatnonzero(wa_a >= wa_a.max() - 1e-12))
    cheapest = set(np.flatnonzero(tcc_a <= tcc_a.min() + 1e-9))
    assert best_wa == cheapest
    # the whole ranking agrees: WA is a decreasing affine function of TCC
    slope = np.polyfit(tcc_a, wa_a, 1)[0]
    assert slope < 0
    np.testing.assert_allclose(np.polyval(np.polyfit(tcc_a, wa_a, 1), tcc_a), wa_a, atol=1e-10)
    # and a different weight does not, in general, pick the cheapest threshold
    wa_half = []
    for t in thresholds:
        c = ConfusionCounts.from_predictions(scores, y, t)
        wa_half.append(weighted_accuracy(c.tp, c.fp, c.fn, c.tn, 0.5))
    assert int(np.argmax(wa_half)) not in cheapest


def test_unit_costs_ratio_and_shifts() -> None:
    c = UnitCosts(c_tp=1.0, c_fp=3.0, c_fn=10.0, c_tn=0.0)
    assert (c.shifted_fn, c.shifted_fp) == (9.0, 3.0)
    assert c.cost_ratio == pytest.approx(0.75)
    assert math.isnan(float(c.normalised_cost(0, 0, 0, 0)))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"c_tp": 5.0, "c_fp": 1.0, "c_fn": 5.0, "c_tn": 0.0}, "c_fn"),
        ({"c_tp": 0.0, "c_fp": 1.0, "c_fn": -1.0, "c_tn": 0.0}, "c_fn"),
        ({"c_tp": 0.0, "c_fp": 0.0, "c_fn": 1.0, "c_tn": 0.0}, "c_fp"),
        ({"c_tp": float("nan"), "c_fp": 1.0, "c_fn": 1.0, "c_tn": 0.0}, "c_tp"),
        ({"c_tp": 0.0, "c_fp": 1.0, "c_fn": 1.0, "c_tn": float("-inf")}, "c_tn"),
        ({"c_tp": 0.0, "c_fp": "a", "c_fn": 1.0, "c_tn": 0.0}, "c_fp"),
    ],
)
def test_unit_costs_reject_wrong_order_and_non_finite(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        UnitCosts(**kwargs)
    assert err.value.field == field


def test_total_cost_rejects_negative_counts() -> None:
    c = UnitCosts(c_tp=0.0, c_fp=1.0, c_fn=2.0, c_tn=0.0)
    with pytest.raises(InvalidInput, match="fn"):
        c.total_cost(1, 1, -1, 1)
    with pytest.raises(InvalidInput) as err:
        c.max_total_cost(-3, 1)
    assert err.value.field == "positives"


# ---------------------------------------------------------------- target reweighting


def test_target_weight_equals_wa_on_data_resampled_to_target_prior() -> None:
    # development data: prior 1/4; deployment prior 1/2 -> every positive counted 3 times
    rng = np.random.default_rng(3)
    y = np.array([1] * 50 + [0] * 150)
    scores = np.clip(rng.normal(np.where(y == 1, 0.65, 0.4), 0.2), 0.0, 1.0)
    r_c = 0.3
    dev = ConfusionCounts.from_predictions(scores, y, 0.5)
    keep = np.concatenate([np.repeat(np.flatnonzero(y == 1), 3), np.flatnonzero(y == 0)])
    resampled = ConfusionCounts.from_predictions(scores[keep], y[keep], 0.5)
    assert resampled.prior == pytest.approx(0.5)
    w_t = target_weight(r_c, dev.prior, 0.5)
    got = weighted_accuracy(dev.tp, dev.fp, dev.fn, dev.tn, w_t)
    expected = weighted_accuracy(resampled.tp, resampled.fp, resampled.fn, resampled.tn, r_c)
    assert got == pytest.approx(expected, rel=1e-12)


@given(positive_count, count, positive_count, count, unit, open_unit)
def test_target_weight_equals_wa_on_reweighted_counts(
    tp: int, fn: int, tn: int, fp: int, r_c: float, target: float
) -> None:
    p, n = tp + fn, fp + tn
    prior = p / (p + n)
    w_t = target_weight(r_c, prior, target)
    r_plus, r_minus = target / prior, (1 - target) / (1 - prior)
    got = weighted_accuracy(tp, fp, fn, tn, w_t)
    expected = weighted_accuracy(r_plus * tp, r_minus * fp, r_plus * fn, r_minus * tn, r_c)
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


@given(unit, open_unit)
def test_target_weight_is_cost_ratio_when_priors_agree(r_c: float, prior: float) -> None:
    assert target_weight(r_c, prior, prior) == pytest.approx(r_c, abs=1e-12)


def test_target_weight_moves_towards_the_rarer_class() -> None:
    assert target_weight(0.5, 0.5, 0.1) == pytest.approx(0.1)
    assert target_weight(0.5, 0.1, 0.5) == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((1.2, 0.5, 0.5), "cost_ratio"),
        ((0.5, 0.0, 0.5), "prior"),
        ((0.5, 1.0, 0.5), "prior"),
        ((0.5, 0.5, 0.0), "target_prior"),
        ((0.5, 0.5, float("nan")), "target_prior"),
    ],
)
def test_target_weight_rejects_bad_input(args: tuple[float, float, float], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        target_weight(*args)
    assert err.value.field == field


# ---------------------------------------------------------------- EWA


def _ewa_quad_alg(tp: float, fp: float, fn: float, tn: float, a: float, b: float) -> float:
    """∫ WA(w) w^(a−1) (1−w)^(b−1) dw / B(a, b) with QUADPACK's algebraic weight."""
    value, _ = integrate.quad(
        lambda w: _brute_force_wa(tp, fp, fn, tn, w),
        0.0,
        1.0,
        weight="alg",
        wvar=(a - 1.0, b - 1.0),
        epsabs=1e-13,
        epsrel=1e-11,
        limit=200,
    )
    return float(value / special.beta(a, b))


def _ewa_hyp2f1(tp: float, fp: float, fn: float, tn: float, a: float, b: float) -> float:
    """Closed form: E[λ] = a/(a+b)·2F1(1, b; a+b+1; 1 − N/P), its mirror when N > P."""
    p, n = tp + fn, fp + tn
    if n <= p:
        share = a / (a + b) * special.hyp2f1(1.0, b, a + b + 1.0, 1.0 - n / p)
    else:
        share = 1.0 - b / (a + b) * special.hyp2f1(1.0, a, a + b + 1.0, 1.0 - p / n)
    return float(share * tp / p + (1.0 - share) * tn / n)


MATRICES = [(8, 2, 2, 88), (90, 5, 10, 3), (1, 10_000, 0, 5), (3, 2, 40, 7), (30, 70, 20, 80)]
SHAPES = [(1.0, 1.0), (0.5, 0.5), (0.1, 3.0), (3.0, 0.1), (0.05, 0.05), (2.5, 7.0), (12.0, 4.0)]


@pytest.mark.parametrize("counts", MATRICES)
@pytest.mark.parametrize(("a", "b"), SHAPES)
def test_ewa_against_weighted_quadrature_and_hypergeometric_closed_form(
    counts: tuple[int, int, int, int], a: float, b: float
) -> None:
    ewa = expected_weighted_accuracy(*counts, a, b)
    assert ewa == pytest.approx(_ewa_quad_alg(*counts, a, b), abs=1e-9)
    assert ewa == pytest.approx(_ewa_hyp2f1(*counts, a, b), abs=1e-9)


@pytest.mark.parametrize(
    ("counts", "a", "b"),
    [
        ((8, 2, 2, 88), 200.0, 50.0),  # scipy's hyp2f1 is nan here
        ((1, 100_000, 0, 5), 1000.0, 1000.0),
        ((60, 1, 40, 3), 0.2, 900.0),
        ((5, 20, 5, 975), 0.3, 0.7),
    ],
)
def test_ewa_against_monte_carlo(counts: tuple[int, int, int, int], a: float, b: float) -> None:
    rng = np.random.default_rng(2024)
    w = rng.beta(a, b, size=400_000)
    samples = _brute_force_wa(*counts, w)
    mean, se = float(samples.mean()), float(samples.std() / math.sqrt(w.size))
    assert abs(expected_weighted_accuracy(*counts, a, b) - mean) < 5 * se + 1e-12


@given(positive_count, count, count, positive_count)
@settings(max_examples=40, deadline=None)
def test_ewa_closed_forms_for_uniform_and_arcsine_weights(
    tp: int, fp: int, fn: int, tn: int
) -> None:
    p, n = tp + fn, fp + tn
    tpr, tnr = tp / p, tn / n
    # uniform: E[λ] = P/(P−N) − PN/(P−N)² ln(P/N) (1/2 when P = N)
    # (ln(P/N) as log1p((P−N)/N): math.log(P/N) loses ~1e-9 when P and N are close)
    share = 0.5 if p == n else p / (p - n) - p * n / (p - n) ** 2 * math.log1p((p - n) / n)
    uniform = share * tpr + (1 - share) * tnr
    assert expected_weighted_accuracy(tp, fp, fn, tn, 1.0, 1.0) == pytest.approx(uniform, abs=1e-9)
    # arcsine Beta(1/2, 1/2): E[λ] = √P / (√P + √N)
    share = math.sqrt(p) / (math.sqrt(p) + math.sqrt(n))
    arcsine = share * tpr + (1 - share) * tnr
    assert expected_weighted_accuracy(tp, fp, fn, tn, 0.5, 0.5) == pytest.approx(arcsine, abs=1e-9)


@given(count, count, count, count, st.floats(0.05, 50.0), st.floats(0.05, 50.0))
@settings(max_examples=60, deadline=None)
def test_ewa_lies_between_class_rates(
    tp: int, fp: int, fn: int, tn: int, a: float, b: float
) -> None:
    ewa = expected_weighted_accuracy(tp, fp, fn, tn, a, b)
    p, n = tp + fn, fp + tn
    if p + n == 0:
        assert math.isnan(ewa)
        return
    rates = ([tp / p] if p else []) + ([tn / n] if n else [])
    assert min(rates) - 1e-12 <= ewa <= max(rates) + 1e-12


def test_ewa_concentrates_on_wa_at_the_mean_weight() -> None:
    for m in (0.2, 0.5, 0.9):
        a, b = beta_from_moments(m, 1e-8)
        assert expected_weighted_accuracy(8, 2, 2, 88, a, b) == pytest.approx(
            weighted_accuracy(8, 2, 2, 88, m), abs=1e-6
        )


def test_ewa_one_class_and_empty() -> None:
    assert expected_weighted_accuracy(0, 3, 0, 7, 0.3, 0.3) == pytest.approx(0.7)
    assert expected_weighted_accuracy(6, 0, 4, 0, 0.3, 0.3) == pytest.approx(0.6)
    assert math.isnan(expected_weighted_accuracy(0, 0, 0, 0, 1.0, 1.0))


def test_ewa_matches_the_authors_trapezoid_with_beta_on_one_minus_w() -> None:
    # The authors' code integrates WA(1 − c)·Beta(c; α, β) by the trapezoid rule
    # on 1000 points; with w = 1 − c that is our Beta(β, α).
    alpha, beta = 2.0, 5.0
    tp, fp, fn, tn = 30, 12, 10, 148
    c = np.linspace(0.0, 1.0, 1000)[1:-1]
    num = tp * (1 - c) + tn * c
    den = (tp + fn) * (1 - c) + (fp + tn) * c
    theirs = float(np.trapezoid(stats.beta.pdf(c, alpha, beta) * num / den, c))
    ours = expected_weighted_accuracy(tp, fp, fn, tn, beta, alpha)
    assert ours == pytest.approx(theirs, abs=5e-5)  # their end intervals are cut off
    assert abs(expected_weighted_accuracy(tp, fp, fn, tn, alpha, beta) - theirs) > 1e-2


@pytest.mark.parametrize(
    ("a", "b", "field"),
    [(0.0, 1.0, "a"), (-1.0, 1.0, "a"), (1.0, 0.0, "b"), (1.0, float("inf"), "b"), ("x", 1, "a")],
)
def test_ewa_rejects_bad_shapes(a: float, b: float, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        expected_weighted_accuracy(1, 2, 3, 4, a, b)
    assert err.value.field == field


# ---------------------------------------------------------------- moment matching


@given(st.floats(0.01, 0.99), st.floats(0.001, 0.999))
def test_beta_from_moments_reproduces_mean_and_variance(m: float, fraction: float) -> None:
    v = fraction * m * (1 - m)
    a, b = beta_from_moments(m, v)
    dist = stats.beta(a, b)
    assert dist.mean() == pytest.approx(m, rel=1e-9)
    assert dist.var() == pytest.approx(v, rel=1e-7)


@pytest.mark.parametrize(
    ("m", "v", "field"),
    [
        (0.0, 0.01, "mean"),
        (1.0, 0.01, "mean"),
        (0.5, 0.25, "variance"),  # = m(1−m): a Bernoulli, no Beta
        (0.5, 0.0, "variance"),
        (0.5, -0.1, "variance"),
        (0.5, float("nan"), "variance"),
        (0.5, "x", "variance"),
    ],
)
def test_beta_from_moments_rejects_infeasible_moments(m: float, v: float, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        beta_from_moments(m, v)
    assert err.value.field == field


# ---------------------------------------------------------------- weight range


def _emblematic_ranking_holds(p: float, n: float, a: float, w: np.ndarray) -> np.ndarray:
    """WA(M+) <= WA(Mbad) <= WA(M−) <= WA(Mbad−) <= WA(Mbad+) at each weight, brute force."""
    models = [
        (p, n, 0.0, 0.0),  # M+: everything positive
        ((1 - a) * p, a * n, a * p, (1 - a) * n),  # Mbad: fraction a of each class wrong
        (0.0, 0.0, p, n),  # M−: everything negative
        (p, a * n, 0.0, (1 - a) * n),  # Mbad−: fraction a of the negatives wrong
        ((1 - a) * p, 0.0, a * p, n),  # Mbad+: fraction a of the positives wrong
    ]
    wa = np.array([_brute_force_wa(*m, w) for m in models])
    return np.all(wa[:-1] <= wa[1:] + 1e-12, axis=0)


weight_grid = np.linspace(1e-6, 1.0 - 1e-6, 20_001)


@pytest.mark.parametrize(("p", "n"), [(100, 900), (500, 500), (70, 30), (1, 10_000)])
@pytest.mark.parametrize("a", [0.5, 0.55, 0.6, 0.618])
def test_weight_range_is_where_the_emblematic_ranking_holds(p: int, n: int, a: float) -> None:
    lower, upper = weight_range(p, n, a)
    assert 0.0 < lower <= upper < 1.0
    assert _emblematic_ranking_holds(p, n, a, np.array([lower, upper])).all()
    inside = weight_grid[(weight_grid > lower + 1e-9) & (weight_grid < upper - 1e-9)]
    outside = weight_grid[(weight_grid < lower - 1e-6) | (weight_grid > upper + 1e-6)]
    assert _emblematic_ranking_holds(p, n, a, inside).all()
    assert not _emblematic_ranking_holds(p, n, a, outside).any()


def test_weight_range_printed_example() -> None:
    assert weight_range(100, 900, 0.5) == pytest.approx((9 / 11, 0.9))


@pytest.mark.parametrize("a", [0.62, 0.7, 0.75])
def test_weight_range_is_empty_past_the_golden_ratio(a: float) -> None:
    assert not _emblematic_ranking_holds(100, 900, a, weight_grid).any()
    with pytest.raises(InvalidInput) as err:
        weight_range(100, 900, a)
    assert err.value.field == "a"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((100, 900, 0.4), "a"),
        ((100, 900, 0.8), "a"),
        ((100, 900, "x"), "a"),
        ((0, 900, 0.5), "positives"),
        ((100, 0, 0.5), "negatives"),
        ((-5, 900, 0.5), "positives"),
    ],
)
def test_weight_range_rejects_bad_input(args: tuple[float, float, float], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        weight_range(*args)
    assert err.value.field == field

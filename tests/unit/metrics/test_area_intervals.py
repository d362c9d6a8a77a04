"""Closed-form intervals of calibrated AUC-PR and KS (app/metrics/area_intervals.py).

Checks: the KS quantile's closed form against numeric integration and a
Monte-Carlo sample, the AP gradient against finite differences, the gate and
its reason, the intervals contain the stored point, both classes' error enters,
small seeded coverage runs, and ``bootstrap_intervals`` returning the same.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from app.drift.simulation import BinormalStream
from app.errors import InvalidInput
from app.metrics.area_intervals import (
    FEW_NEGATIVES,
    NO_CLASS,
    calibrated_ap_gradient,
    calibrated_auc_pr_interval,
    dkw_sum_quantile,
    dkw_sum_sf,
    ks_interval,
)
from app.metrics.areas import average_precision_from_counts, ks_from_counts
from app.metrics.binning import default_bin_edges
from app.metrics.uncertainty import bootstrap_intervals

EDGES = default_bin_edges((0.5,), n_bins=200)
STREAM = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-2.0)


def _truths(pi0: float) -> tuple[float, float]:
    """Population calibrated AP and KS of STREAM (bins in decreasing order)."""
    t, f = np.cumsum(STREAM.p_positive[::-1]), np.cumsum(STREAM.p_negative[::-1])
    return (
        float(average_precision_from_counts(pi0 * t, (1.0 - pi0) * f)),
        float(ks_from_counts(t, f)),
    )


def _calibrated_ap(pos: np.ndarray, neg: np.ndarray, pi0: float) -> float:
    t, f = np.cumsum(pos[::-1]) / pos.sum(), np.cumsum(neg[::-1]) / neg.sum()
    return float(average_precision_from_counts(pi0 * t, (1.0 - pi0) * f))


# --- the KS quantile ---------------------------------------------------------------


@pytest.mark.parametrize(("n_pos", "n_neg"), [(30, 30), (50, 5_000), (1_000, 200)])
def test_dkw_sum_tail_is_the_convolution_of_the_two_tails(n_pos: int, n_neg: int) -> None:
    u, v = 1 / math.sqrt(n_pos), 1 / math.sqrt(n_neg)
    for d in (0.05, 0.15, 0.3):
        # P(uX + vY > d) = P(uX > d) + integral of X's density times Y's tail
        inner, _ = integrate.quad(
            lambda x, d=d: 4 * x * math.exp(-2 * x * x) * math.exp(-2 * ((d - u * x) / v) ** 2),
            0.0,
            d / u,
        )
        numeric = math.exp(-2 * (d / u) ** 2) + inner
        assert dkw_sum_sf(d, n_pos, n_neg) == pytest.approx(numeric, rel=1e-7, abs=1e-12)


def test_dkw_sum_quantile_matches_a_monte_carlo_sample() -> None:
    rng = np.random.default_rng(0)
    n_pos, n_neg, draws = 40, 300, 400_000
    # P(X > x) = exp(-2 x^2)  <=>  X = sqrt(E / 2), E ~ Exp(1)
    total = np.sqrt(rng.exponential(size=draws) / 2) / math.sqrt(n_pos)
    total += np.sqrt(rng.exponential(size=draws) / 2) / math.sqrt(n_neg)
    d = dkw_sum_quantile(0.975, n_pos, n_neg)
    above = float(np.mean(total > d))
    assert abs(above - 0.025) < 4 * math.sqrt(0.025 * 0.975 / draws)
    assert d == pytest.approx(float(np.quantile(total, 0.975)), rel=0.01)


# --- the AP gradient ----------------------------------------------------------------


def test_ap_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(1)
    p, q = rng.dirichlet(np.ones(12)), rng.dirichlet(np.ones(12))
    q[:3] = 0.0  # leading bins without negatives: precision 1 there
    q /= q.sum()
    ap, d_p, d_q = calibrated_ap_gradient(p, q, 0.2)
    assert ap == pytest.approx(
        float(average_precision_from_counts(0.2 * p.cumsum(), 0.8 * q.cumsum()))
    )
    h = 1e-6
    for shares, grad, which in ((p, d_p, 0), (q, d_q, 1)):
        for j in range(12):
            up, down = shares.copy(), shares.copy()
            up[j] += h
            down[j] -= h
            args_up = (up, q) if which == 0 else (p, up)
            args_down = (down, q) if which == 0 else (p, down)
            numeric = (
                calibrated_ap_gradient(*args_up, 0.2)[0]
                - calibrated_ap_gradient(*args_down, 0.2)[0]
            ) / (2 * h)
            assert grad[j] == pytest.approx(numeric, abs=1e-6), (which, j)


# --- gate, point, both classes' error ----------------------------------------------------


def test_calibrated_auc_pr_is_null_with_too_few_negatives_for_pi0() -> None:
    pos, neg = np.array([5.0, 10, 30, 55]), np.array([40.0, 30, 10, 0])  # 100 and 80
    # (80 / 100) * pi0 / (1 - pi0) = 0.4 at pi0 = 1/3
    low, high, reason = calibrated_auc_pr_interval(pos, neg, pi0=0.3)
    assert reason == FEW_NEGATIVES and math.isnan(low) and math.isnan(high)
    low, high, reason = calibrated_auc_pr_interval(pos, neg, pi0=0.34)
    assert reason is None and 0.0 < low < high < 1.0
    assert "0.4" in FEW_NEGATIVES and "docs/intervals.md" in FEW_NEGATIVES


def test_intervals_without_a_class_are_null_with_the_reason() -> None:
    for pos, neg in (([0, 0, 0], [3, 2, 1]), ([1, 2, 3], [0, 0, 0])):
        assert calibrated_auc_pr_interval(pos, neg, 0.5).reason == NO_CLASS
        assert ks_interval(pos, neg).reason == NO_CLASS
        assert math.isnan(ks_interval(pos, neg).low)


def test_intervals_contain_the_point_estimate() -> None:
    rng = np.random.default_rng(2)
    cases = [
        (rng.multinomial(n1, STREAM.p_positive), rng.multinomial(n0, STREAM.p_negative))
        for n1, n0 in ((30, 3_000), (200, 400), (1_000, 1_000))
    ]
    cases.append((np.array([0, 0, 0, 5, 20]), np.array([50, 30, 5, 0, 0])))  # perfect: AP = KS = 1
    for pos, neg in cases:
        for pi0 in (0.01, 0.1, 0.5):
            low, high, reason = calibrated_auc_pr_interval(pos, neg, pi0)
            if reason is None:
                assert low <= _calibrated_ap(pos, neg, pi0) <= high
                assert 0.0 <= low < high <= 1.0
        t, f = np.cumsum(pos[::-1]), np.cumsum(neg[::-1])
        low, high, _ = ks_interval(pos, neg)
        assert 0.0 <= low <= float(ks_from_counts(t, f)) <= high <= 1.0
        assert low < high


def test_the_negatives_error_widens_the_calibrated_auc_pr_interval() -> None:
    pos = np.array([2.0, 8, 30, 60])
    neg = np.array([30.0, 10, 4, 1])
    few = calibrated_auc_pr_interval(pos, neg * 10, pi0=0.1)
    many = calibrated_auc_pr_interval(pos, neg * 1_000, pi0=0.1)  # same shares, 100x more
    assert few.high - few.low > 1.2 * (many.high - many.low)


@pytest.mark.parametrize(
    ("level", "pi0", "field"), [(1.5, 0.1, "level"), (0.95, 0.0, "pi0"), (0.95, 1.0, "pi0")]
)
def test_bad_arguments_are_refused(level: float, pi0: float, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        calibrated_auc_pr_interval([1, 2], [2, 1], pi0, level)
    assert err.value.field == field
    with pytest.raises(InvalidInput, match="shape"):
        ks_interval([1, 2], [2, 1, 0])


# --- coverage (small, seeded) -------------------------------------------------------


def test_calibrated_auc_pr_and_ks_cover_in_a_small_simulation() -> None:
    """200 windows of ~100 positives at prior 0.2, pi0 0.1: both cover >= 0.85.

    With the variance dropped (the interval collapsed to the point and the
    smoothed centre) the calibrated AUC-PR coverage falls to 0.04."""
    rng = np.random.default_rng(3)
    pi0 = 0.1
    ap_truth, ks_truth = _truths(pi0)
    ap_hits = ks_hits = stored = 0
    for _ in range(200):
        w = STREAM.window(rng, n=500, prior=0.2)
        low, high, reason = calibrated_auc_pr_interval(w.positives, w.negatives, pi0)
        if reason is None:
            stored += 1
            ap_hits += low <= ap_truth <= high
        k_low, k_high, _ = ks_interval(w.positives, w.negatives)
        ks_hits += k_low <= ks_truth <= k_high
    assert stored >= 150
    assert ap_hits / stored >= 0.85
    assert ks_hits / 200 >= 0.85


# --- the library's bootstrap routes the two metrics -------------------------------------


def test_bootstrap_intervals_return_the_closed_forms_for_calibrated_auc_pr_and_ks() -> None:
    rng = np.random.default_rng(4)
    pos, neg = rng.multinomial(300, STREAM.p_positive), rng.multinomial(3_000, STREAM.p_negative)
    got = bootstrap_intervals(
        pos, neg, ["calibrated_auc_pr", "ks", "calibrated_ks", "auc_roc"], rng=rng, pi0=0.1
    )
    assert got["calibrated_auc_pr"] == tuple(calibrated_auc_pr_interval(pos, neg, 0.1)[:2])
    assert got["ks"] == got["calibrated_ks"] == tuple(ks_interval(pos, neg)[:2])
    assert got["auc_roc"][0] < got["auc_roc"][1]
    one_per_bin = np.minimum(neg, 1)  # ~150 negatives for 300 positives: gated at pi0 0.1
    few = bootstrap_intervals(pos, one_per_bin, ["calibrated_auc_pr"], rng=rng, pi0=0.1)
    assert all(math.isnan(x) for x in few["calibrated_auc_pr"])

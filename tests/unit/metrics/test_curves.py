"""Cumulative counts and curve areas against scikit-learn, closed forms and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import integrate, stats
from sklearn import metrics as skm

from app.errors import InvalidInput
from app.metrics.areas import check_cumulative_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import (
    CurveCounts,
    average_precision_from_counts,
    cumulative_counts,
    cumulative_counts_from_histograms,
    gain_auc_from_counts,
    gain_auc_ideal,
    gini_from_counts,
    ks_from_counts,
    lift_auc_from_counts,
    lift_auc_ideal,
    nauc_lift_from_counts,
    pr_auc_trapezoid_from_counts,
    pr_curve,
    roc_auc_from_counts,
    roc_curve,
)


def _data(seed: int, n: int, prior: float, decimals: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Binormal-logit scores; rounding to ``decimals`` creates ties."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prior).astype(np.int8)
    y[0], y[1] = 1, 0  # both classes present
    s = 1.0 / (1.0 + np.exp(-(rng.normal(size=n) + 1.5 * y)))
    if decimals is not None:
        s = np.round(s, decimals)
    return s, y


CASES = [
    (0, 50, 0.5, None),
    (1, 500, 0.3, 1),  # heavy ties
    (2, 2000, 0.05, 2),
    (3, 3000, 0.01, 3),
    (4, 1000, 0.2, None),
    (5, 200, 0.5, 0),  # scores in {0, 1} only
]


@pytest.mark.parametrize(("seed", "n", "prior", "decimals"), CASES)
def test_cumulative_counts_match_sklearn_grouping(
    seed: int, n: int, prior: float, decimals: int | None
) -> None:
    s, y = _data(seed, n, prior, decimals)
    curve = cumulative_counts(s, y)
    _tns, fps, _fns, tps, thresholds = skm.confusion_matrix_at_thresholds(y, s)
    np.testing.assert_array_equal(curve.thresholds, thresholds)
    np.testing.assert_array_equal(curve.tps, tps)
    np.testing.assert_array_equal(curve.fps, fps)
    assert np.all(np.diff(curve.thresholds) < 0)
    assert curve.positives == y.sum() and curve.negatives == n - y.sum()
    assert curve.prior == pytest.approx(y.mean(), rel=1e-15)


@pytest.mark.parametrize(("seed", "n", "prior", "decimals"), CASES)
def test_areas_match_sklearn(seed: int, n: int, prior: float, decimals: int | None) -> None:
    s, y = _data(seed, n, prior, decimals)
    c = cumulative_counts(s, y)
    assert float(average_precision_from_counts(c.tps, c.fps)) == pytest.approx(
        skm.average_precision_score(y, s), abs=1e-12
    )
    assert float(roc_auc_from_counts(c.tps, c.fps)) == pytest.approx(
        skm.roc_auc_score(y, s), abs=1e-12
    )
    precision, recall, _ = skm.precision_recall_curve(y, s)
    assert float(pr_auc_trapezoid_from_counts(c.tps, c.fps)) == pytest.approx(
        skm.auc(recall, precision), abs=1e-12
    )
    assert float(gini_from_counts(c.tps, c.fps)) == pytest.approx(
        2 * skm.roc_auc_score(y, s) - 1, abs=1e-12
    )


def test_roc_auc_is_the_probability_a_positive_outscores_a_negative() -> None:
    s, y = _data(7, 300, 0.3, 1)
    pos, neg = s[y == 1][:, None], s[y == 0][None, :]
    brute = np.mean((pos > neg) + 0.5 * (pos == neg))
    c = cumulative_counts(s, y)
    assert float(roc_auc_from_counts(c.tps, c.fps)) == pytest.approx(brute, abs=1e-12)


@pytest.mark.parametrize(("seed", "n", "prior", "decimals"), CASES)
def test_roc_and_pr_curve_points_match_sklearn(
    seed: int, n: int, prior: float, decimals: int | None
) -> None:
    s, y = _data(seed, n, prior, decimals)
    c = cumulative_counts(s, y)
    fpr, tpr, thr = roc_curve(c)
    sk_fpr, sk_tpr, sk_thr = skm.roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr, rtol=0, atol=1e-15)
    np.testing.assert_allclose(tpr, sk_tpr, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(thr, sk_thr)

    recall, precision, thresholds = pr_curve(c)
    sk_prec, sk_rec, sk_thr = skm.precision_recall_curve(y, s)
    # scikit-learn: increasing thresholds, cut at full recall, plus (recall 0, precision 1)
    m = sk_thr.size
    np.testing.assert_allclose(recall[:m], sk_rec[:-1][::-1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(precision[:m], sk_prec[:-1][::-1], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(thresholds[:m], sk_thr[::-1])
    assert np.all(recall[m - 1 :] == 1.0)


def test_areas_ignore_repeated_points_scale_and_leading_negatives() -> None:
    s, y = _data(11, 400, 0.2, 2)
    c = cumulative_counts(s, y)
    # repeat every point, prepend the origin twice
    tps = np.concatenate(([0.0, 0.0], np.repeat(c.tps, 2)))
    fps = np.concatenate(([0.0, 0.0], np.repeat(c.fps, 2)))
    for area in (
        average_precision_from_counts,
        roc_auc_from_counts,
        pr_auc_trapezoid_from_counts,
        lift_auc_from_counts,
        gain_auc_from_counts,
        ks_from_counts,
    ):
        ref = float(area(c.tps, c.fps))
        assert np.isfinite(ref)
        assert float(area(tps, fps)) == pytest.approx(ref, rel=1e-12), area.__name__
        assert float(area(c.tps / c.n, c.fps / c.n)) == pytest.approx(ref, rel=1e-12)


def test_areas_are_batched_over_the_last_axis() -> None:
    curves = [cumulative_counts(*_data(seed, 300, 0.3, 2)) for seed in range(4)]
    k = max(c.tps.size for c in curves)
    # pad every curve to k points by repeating its last point (changes no area)
    tps = np.stack([np.pad(c.tps, (0, k - c.tps.size), mode="edge") for c in curves])
    fps = np.stack([np.pad(c.fps, (0, k - c.fps.size), mode="edge") for c in curves])
    batch = np.stack([tps, tps]), np.stack([fps, fps])  # shape (2, 4, k)
    for area in (average_precision_from_counts, roc_auc_from_counts, lift_auc_from_counts):
        got = area(*batch)
        assert got.shape == (2, 4)
        want = [float(area(c.tps, c.fps)) for c in curves]
        np.testing.assert_allclose(got[1], want, rtol=1e-13)


def test_normalised_counts_at_a_prior_as_the_ops_helper_builds_them() -> None:
    """tps = pi(1-beta), fps = (1-pi)alpha with end points (0,1) and (1,0): no nan."""
    rng = np.random.default_rng(3)
    alpha = np.sort(rng.random((50, 7)), axis=1)
    beta = np.sort(rng.random((50, 7)), axis=1)[:, ::-1]
    alpha = np.concatenate((np.zeros((50, 1)), alpha, np.ones((50, 1))), axis=1)
    beta = np.concatenate((np.ones((50, 1)), beta, np.zeros((50, 1))), axis=1)
    pi = 0.01
    tps, fps = pi * (1 - beta), (1 - pi) * alpha
    for area in (average_precision_from_counts, roc_auc_from_counts, lift_auc_from_counts):
        got = area(tps, fps)
        assert got.shape == (50,) and np.all(np.isfinite(got))
    # ROC area of the polygon through the (alpha, 1 - beta) points
    want = [np.trapezoid(1 - beta[i], alpha[i]) for i in range(50)]
    np.testing.assert_allclose(roc_auc_from_counts(tps, fps), want, rtol=1e-12)


def test_undefined_areas_are_nan() -> None:
    only_neg = (np.zeros(3), np.array([1.0, 2.0, 3.0]))
    only_pos = (np.array([1.0, 2.0, 3.0]), np.zeros(3))
    for area in (
        average_precision_from_counts,
        pr_auc_trapezoid_from_counts,
        lift_auc_from_counts,
        gain_auc_from_counts,
        nauc_lift_from_counts,
    ):
        assert np.isnan(area(*only_neg)), area.__name__
        assert np.isfinite(area(*only_pos)), area.__name__
    for area in (roc_auc_from_counts, ks_from_counts, gini_from_counts):
        assert np.isnan(area(*only_neg)) and np.isnan(area(*only_pos)), area.__name__
    assert np.isnan(lift_auc_from_counts(np.zeros(2), np.zeros(2)))
    assert np.isnan(gain_auc_from_counts(np.zeros(2), np.zeros(2)))


def _piecewise_lift_area(tps: np.ndarray, fps: np.ndarray) -> float:
    """Numerical integral of recall/x along the linear gain curve through the points."""
    x = np.concatenate(([0.0], (tps + fps) / (tps[-1] + fps[-1])))
    r = np.concatenate(([0.0], tps / tps[-1]))
    total = 0.0
    for k in range(1, x.size):
        if x[k] > x[k - 1]:
            slope = (r[k] - r[k - 1]) / (x[k] - x[k - 1])

            def lift(t: float, k: int = k, slope: float = slope) -> float:
                return float((r[k - 1] + slope * (t - x[k - 1])) / t)

            total += integrate.quad(lift, x[k - 1], x[k], epsabs=1e-13, epsrel=1e-12)[0]
    return total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lift_area_is_the_integral_of_the_piecewise_linear_gain_curve(seed: int) -> None:
    s, y = _data(seed, 60, 0.3, 1)
    c = cumulative_counts(s, y)
    want = _piecewise_lift_area(c.tps, c.fps)
    assert float(lift_auc_from_counts(c.tps, c.fps)) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("prior", [0.5, 0.1, 0.001])
def test_lift_and_gain_ideal_and_random(prior: float) -> None:
    n = 100_000
    npos = round(prior * n)
    y = np.zeros(n, dtype=np.int8)
    y[:npos] = 1
    perfect = cumulative_counts(np.linspace(1.0, 0.0, n), y)
    assert float(lift_auc_from_counts(perfect.tps, perfect.fps)) == pytest.approx(
        1 - np.log(npos / n), rel=1e-12
    )
    assert float(lift_auc_ideal(npos / n)) == pytest.approx(1 - np.log(npos / n), rel=1e-15)
    assert float(nauc_lift_from_counts(perfect.tps, perfect.fps)) == pytest.approx(1.0, rel=1e-12)
    assert float(gain_auc_from_counts(perfect.tps, perfect.fps)) == pytest.approx(
        float(gain_auc_ideal(npos / n)), rel=1e-12
    )
    random = cumulative_counts(np.full(n, 0.3), y)  # one tied group: the diagonal
    assert float(lift_auc_from_counts(random.tps, random.fps)) == pytest.approx(1.0, rel=1e-12)
    assert float(gain_auc_from_counts(random.tps, random.fps)) == pytest.approx(0.5, rel=1e-12)


def test_gain_area_is_prior_mix_of_half_and_roc_auc() -> None:
    """∫ TPR dx with x = pi·TPR + (1−pi)·FPR equals pi/2 + (1−pi)·ROC-AUC."""
    s, y = _data(5, 3000, 0.07, 2)
    c = cumulative_counts(s, y)
    pi = c.prior
    want = pi / 2 + (1 - pi) * skm.roc_auc_score(y, s)
    assert float(gain_auc_from_counts(c.tps, c.fps)) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize(("seed", "n", "prior", "decimals"), CASES)
def test_ks_is_the_largest_tpr_fpr_gap(
    seed: int, n: int, prior: float, decimals: int | None
) -> None:
    s, y = _data(seed, n, prior, decimals)
    c = cumulative_counts(s, y)
    brute = max(0.0, max(np.mean(s[y == 1] >= t) - np.mean(s[y == 0] >= t) for t in np.unique(s)))
    assert float(ks_from_counts(c.tps, c.fps)) == pytest.approx(brute, abs=1e-12)
    two_sample = stats.ks_2samp(s[y == 1], s[y == 0]).statistic
    assert float(ks_from_counts(c.tps, c.fps)) == pytest.approx(two_sample, abs=1e-12)


def test_histogram_curve_with_one_score_per_bin_is_the_raw_curve() -> None:
    rng = np.random.default_rng(8)
    edges = np.linspace(0.0, 1.0, 11)
    s = edges[rng.integers(0, 10, 500)]  # scores on the bin lower edges
    y = (rng.random(500) < 0.3 + 0.5 * s).astype(int)
    pos = np.array([np.sum((s == e) & (y == 1)) for e in edges[:-1]])
    neg = np.array([np.sum((s == e) & (y == 0)) for e in edges[:-1]])
    h = cumulative_counts_from_histograms(pos, neg, edges)
    raw = cumulative_counts(s, y)
    np.testing.assert_array_equal(h.thresholds, raw.thresholds)
    np.testing.assert_array_equal(h.tps, raw.tps)
    np.testing.assert_array_equal(h.fps, raw.fps)


def test_histogram_empty_bins_dropped_or_kept_change_no_area() -> None:
    edges = np.linspace(0.0, 1.0, 9)
    pos = np.array([0, 3, 0, 0, 2, 5, 0, 4])
    neg = np.array([9, 0, 0, 4, 2, 1, 0, 0])
    h = cumulative_counts_from_histograms(pos, neg, edges)
    assert h.tps.size == 6  # 2 empty bins dropped
    kept_t, kept_f = np.cumsum(pos[::-1]), np.cumsum(neg[::-1])
    for area in (average_precision_from_counts, roc_auc_from_counts, lift_auc_from_counts):
        assert float(area(h.tps, h.fps)) == pytest.approx(float(area(kept_t, kept_f)), rel=1e-14)


def test_confusion_at_threshold_is_exact_on_raw_curves_and_bin_edges() -> None:
    s, y = _data(9, 1000, 0.2, 2)
    c = cumulative_counts(s, y)
    for t in (0.0, 0.005, 0.3, 0.5, 0.51, 0.77, 0.999, 1.0, *np.unique(s)[::37]):
        assert c.confusion_at(t) == ConfusionCounts.from_predictions(s, y, t)
    edges = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    pos = np.array([np.sum((s >= a) & (s < b) & (y == 1)) for a, b in itertools.pairwise(edges)])
    neg = np.array([np.sum((s >= a) & (s < b) & (y == 0)) for a, b in itertools.pairwise(edges)])
    pos[-1] += np.sum((s == 1.0) & (y == 1))
    neg[-1] += np.sum((s == 1.0) & (y == 0))
    h = cumulative_counts_from_histograms(pos, neg, edges)
    for t in edges:
        assert h.confusion_at(t) == ConfusionCounts.from_predictions(s, y, t)


def test_counts_at_prior_scale_rates_and_are_nan_without_a_class() -> None:
    c = cumulative_counts([0.9, 0.6, 0.3, 0.2], [1, 0, 1, 0])
    tps, fps = c.counts_at_prior(0.2)
    np.testing.assert_allclose(tps, 0.2 * np.array([0.5, 0.5, 1.0, 1.0]))
    np.testing.assert_allclose(fps, 0.8 * np.array([0.0, 0.5, 0.5, 1.0]))
    assert c.counts_at_prior(None)[0] is c.tps
    one_class = cumulative_counts([0.9, 0.1], [1, 1])
    assert np.all(np.isnan(one_class.counts_at_prior(0.5)[1]))
    assert np.all(np.isnan(roc_curve(one_class)[0]))
    assert np.all(np.isnan(pr_curve(cumulative_counts([0.9, 0.1], [0, 0]))[0]))


def test_pr_curve_at_a_reference_prior_matches_resampled_data() -> None:
    s, y = _data(4, 300, 0.3, 2)
    c = cumulative_counts(s, y)
    k = 3  # duplicate every negative k times: same rates, prior P/(P + kN)
    s_k = np.concatenate((s[y == 1], np.repeat(s[y == 0], k)))
    y_k = np.concatenate((np.ones(int(c.positives)), np.zeros(k * int(c.negatives))))
    pi_k = c.positives / (c.positives + k * c.negatives)
    _, prec_ref, _ = pr_curve(c, prior=pi_k)
    _, prec_k, _ = pr_curve(cumulative_counts(s_k, y_k))
    np.testing.assert_allclose(prec_ref, prec_k, rtol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"scores": [0.2, 1.2], "labels": [0, 1]}, "scores"),
        ({"scores": [0.2, np.nan], "labels": [0, 1]}, "scores"),
        ({"scores": [0.2, 0.3], "labels": [0, 2]}, "labels"),
        ({"scores": [0.2, 0.3], "labels": [0]}, "labels"),
        ({"scores": [], "labels": []}, "scores"),
    ],
)
def test_cumulative_counts_reject_bad_input(kwargs: dict[str, list[float]], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        cumulative_counts(kwargs["scores"], kwargs["labels"])
    assert err.value.field == field


@pytest.mark.parametrize(
    ("pos", "neg", "edges", "field"),
    [
        ([1, 2], [1, 2], [0.0, 0.5, 0.9], "edges"),
        ([1, 2], [1, 2], [0.1, 0.5, 1.0], "edges"),
        ([1, 2], [1, 2], [0.0, 0.6, 0.5, 1.0], "edges"),
        ([1, 2], [1, 2], [1.0], "edges"),
        ([1, 2, 3], [1, 2], [0.0, 0.5, 1.0], "positives"),
        ([1, 2], [1, -2], [0.0, 0.5, 1.0], "negatives"),
        ([1, np.inf], [1, 2], [0.0, 0.5, 1.0], "positives"),
        ([0, 0], [0, 0], [0.0, 0.5, 1.0], "positives"),
    ],
)
def test_histogram_input_is_validated(
    pos: list[float], neg: list[float], edges: list[float], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        cumulative_counts_from_histograms(pos, neg, edges)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("tps", "fps", "field"),
    [
        ([], [], "tps"),
        (1.0, 1.0, "tps"),
        ([1.0, np.nan], [0.0, 1.0], "tps"),
        ([2.0, 1.0], [0.0, 1.0], "tps"),
        ([1.0, 2.0], [-1.0, 1.0], "fps"),
        ([1.0, 2.0], [0.0, 1.0, 2.0], "fps"),
    ],
)
def test_area_input_is_validated(tps: object, fps: object, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        check_cumulative_counts(tps, fps)
    assert err.value.field == field
    with pytest.raises(InvalidInput):
        average_precision_from_counts(tps, fps)


def test_curve_counts_reject_a_bad_threshold_and_prior() -> None:
    c = CurveCounts(np.array([0.5]), np.array([1.0]), np.array([1.0]))
    with pytest.raises(InvalidInput) as err:
        c.confusion_at(1.5)
    assert err.value.field == "threshold"
    with pytest.raises(InvalidInput) as err:
        c.counts_at_prior(0.0)
    assert err.value.field == "prior"


def test_the_unchecked_area_kernels_give_the_public_functions_values_bit_for_bit() -> None:
    from app.metrics.areas import AREA_KERNELS
    from app.metrics.uncertainty import CURVE_AREAS

    assert set(AREA_KERNELS) == set(CURVE_AREAS)
    rng = np.random.default_rng(3)
    tps = np.cumsum(rng.poisson(2.0, size=(50, 40)), axis=1).astype(np.float64)
    fps = np.cumsum(rng.poisson(5.0, size=(50, 40)), axis=1).astype(np.float64)
    tps[:3] = 0.0  # rows without positives: nan
    fps[3:5] = 0.0  # rows without negatives
    for name, public in CURVE_AREAS.items():
        np.testing.assert_array_equal(AREA_KERNELS[name](tps, fps), public(tps, fps), err_msg=name)

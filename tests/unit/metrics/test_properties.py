"""Property tests over the whole metric registry (hypothesis).

Bounds, order invariance, prior invariance of every calibrated metric under
resampling to another prior with the same class-conditional score
distributions, calibrated = raw at the data's prior, and histogram-vs-raw
agreement.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.metrics.areas import (
    average_precision_from_counts,
    gain_auc_from_counts,
    ks_from_counts,
    lift_auc_from_counts,
    nauc_lift_from_counts,
    pr_auc_trapezoid_from_counts,
    roc_auc_from_counts,
)
from app.metrics.binning import histogram_counts
from app.metrics.calibrated import calibrated_average_precision, calibrated_metrics
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import cumulative_counts, cumulative_counts_from_histograms
from app.metrics.evaluate import CURVE_METRICS, curve_metrics, evaluate
from app.metrics.labeling import LABELING_METRICS, PRIOR_DEPENDENT, labeling_metrics
from app.metrics.probability import ProbabilitySums

PROPS = settings(max_examples=60, deadline=None)

counts_st = st.builds(
    ConfusionCounts,
    tp=st.integers(0, 500).map(float),
    fp=st.integers(0, 500).map(float),
    fn=st.integers(0, 500).map(float),
    tn=st.integers(0, 500).map(float),
)
GRID = np.linspace(0.0, 1.0, 21)  # scores on a coarse grid: many ties, and bin edges


@st.composite
def scored(draw: st.DrawFn, min_size: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Scores (ties likely) and labels with both classes present."""
    n = draw(st.integers(min_size, 60))
    idx = draw(st.lists(st.integers(0, GRID.size - 1), min_size=n, max_size=n))
    y = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    y[0], y[1] = True, False
    return GRID[np.array(idx)], np.array(y)


def _all_curve_areas(tps: np.ndarray, fps: np.ndarray) -> list[float]:
    return [
        float(f(tps, fps))
        for f in (
            average_precision_from_counts,
            roc_auc_from_counts,
            pr_auc_trapezoid_from_counts,
            lift_auc_from_counts,
            gain_auc_from_counts,
            nauc_lift_from_counts,
            ks_from_counts,
        )
    ]


@PROPS
@given(counts_st, st.floats(0.001, 0.999))
def test_labeling_and_calibrated_values_respect_registry_bounds(
    counts: ConfusionCounts, pi0: float
) -> None:
    raw = labeling_metrics(counts)
    cal = calibrated_metrics(counts, pi0)
    for name, m in LABELING_METRICS.items():
        values = [raw[name]] + ([cal[f"calibrated_{name}"]] if m.prior_dependent else [])
        for v in values:
            if v is not None:
                assert m.lower - 1e-12 <= v <= m.upper + 1e-12, (name, v)


@PROPS
@given(scored(), st.floats(0.001, 0.999))
def test_curve_areas_respect_bounds(data: tuple[np.ndarray, np.ndarray], pi0: float) -> None:
    c = cumulative_counts(*data)
    ap, roc, pr_trap, lift, gain, nauc, ks = _all_curve_areas(c.tps, c.fps)
    for v in (ap, roc, pr_trap, gain, ks):
        assert -1e-12 <= v <= 1 + 1e-12
    assert 0.0 <= lift <= 1 - math.log(c.prior) + 1e-9 and 0.0 <= nauc <= 1 + 1e-12
    assert 0.0 <= calibrated_average_precision(c, pi0) <= 1 + 1e-12


@PROPS
@given(scored(), st.randoms(use_true_random=False))
def test_order_of_examples_changes_nothing(
    data: tuple[np.ndarray, np.ndarray], rnd: object
) -> None:
    s, y = data
    perm = np.random.default_rng(rnd.getrandbits(32)).permutation(s.size)  # type: ignore[attr-defined]
    a, b = cumulative_counts(s, y), cumulative_counts(s[perm], y[perm])
    assert np.array_equal(a.thresholds, b.thresholds) and np.array_equal(a.tps, b.tps)
    assert np.array_equal(a.fps, b.fps)
    pa = ProbabilitySums.from_predictions(s, y)
    pb = ProbabilitySums.from_predictions(s[perm], y[perm])
    assert pa.brier_sum == pytest.approx(pb.brier_sum, rel=1e-12, abs=1e-15)
    assert pa.log_loss_sum == pytest.approx(pb.log_loss_sum, rel=1e-12, abs=1e-15)


def _duplicate_negatives(s: np.ndarray, y: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Same class-conditional score distributions, prior P/(P + kN)."""
    s_k = np.concatenate((s[y], np.repeat(s[~y], k)))
    y_k = np.concatenate((np.ones(int(y.sum()), bool), np.zeros(k * int((~y).sum()), bool)))
    return s_k, y_k


@PROPS
@given(scored(), st.integers(2, 6), st.floats(0.001, 0.999), st.sampled_from([0.25, 0.5, 0.8]))
def test_calibrated_metrics_are_invariant_to_resampling_the_prior(
    data: tuple[np.ndarray, np.ndarray], k: int, pi0: float, threshold: float
) -> None:
    s, y = data
    s_k, y_k = _duplicate_negatives(s, y, k)
    c, c_k = cumulative_counts(s, y), cumulative_counts(s_k, y_k)
    conf, conf_k = c.confusion_at(threshold), c_k.confusion_at(threshold)
    cal, cal_k = calibrated_metrics(conf, pi0), calibrated_metrics(conf_k, pi0)
    assert cal.keys() == cal_k.keys()
    for name, v in cal.items():
        assert (v is None) == (cal_k[name] is None), name
        if v is not None:
            assert cal_k[name] == pytest.approx(v, rel=1e-9, abs=1e-12), name
    assert calibrated_average_precision(c_k, pi0) == pytest.approx(
        calibrated_average_precision(c, pi0), rel=1e-9
    )
    # prior-invariant registry metrics and curve metrics do not move either
    raw, raw_k = labeling_metrics(conf), labeling_metrics(conf_k)
    for name, m in LABELING_METRICS.items():
        if not m.prior_dependent and raw[name] is not None:
            assert raw_k[name] == pytest.approx(raw[name], rel=1e-9, abs=1e-12), name
    for name in ("auc_roc", "ks", "gini"):
        assert curve_metrics(c_k)[name] == pytest.approx(curve_metrics(c)[name], abs=1e-12)


@PROPS
@given(counts_st.filter(lambda c: c.positives > 0 and c.negatives > 0))
def test_calibrated_equals_raw_at_the_data_prior(counts: ConfusionCounts) -> None:
    raw = labeling_metrics(counts)
    cal = calibrated_metrics(counts, counts.prior)
    for name in PRIOR_DEPENDENT:
        v = raw[name]
        if v is None:
            assert cal[f"calibrated_{name}"] is None, name
        else:
            assert cal[f"calibrated_{name}"] == pytest.approx(v, rel=1e-9, abs=1e-12), name


@PROPS
@given(scored())
def test_calibrated_auc_pr_equals_raw_auc_pr_at_the_data_prior(
    data: tuple[np.ndarray, np.ndarray],
) -> None:
    c = cumulative_counts(*data)
    raw = float(average_precision_from_counts(c.tps, c.fps))
    assert calibrated_average_precision(c, c.prior) == pytest.approx(raw, rel=1e-12)


def test_prior_dependent_metrics_do_move_with_the_prior() -> None:
    """The flag is not vacuous: each prior-dependent metric changes under resampling."""
    c = ConfusionCounts(tp=30, fp=10, fn=20, tn=140)
    resampled = ConfusionCounts(tp=30, fp=40, fn=20, tn=560)
    raw, raw_k = labeling_metrics(c), labeling_metrics(resampled)
    for name in PRIOR_DEPENDENT:
        assert raw_k[name] != pytest.approx(raw[name], rel=1e-6), name


@PROPS
@given(scored(), st.sampled_from([0.25, 0.5, 0.75]))
def test_histograms_agree_with_raw_scores_on_bin_edges(
    data: tuple[np.ndarray, np.ndarray], threshold: float
) -> None:
    """Scores on bin lower edges: the histogram curve is the raw curve, metric for metric."""
    s, y = data
    s = np.minimum(s, GRID[-2])  # the last bin [0.95, 1] would merge 0.95 and 1.0
    edges = GRID
    raw = cumulative_counts(s, y)
    binned = cumulative_counts_from_histograms(*histogram_counts(s, y, edges), edges)
    assert curve_metrics(binned) == curve_metrics(raw)
    assert binned.confusion_at(threshold) == ConfusionCounts.from_predictions(s, y, threshold)


@PROPS
@given(st.integers(0, 2**32 - 1), st.sampled_from([0.5, 0.1, 0.01]))
def test_histograms_agree_with_raw_scores_within_bin_resolution(seed: int, prior: float) -> None:
    """Arbitrary scores, 1,000 logit bins: curve areas stay close to the exact values."""
    from app.metrics.binning import default_bin_edges

    rng = np.random.default_rng(seed)
    n = 5000
    y = rng.random(n) < prior
    y[:2] = (True, False)
    s = 1 / (1 + np.exp(-(rng.normal(-2, 1.5, n) + 2 * y)))
    edges = default_bin_edges(n_bins=1000)
    raw = curve_metrics(cumulative_counts(s, y))
    binned = curve_metrics(cumulative_counts_from_histograms(*histogram_counts(s, y, edges), edges))
    # 2% of each area's range; the lift area ranges up to its ideal 1 - ln(pi)
    ideal_lift = 1 - np.log(y.mean())
    for name in CURVE_METRICS:
        scale = ideal_lift if name == "auc_lift" else 1.0
        assert binned[name] == pytest.approx(raw[name], abs=0.02 * scale), name


@PROPS
@given(scored())
def test_roc_auc_symmetries(data: tuple[np.ndarray, np.ndarray]) -> None:
    s, y = data
    c = cumulative_counts(s, y)
    auc = float(roc_auc_from_counts(c.tps, c.fps))
    swapped = cumulative_counts(1.0 - s, ~y)  # relabel classes and reverse the ranking
    reversed_ = cumulative_counts(1.0 - s, y)
    assert float(roc_auc_from_counts(swapped.tps, swapped.fps)) == pytest.approx(auc, abs=1e-12)
    assert float(roc_auc_from_counts(reversed_.tps, reversed_.fps)) == pytest.approx(
        1 - auc, abs=1e-12
    )


@st.composite
def balanced(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Scores (ties likely) with labels half positive: one prior, so OPS references stay cached."""
    half = draw(st.integers(1, 30))
    idx = draw(st.lists(st.integers(0, GRID.size - 1), min_size=2 * half, max_size=2 * half))
    y = np.array(draw(st.permutations([True] * half + [False] * half)))
    return GRID[np.array(idx)], y


@settings(max_examples=25, deadline=None)
@given(balanced(), st.floats(0.01, 0.99), st.randoms(use_true_random=False))
def test_evaluate_is_invariant_to_order(
    data: tuple[np.ndarray, np.ndarray], pi0: float, rnd: object
) -> None:
    s, y = data
    perm = np.random.default_rng(rnd.getrandbits(32)).permutation(s.size)  # type: ignore[attr-defined]
    a = evaluate(s, y, pi0=pi0, cost_ratio=0.3)
    b = evaluate(s[perm], y[perm], pi0=pi0, cost_ratio=0.3)
    assert a.keys() == b.keys()
    for name, v in a.items():
        assert (v is None and b[name] is None) or b[name] == pytest.approx(v, rel=1e-12), name

"""WindowHistograms validation and pooling; the binormal stream used by the simulations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.drift.histograms import WindowHistograms
from app.drift.simulation import BinormalStream, binormal_bin_probabilities, binormal_scores
from app.errors import InvalidInput
from app.metrics.binning import default_bin_edges, histogram_counts

EDGES = [0.0, 0.5, 1.0]


@pytest.mark.parametrize(
    ("field", "positives", "negatives", "edges"),
    [
        ("edges", [1, 2], [1, 2], [0.0, 0.6, 0.5]),
        ("edges", [1, 2], [1, 2], [0.1, 0.5, 1.0]),
        ("positives", [1, 2, 3], [1, 2], EDGES),
        ("positives", [1, -2], [1, 2], EDGES),
        ("positives", [1, 2.5], [1, 2], EDGES),
        ("negatives", [1, 2], [1, float("nan")], EDGES),
        ("negatives", [1, 2], [[1, 2]], EDGES),
    ],
)
def test_bad_histograms_name_the_field(
    field: str, positives: object, negatives: object, edges: object
) -> None:
    with pytest.raises(InvalidInput) as err:
        WindowHistograms(positives, negatives, edges)
    assert err.value.field == field


def test_counts_are_read_only_copies() -> None:
    pos = np.array([1, 2])
    h = WindowHistograms(pos, [3, 4], EDGES)
    pos[0] = 99
    assert h.positives.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="read-only"):
        h.positives[0] = 5.0


def test_pooled_is_the_bin_wise_sum() -> None:
    a = WindowHistograms([1, 2], [3, 4], EDGES)
    b = WindowHistograms([10, 20], [30, 40], EDGES)
    p = WindowHistograms.pooled([a, b])
    assert p.positives.tolist() == [11.0, 22.0] and p.negatives.tolist() == [33.0, 44.0]
    assert (p.n_positives, p.n_negatives, p.n) == (33.0, 77.0, 110.0)
    assert p.prior == pytest.approx(0.3)


def test_pooled_refuses_nothing_and_mixed_edges() -> None:
    with pytest.raises(InvalidInput, match="windows"):
        WindowHistograms.pooled([])
    a = WindowHistograms([1, 2], [3, 4], EDGES)
    b = WindowHistograms([1, 2], [3, 4], [0.0, 0.4, 1.0])
    with pytest.raises(InvalidInput, match="same bin edges"):
        WindowHistograms.pooled([a, b])


def test_empty_window_has_undefined_prior() -> None:
    assert np.isnan(WindowHistograms([0, 0], [0, 0], EDGES).prior)


def test_bin_probabilities_are_the_normal_cdf_of_the_logit_edges() -> None:
    edges = default_bin_edges((0.5,), n_bins=500)
    p = binormal_bin_probabilities(edges, mu=-1.0, sd=1.5)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    k = int(np.searchsorted(edges, 0.5))
    assert p[k:].sum() == pytest.approx(stats.norm.sf(0.0, loc=-1.0, scale=1.5), rel=1e-9)


def test_stream_windows_match_binned_raw_draws() -> None:
    """Multinomial windows have the same bin distribution as binning raw sigmoid draws."""
    edges = default_bin_edges((0.5,), n_bins=60)
    stream = BinormalStream(edges, mu_positive=1.0, mu_negative=-2.0)
    rng = np.random.default_rng(1)
    n = 200_000
    labels = rng.random(n) < 0.2
    logits = np.where(labels, rng.normal(1.0, 1.0, n), rng.normal(-2.0, 1.0, n))
    raw_pos, raw_neg = histogram_counts(1.0 / (1.0 + np.exp(-logits)), labels, edges)
    sim = stream.window(rng, n=n, prior=0.2)
    assert sim.n == n
    for raw, simulated in ((raw_pos, sim.positives), (raw_neg, sim.negatives)):
        keep = (raw + simulated) > 0
        table = np.vstack([raw[keep], simulated[keep]])
        assert stats.chi2_contingency(table, correction=False).pvalue > 1e-3


def test_binormal_scores_are_calibrated_and_tempering_spreads_them() -> None:
    rng = np.random.default_rng(11)
    scores, y = binormal_scores(rng, 400_000, 0.1, 1.5)
    assert scores.shape == y.shape == (400_000,) and y.dtype == np.bool_
    assert abs(y.mean() - 0.1) < 3e-3
    # calibrated: within each score decile the positive rate is the mean score
    deciles = np.quantile(scores, np.linspace(0.0, 1.0, 11))
    bins = np.clip(np.searchsorted(deciles, scores, side="right") - 1, 0, 9)
    for b in range(10):
        inside = bins == b
        assert abs(y[inside].mean() - scores[inside].mean()) < 6e-3, b
    # the log-odds of each class are Normal(m_y, s^2), m_1 - m_0 = s^2; temper scales them
    logit = np.log(scores / (1.0 - scores))
    assert abs(logit[y].mean() - logit[~y].mean() - 1.5**2) < 0.03
    assert abs(logit[~y].std() - 1.5) < 0.01
    hot, _ = binormal_scores(np.random.default_rng(11), 400_000, 0.1, 1.5, temper=2.0)
    np.testing.assert_allclose(np.log(hot / (1.0 - hot)), 2.0 * logit, rtol=1e-9, atol=1e-9)


def test_histograms_of_stored_counts_equal_the_validated_ones() -> None:
    rng = np.random.default_rng(5)
    edges = np.linspace(0.0, 1.0, 11)
    pos, neg = rng.integers(0, 50, 10), rng.integers(0, 500, 10)
    fast = WindowHistograms.of_counts(pos, neg, edges)
    checked = WindowHistograms(pos, neg, edges)
    for name in ("positives", "negatives", "edges"):
        a, b = getattr(fast, name), getattr(checked, name)
        assert a.dtype == b.dtype == np.float64 and np.array_equal(a, b)
        assert not a.flags.writeable
    assert (fast.n_positives, fast.n_negatives) == (float(pos.sum()), float(neg.sum()))
    with pytest.raises(InvalidInput, match="positives"):
        WindowHistograms.of_counts(pos[:-1], neg, edges)


def test_the_curve_from_running_totals_is_the_curve_from_the_histograms() -> None:
    """Bit for bit, including empty bins at both ends and a window of one class."""
    from app.metrics.curves import cumulative_counts_from_histograms

    rng = np.random.default_rng(6)
    edges = default_bin_edges((0.5,), n_bins=200)
    bins = edges.size - 1
    pos, neg = rng.integers(0, 3000, bins), rng.integers(0, 90000, bins)
    pos[:7], neg[:7], pos[-5:], neg[-5:] = 0, 0, 0, 0
    for p, n in [(pos, neg), (pos, np.zeros_like(neg)), (np.zeros_like(pos), neg)]:
        h = WindowHistograms(p, n, edges)
        expected = cumulative_counts_from_histograms(p, n, edges)
        got = h.curve()
        for name in ("thresholds", "tps", "fps"):
            assert np.array_equal(getattr(got, name), getattr(expected, name))
        cum_p, cum_n = h.running_totals()
        assert np.array_equal(cum_p, np.cumsum(p)) and not cum_p.flags.writeable
        assert h.running_totals()[1] is cum_n  # computed once

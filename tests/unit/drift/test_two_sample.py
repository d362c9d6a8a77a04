"""Two-sample primitives on histograms: quantile bins, chi-square, rank-sum, distances, Šidák."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from app.drift.two_sample import (
    bin_midpoints,
    chi_square_homogeneity,
    coarsen,
    logit_bin_midpoints,
    quantile_bin_starts,
    rank_sum_test,
    sidak,
    wasserstein_distances,
    wasserstein_from_histograms,
)

counts_strategy = st.lists(st.integers(0, 50), min_size=1, max_size=40).filter(lambda c: sum(c) > 0)


def _brute_force_starts(counts: list[int], k: int) -> list[int]:
    """Walk the bins; close coarse bin m after the first bin where the share reaches m/K."""
    total, running, starts, target = sum(counts), 0, [0], 1
    for j, c in enumerate(counts):
        running += c
        while target < k and running * k >= target * total:
            if j + 1 < len(counts) and starts[-1] != j + 1:
                starts.append(j + 1)
            target += 1
    return starts


@given(counts_strategy, st.integers(1, 25))
@settings(max_examples=200, deadline=None)
def test_quantile_bin_starts_match_brute_force_and_partition(counts: list[int], k: int) -> None:
    ref = np.array(counts, dtype=np.float64)
    starts = quantile_bin_starts(ref, k)
    assert starts.tolist() == _brute_force_starts(counts, k)
    assert 1 <= starts.size <= k
    coarse = coarsen(ref, starts)
    assert coarse.sum() == ref.sum()
    assert np.all(coarse[:-1] > 0)  # every coarse bin but the last holds reference mass


def test_quantile_bins_hold_equal_shares_of_a_smooth_reference() -> None:
    ref = np.full(10_000, 7.0)
    coarse = coarsen(ref, quantile_bin_starts(ref, 20))
    assert coarse.tolist() == [3500.0] * 20


@pytest.mark.parametrize(
    ("r", "w"),
    [([10, 20, 30], [30, 20, 10]), ([500, 400, 100, 3], [40, 41, 20, 0]), ([5, 0, 7], [4, 0, 9])],
)
def test_chi_square_homogeneity_equals_scipy_contingency(r: list[int], w: list[int]) -> None:
    ra, wa = np.array(r, dtype=np.float64), np.array(w, dtype=np.float64)
    statistic, df, p = chi_square_homogeneity(ra, wa)
    keep = (ra + wa) > 0
    expected = stats.chi2_contingency(np.vstack([ra[keep], wa[keep]]), correction=False)
    assert statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert df == expected.dof
    assert p == pytest.approx(expected.pvalue, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rank_sum_equals_scipy_mann_whitney_on_the_expanded_samples(seed: int) -> None:
    rng = np.random.default_rng(seed)
    r = rng.integers(0, 30, 50).astype(np.float64)
    w = rng.integers(0, 30, 50).astype(np.float64) * (np.arange(50) > 10 * seed)
    z, p, superiority = rank_sum_test(r, w)
    bins = np.arange(50)
    expected = stats.mannwhitneyu(
        np.repeat(bins, w.astype(int)), np.repeat(bins, r.astype(int)), use_continuity=False
    )
    assert p == pytest.approx(expected.pvalue, rel=1e-9)
    assert superiority == pytest.approx(expected.statistic / (r.sum() * w.sum()), rel=1e-12)
    assert np.sign(z) == np.sign(superiority - 0.5)


def test_rank_sum_with_everything_in_one_bin_has_no_evidence() -> None:
    assert rank_sum_test(np.array([0.0, 9.0]), np.array([0.0, 4.0])) == (0.0, 1.0, 0.5)


def test_chi_square_with_one_bin_has_no_evidence() -> None:
    assert chi_square_homogeneity(np.array([0.0, 9.0]), np.array([0.0, 4.0])) == (0.0, 0, 1.0)


def test_wasserstein_equals_scipy_on_the_expanded_samples() -> None:
    rng = np.random.default_rng(3)
    edges = np.linspace(0.0, 1.0, 41)
    r = rng.integers(0, 20, 40).astype(np.float64)
    w = rng.integers(0, 20, 40).astype(np.float64)
    for points in (bin_midpoints(edges), logit_bin_midpoints(edges)):
        expected = stats.wasserstein_distance(
            np.repeat(points, r.astype(int)), np.repeat(points, w.astype(int))
        )
        assert wasserstein_from_histograms(r, w, points) == pytest.approx(expected, rel=1e-12)


def test_logit_midpoints_put_outer_bins_at_their_finite_edge() -> None:
    edges = np.array([0.0, 0.2, 0.5, 0.8, 1.0])
    z = np.log(0.2 / 0.8)
    np.testing.assert_allclose(logit_bin_midpoints(edges), [z, z / 2, -z / 2, -z])
    np.testing.assert_allclose(bin_midpoints(edges), [0.1, 0.35, 0.65, 0.9])


@pytest.mark.parametrize("p", [0.0, 1e-12, 0.003, 0.2, 0.9, 1.0])
@pytest.mark.parametrize("m", [1, 2])
def test_sidak_is_the_chance_that_the_least_of_m_uniforms_is_this_small(p: float, m: int) -> None:
    exact = 1 - (1 - Fraction(p)) ** m  # exact rational arithmetic, no cancellation
    assert sidak(p, m) == pytest.approx(float(exact), rel=1e-12, abs=1e-300)


def test_wasserstein_distances_at_several_locations_are_those_of_one_call_each() -> None:
    rng = np.random.default_rng(2)
    reference, window = rng.poisson(4.0, 30).astype(float), rng.poisson(6.0, 30).astype(float)
    edges = np.linspace(0.0, 1.0, 31)
    locations = [bin_midpoints(edges), logit_bin_midpoints(edges)]
    expected = [wasserstein_from_histograms(reference, window, p) for p in locations]
    assert wasserstein_distances(reference, window, locations) == expected


def test_running_totals_given_by_the_caller_change_nothing() -> None:
    """The likelihood test passes the histograms' running totals; every result is the
    same, bit for bit, as when each function sums for itself."""
    rng = np.random.default_rng(21)
    reference = rng.integers(0, 40, 300).astype(np.float64)
    window = rng.integers(0, 9, 300).astype(np.float64)
    cum_r, cum_w = np.cumsum(reference), np.cumsum(window)
    assert rank_sum_test(reference, window, reference_cumulative=cum_r) == rank_sum_test(
        reference, window
    )
    pooled = reference + window
    assert np.array_equal(
        quantile_bin_starts(pooled, 20, cumulative=cum_r + cum_w), quantile_bin_starts(pooled, 20)
    )
    assert np.array_equal(
        quantile_bin_starts(reference, 10, cumulative=cum_r), quantile_bin_starts(reference, 10)
    )
    points = [np.linspace(0.0, 1.0, 300), np.linspace(-5.0, 5.0, 300)]
    assert wasserstein_distances(
        reference, window, points, cumulatives=(cum_r, cum_w)
    ) == wasserstein_distances(reference, window, points)


def test_cubes_by_products_are_the_powers_bit_for_bit() -> None:
    from app.drift.two_sample import EXACT_CUBES, _cubes

    rng = np.random.default_rng(22)
    whole = np.concatenate(([0.0, 1.0, EXACT_CUBES - 1], rng.integers(0, int(EXACT_CUBES), 5000)))
    for x in (whole, whole + 0.5, whole * 64.0, rng.uniform(0.0, 1e6, 300), np.zeros(0)):
        x = x.astype(np.float64)
        assert np.array_equal(_cubes(x), x**3)

"""DBT reference curves: defining ordering and nesting, distribution, seeding, caching."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.errors import InvalidInput
from app.metrics.dbt import (
    DEFAULT_DEPTH,
    DEFAULT_N_CURVES,
    DBTReference,
    dbt_reference,
    monte_carlo_standard_error,
    root_draws_match,
    sample_dbt,
)


@pytest.fixture(scope="module")
def ref() -> DBTReference:
    return sample_dbt(4000, 6, np.random.default_rng(11))


def test_shapes_and_end_points(ref: DBTReference) -> None:
    assert ref.alpha.shape == ref.tpr.shape == (4000, 2**6 + 1)
    assert ref.n_curves == 4000 and ref.n_points == 65 and ref.depth == 6
    assert np.all(ref.alpha[:, 0] == 0.0) and np.all(ref.alpha[:, -1] == 1.0)
    assert np.all(ref.beta[:, 0] == 1.0) and np.all(ref.beta[:, -1] == 0.0)


def test_alpha_increases_and_beta_decreases_along_every_curve(ref: DBTReference) -> None:
    assert np.all(np.diff(ref.alpha, axis=1) > 0.0)
    assert np.all(np.diff(ref.beta, axis=1) < 0.0)


def test_children_lie_inside_the_ranges_their_ancestors_split(ref: DBTReference) -> None:
    """Nesting: a point of level l lies strictly between its two nearest coarser points.

    In tree terms: a left child has alpha below and beta above its parent, a
    right child the opposite, and both stay inside the parent's own range.
    """
    width = ref.n_points - 1
    for level in range(1, ref.depth + 1):
        step = width >> level
        new = slice(step, None, 2 * step)
        coarse = slice(None, None, 2 * step)
        for values, sign in ((ref.alpha, 1.0), (ref.beta, -1.0)):
            lo, hi = values[:, coarse][:, :-1], values[:, coarse][:, 1:]
            point = values[:, new]
            assert np.all(sign * (point - lo) >= 0.0) and np.all(sign * (hi - point) > 0.0)


def test_every_draw_is_uniform_on_the_range_it_splits(ref: DBTReference) -> None:
    width = ref.n_points - 1
    for level in (1, 2, ref.depth):
        step = width >> level
        for values in (ref.alpha, ref.tpr):
            lo = values[:, : -1 : 2 * step]
            hi = values[:, 2 * step :: 2 * step]
            u = (values[:, step :: 2 * step] - lo) / (hi - lo)
            assert stats.kstest(u.ravel()[:20_000], "uniform").pvalue > 1e-3


def test_alpha_and_beta_trees_are_independent(ref: DBTReference) -> None:
    root = ref.n_points // 2
    r = np.corrcoef(ref.alpha[:, root], ref.beta[:, root])[0, 1]
    assert abs(r) < 4.0 / np.sqrt(ref.n_curves)


def test_mean_position_of_each_point_matches_the_splitting_law(ref: DBTReference) -> None:
    # Splitting uniformly, E[alpha at column c] = c / 2^d (and the same for recall).
    expected = np.arange(ref.n_points) / (ref.n_points - 1)
    tolerance = 5.0 * 0.5 / np.sqrt(ref.n_curves)
    assert np.max(np.abs(ref.alpha.mean(axis=0) - expected)) < tolerance
    assert np.max(np.abs(ref.tpr.mean(axis=0) - expected)) < tolerance


def test_same_seed_same_curves_other_seed_other_curves() -> None:
    a = sample_dbt(50, 4, np.random.default_rng(3))
    b = sample_dbt(50, 4, np.random.default_rng(3))
    c = sample_dbt(50, 4, np.random.default_rng(4))
    assert np.array_equal(a.alpha, b.alpha) and np.array_equal(a.tpr, b.tpr)
    assert not np.array_equal(a.alpha, c.alpha)


def test_reference_is_cached_and_read_only() -> None:
    first = dbt_reference(3, 20, 5)
    assert dbt_reference(3, 20, 5) is first
    assert first.seed == 5
    assert np.array_equal(first.alpha, sample_dbt(20, 3, np.random.default_rng(5)).alpha)
    with pytest.raises(ValueError):
        first.alpha[0, 1] = 0.5


@pytest.mark.parametrize(("n_curves", "depth", "seed"), [(7, 1, 2), (50, 4, 3), (300, 8, 20)])
def test_root_draws_match_the_seed_that_drew_the_curves_only(
    n_curves: int, depth: int, seed: int
) -> None:
    """The roots of both arrays are checked (alpha's and, past the rest of alpha's draws,
    the recall's), so a stored reference is known to be the generator's for its seed."""
    ref = sample_dbt(n_curves, depth, np.random.default_rng(seed))
    assert root_draws_match(ref, seed)
    assert not root_draws_match(ref, seed + 1)
    swapped = DBTReference(alpha=ref.alpha, tpr=ref.alpha, depth=depth)
    assert not root_draws_match(swapped, seed)


def _levels_over_all_curves(n_curves: int, depth: int, rng: np.random.Generator) -> np.ndarray:
    """The splitting of app/metrics/dbt.py done one whole level at a time (no blocks)."""
    width = 1 << depth
    out = np.empty((n_curves, width + 1))
    out[:, 0], out[:, -1] = 0.0, 1.0
    for level in range(1, depth + 1):
        step = 1 << (depth - level)
        placed = out[:, :: 2 * step]
        u = rng.random((n_curves, placed.shape[1] - 1))
        out[:, step :: 2 * step] = placed[:, :-1] + (placed[:, 1:] - placed[:, :-1]) * u
    return out


@pytest.mark.parametrize(("n_curves", "depth"), [(1, 1), (255, 3), (600, 8)])
def test_the_blocked_build_draws_the_curves_of_whole_levels(n_curves: int, depth: int) -> None:
    """Blocks of curves (the last one partial) give the bytes of a build level by level."""
    ref = sample_dbt(n_curves, depth, np.random.default_rng(8))
    rng = np.random.default_rng(8)
    alpha = _levels_over_all_curves(n_curves, depth, rng)
    tpr = _levels_over_all_curves(n_curves, depth, rng)
    assert ref.alpha.tobytes() == alpha.tobytes() and ref.tpr.tobytes() == tpr.tobytes()


def test_default_reference_dimensions() -> None:
    ref = dbt_reference()
    assert (ref.n_curves, ref.depth) == (DEFAULT_N_CURVES, DEFAULT_DEPTH)
    assert ref.n_points == 257


def test_counts_at_prior_leave_out_the_origin(ref: DBTReference) -> None:
    tps, fps = ref.counts_at_prior(0.2, slice(0, 10))
    assert tps.shape == fps.shape == (10, 64)
    assert np.allclose(tps[:, -1], 0.2) and np.allclose(fps[:, -1], 0.8)
    assert np.allclose(tps, 0.2 * ref.tpr[:10, 1:]) and np.allclose(fps, 0.8 * ref.alpha[:10, 1:])


def test_monte_carlo_standard_error() -> None:
    assert monte_carlo_standard_error(0.5, DEFAULT_N_CURVES) == pytest.approx(0.00354, abs=1e-5)
    assert monte_carlo_standard_error(0.0, 100) == 0.0
    with pytest.raises(InvalidInput) as err:
        monte_carlo_standard_error(1.5, 100)
    assert err.value.field == "ops"
    with pytest.raises(InvalidInput) as err:
        monte_carlo_standard_error(0.5, 0)
    assert err.value.field == "n_curves"


@pytest.mark.parametrize(
    ("n", "depth", "field"),
    [(0, 8, "n_curves"), (10, 0, "depth"), (10, 17, "depth"), (2.5, 8, "n_curves")],
)
def test_bad_dimensions_name_the_field(n: int, depth: int, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        sample_dbt(n, depth, np.random.default_rng(0))
    assert err.value.field == field

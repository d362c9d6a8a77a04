"""Prior-shift test: the 2x2 two-sample test, its effect sizes and its flag."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from app.drift.prior import prior_shift_test, two_proportion_test
from app.drift.settings import DriftSettings
from app.errors import InvalidInput

LOOSE = DriftSettings(alpha=0.05, min_prior_effect=0.0, min_class_count=30)


@pytest.mark.parametrize(
    "table",
    [(100, 900, 60, 940), (5000, 45000, 200, 9800), (40, 60, 45, 55), (1000, 1000, 10, 30)],
)
def test_chi_square_branch_equals_scipy_pearson_without_correction(
    table: tuple[int, int, int, int],
) -> None:
    a, b, c, d = table
    test, statistic, p = two_proportion_test(a, b, c, d)
    expected = stats.chi2_contingency([[a, b], [c, d]], correction=False)
    assert test == "chi2"
    assert statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert p == pytest.approx(expected.pvalue, rel=1e-9)


def _fisher_brute_force(a: int, b: int, c: int, d: int) -> float:
    """Two-sided Fisher p: total hypergeometric probability of tables no likelier than this."""
    row, col, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return math.comb(col, x) * math.comb(n - col, row - x) / math.comb(n, row)

    observed = prob(a)
    support = range(max(0, row + col - n), min(row, col) + 1)
    return sum(p for x in support if (p := prob(x)) <= observed * (1 + 1e-7))


@pytest.mark.parametrize("table", [(3, 97, 0, 20), (30, 70, 1, 14), (2, 8, 9, 1)])
def test_small_expected_counts_use_fisher_exact(table: tuple[int, int, int, int]) -> None:
    test, statistic, p = two_proportion_test(*table)
    assert test == "fisher"
    assert statistic is None
    assert p == pytest.approx(_fisher_brute_force(*table), rel=1e-9)


def test_effects_are_changes_of_pi() -> None:
    r = prior_shift_test(5000, 45000, 200, 9800, LOOSE)
    assert r.reference_prior == 0.1
    assert r.window_prior == 0.02
    assert r.change == pytest.approx(-0.08)
    assert r.relative_change == pytest.approx(-0.8)
    assert r.effect == pytest.approx(0.08)
    assert r.status == "ok"
    assert r.flag is True


def test_same_counts_give_p_one_and_no_flag() -> None:
    r = prior_shift_test(1000, 9000, 100, 900, LOOSE)
    assert r.p_value == pytest.approx(1.0)
    assert r.effect == 0.0
    assert r.flag is False


def test_flag_needs_both_significance_and_minimum_effect() -> None:
    counts = (50_000, 450_000, 10_500, 89_500)  # pi 0.100 -> 0.105 on large samples
    significant = prior_shift_test(*counts, LOOSE)
    assert significant.p_value is not None and significant.p_value < 1e-5
    assert significant.flag is True
    big_effect_needed = DriftSettings(alpha=0.05, min_prior_effect=0.01)
    assert prior_shift_test(*counts, big_effect_needed).flag is False
    small = prior_shift_test(100, 900, 15, 85, DriftSettings(alpha=0.05, min_prior_effect=0.01))
    assert small.effect is not None and small.effect > 0.01
    assert small.p_value is not None and small.p_value > 0.05
    assert small.flag is False


def test_window_without_positives_is_a_prior_shift_not_missing_data() -> None:
    r = prior_shift_test(5000, 45000, 0, 10_000, DriftSettings())
    assert r.status == "ok"
    assert r.window_prior == 0.0
    assert r.flag is True


@pytest.mark.parametrize(
    ("reference", "window"),
    [((29, 10_000), (10, 100)), ((10_000, 5), (10, 100)), ((500, 500), (0, 0))],
)
def test_thin_reference_or_empty_window_is_insufficient_data(
    reference: tuple[int, int], window: tuple[int, int]
) -> None:
    r = prior_shift_test(*reference, *window, DriftSettings(min_class_count=30))
    assert r.status == "insufficient_data"
    assert (r.p_value, r.effect, r.flag) == (None, None, None)
    d = r.to_dict()
    assert d["status"] == "insufficient_data" and d["p_value"] is None


def test_to_dict_has_contract_keys_and_is_plain_json() -> None:
    d = prior_shift_test(5000, 45000, 200, 9800, DriftSettings()).to_dict()
    assert {"p_value", "effect", "flag", "status"} <= d.keys()
    assert all(isinstance(v, float | int | str | bool | dict | type(None)) for v in d.values())


def test_reference_sampling_error_matters_one_sample_test_would_be_too_liberal() -> None:
    """Why two-sample: treating the reference prior as known inflates false alarms.

    With n_w/n_r = 1/5 the variance of pi_w - pi_r is 1.2 times that of pi_w alone;
    under equal priors the one-sample z test rejects too often, the 2x2 test does not.
    """
    rng = np.random.default_rng(7)
    n_r, n_w, pi, trials = 50_000, 10_000, 0.1, 4000
    p_r = rng.binomial(n_r, pi, trials)
    p_w = rng.binomial(n_w, pi, trials)
    pi_r = p_r / n_r
    z_one = (p_w / n_w - pi_r) / np.sqrt(pi_r * (1 - pi_r) / n_w)
    one_sample = np.mean(2 * stats.norm.sf(np.abs(z_one)) < 0.01)
    two_sample = np.mean(
        [
            two_proportion_test(a, n_r - a, c, n_w - c)[2] < 0.01
            for a, c in zip(p_r, p_w, strict=True)
        ]
    )
    assert one_sample > stats.binom.ppf(0.999, trials, 0.01) / trials
    assert two_sample <= stats.binom.ppf(0.999, trials, 0.01) / trials


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("alpha", {"alpha": 0.0}),
        ("alpha", {"alpha": 1.5}),
        ("min_prior_effect", {"min_prior_effect": -0.1}),
        ("min_likelihood_effect", {"min_likelihood_effect": float("nan")}),
        ("min_class_count", {"min_class_count": 0}),
        ("test_bins", {"test_bins": 1}),
    ],
)
def test_bad_settings_name_the_field(field: str, kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidInput) as err:
        DriftSettings(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


@pytest.mark.parametrize(
    "table", [(1, 1, 2**53 - 3, 1), (50, 200, 2**53 - 253, 3), (2, 30, 10**12, 0)]
)
def test_fisher_exact_at_the_window_count_ceiling(table: tuple[int, int, int, int]) -> None:
    """Issue 20: scipy's Fisher test takes time in proportion to the counts (90 s at
    10^12, so a window of 2^53 rows held the worker); the p-value is the exact one."""
    test, _, p = two_proportion_test(*map(float, table))
    assert test == "fisher"
    assert p == pytest.approx(_fisher_brute_force(*table), rel=1e-9, abs=1e-300)

"""Seeded simulations: each flag keeps its false-alarm rate under the other kind of shift.

Scores are sigmoid(logit), logit ~ Normal(0, 1) for positives and Normal(-2.5, 1)
for negatives, binned on the default 10,000 logit-uniform bins. Each trial draws
a fresh reference (5 windows of 10,000 rows, pooled: one draw of 50,000 rows has
the same distribution) and a fresh window, so the rates are the unconditional
false-alarm rates the significance level promises.

The tests run at alpha = 0.05 with zero minimum effects: the minimum effects
can only remove flags, and 5% gives the binomial check resolution with a few
hundred trials. A rate is "at most nominal" when the count of flags is not
above the 99.9% quantile of Binomial(trials, alpha).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.drift import DriftSettings, drift_verdict
from app.drift.simulation import BinormalStream
from app.drift.two_sample import chi_square_homogeneity, coarsen, quantile_bin_starts
from app.metrics.binning import default_bin_edges

pytestmark = pytest.mark.slow

EDGES = default_bin_edges((0.5,))
STABLE = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-2.5)
POSITIVES_DOWN = BinormalStream(EDGES, mu_positive=-0.2, mu_negative=-2.5)  # 0.2 sd lower
ALPHA = 0.05
SETTINGS = DriftSettings(alpha=ALPHA, min_prior_effect=0.0, min_likelihood_effect=0.0)
TRIALS = 400


def _most_false_alarms(trials: int) -> float:
    return float(stats.binom.ppf(0.999, trials, ALPHA))


def _flag_rates(
    window_stream: BinormalStream,
    *,
    seed: int,
    reference_n: int,
    window_n: int,
    reference_prior: float,
    window_prior: float,
    trials: int = TRIALS,
) -> tuple[int, int]:
    """How many of ``trials`` windows raised the prior flag and the likelihood flag."""
    rng = np.random.default_rng(seed)
    prior_flags = likelihood_flags = 0
    for _ in range(trials):
        reference = STABLE.window(rng, n=reference_n, prior=reference_prior)
        window = window_stream.window(rng, n=window_n, prior=window_prior)
        result = drift_verdict(reference, window, threshold=0.5, settings=SETTINGS)
        prior_flags += result.prior.flag is True
        likelihood_flags += result.likelihood.flag is True
    return prior_flags, likelihood_flags


def test_pure_prior_shift_raises_the_prior_flag_only() -> None:
    prior_flags, likelihood_flags = _flag_rates(
        STABLE,
        seed=101,
        reference_n=50_000,
        window_n=10_000,
        reference_prior=0.10,
        window_prior=0.02,
    )
    assert likelihood_flags <= _most_false_alarms(TRIALS)
    assert prior_flags == TRIALS


def test_pure_likelihood_shift_raises_the_likelihood_flag_only() -> None:
    prior_flags, likelihood_flags = _flag_rates(
        POSITIVES_DOWN,
        seed=202,
        reference_n=50_000,
        window_n=10_000,
        reference_prior=0.10,
        window_prior=0.10,
    )
    assert prior_flags <= _most_false_alarms(TRIALS)
    assert likelihood_flags >= 0.95 * TRIALS  # power of a 0.2 sd shift, ~1,000 positives


def test_size_holds_with_few_examples_of_the_rare_class() -> None:
    """~40 positives per window: fewer test bins, the chi-square still keeps its size."""
    _, likelihood_flags = _flag_rates(
        STABLE,
        seed=303,
        reference_n=10_000,
        window_n=2_000,
        reference_prior=0.02,
        window_prior=0.02,
    )
    assert likelihood_flags <= _most_false_alarms(TRIALS)


def test_a_change_of_spread_is_caught_by_the_chi_square_part() -> None:
    """Same centre, wider positives: ranks stay balanced, the binned shape does not."""
    rng = np.random.default_rng(505)
    reference = STABLE.window(rng, n=100_000, prior=0.3)
    wider = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-2.5, sd_positive=1.5)
    result = drift_verdict(reference, wider.window(rng, n=20_000, prior=0.3), threshold=0.5)
    positive = result.likelihood.positive
    assert positive.flag is True and result.verdict == "likelihood"
    assert positive.superiority == pytest.approx(0.5, abs=0.01)
    assert positive.chi2_p_value is not None and positive.chi2_p_value < 1e-12


def test_a_test_on_pooled_scores_would_mistake_a_prior_shift_for_drift() -> None:
    """The baseline the per-class design avoids: pooled scores move with the class mix."""
    rng = np.random.default_rng(404)
    trials, alarms = 100, 0
    for _ in range(trials):
        reference = STABLE.window(rng, n=50_000, prior=0.10)
        window = STABLE.window(rng, n=10_000, prior=0.02)
        pooled_r = reference.positives + reference.negatives
        pooled_w = window.positives + window.negatives
        starts = quantile_bin_starts(pooled_r, 20)
        _, _, p = chi_square_homogeneity(coarsen(pooled_r, starts), coarsen(pooled_w, starts))
        alarms += p < ALPHA
    assert alarms >= 0.95 * trials

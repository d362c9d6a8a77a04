"""Seeded simulations: the label-free tests keep their level, the interval its coverage.

Scores are sigmoid(z - 1.5) with z ~ N(1.5, 1) for positives and N(0, 1) for
negatives (logits N(0, 1) and N(-1.5, 1)), on the default bins. Every trial
draws a fresh reference and a fresh window, so the rates are the
unconditional ones the level promises, including the reference's own
sampling error. Window/reference size ratios from 1/24 to 100.

Rates are checked at alpha = 0.05 (a few hundred trials resolve it): "at most
alpha" means a count of rejections not above the 99.9% quantile of
Binomial(trials, alpha); "coverage at the level" means a count of covering
intervals within the central 99.9% of Binomial(trials, level).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from app.drift.settings import DriftSettings
from app.drift.simulation import BinormalStream
from app.estimation import MixtureReference, estimate_prior
from app.estimation.fit import mixture_fit_test
from app.estimation.prior import ml_prior
from app.estimation.sampling import GroupedSampling
from app.metrics.binning import default_bin_edges

pytestmark = pytest.mark.slow

EDGES = default_bin_edges((0.5,))
STABLE = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-1.5)
ALPHA = 0.05
SETTINGS = DriftSettings(alpha=ALPHA)
TRIALS = 1000


def _at_most_alpha(count: int, trials: int = TRIALS) -> bool:
    return count <= stats.binom.ppf(0.999, trials, ALPHA)


@pytest.mark.parametrize(
    ("reference_n", "window_n", "reference_prior", "window_prior"),
    [
        (240_000, 10_000, 0.1, 0.05),
        (20_000, 20_000, 0.1, 0.2),
        (5_000, 50_000, 0.1, 0.1),
        (2_000, 200_000, 0.1, 0.1),
        (1_000, 100_000, 0.2, 0.4),
    ],
)
def test_fit_test_level_and_interval_coverage_under_a_pure_prior_shift(
    reference_n: int, window_n: int, reference_prior: float, window_prior: float
) -> None:
    rng = np.random.default_rng(reference_n + window_n)
    rejected = misspecified = flagged = covered = prior_flags = 0
    for _ in range(TRIALS):
        ref = MixtureReference.from_histograms(
            STABLE.window(rng, n=reference_n, prior=reference_prior)
        )
        w = STABLE.window(rng, n=window_n, prior=window_prior)
        est = estimate_prior(ref, w.positives + w.negatives, threshold=0.5, settings=SETTINGS)
        assert est.fit.p_value is not None and est.p_value is not None
        assert est.specification.p_value is not None
        rejected += est.fit.p_value < ALPHA
        misspecified += est.specification.p_value < ALPHA
        flagged += est.verdict == "likelihood"
        covered += est.lower <= window_prior <= est.upper
        prior_flags += est.verdict == "prior"
    for count in (rejected, misspecified):  # each test at its level, not vacuous either
        assert _at_most_alpha(count) and count >= stats.binom.ppf(0.001, TRIALS, ALPHA), count
    assert _at_most_alpha(flagged), flagged  # both at alpha / 2: the verdict's level
    low, high = stats.binom.interval(0.999, TRIALS, 0.95)
    assert low <= covered <= high, covered
    if window_prior == reference_prior:
        assert _at_most_alpha(prior_flags), prior_flags
    else:
        assert prior_flags == TRIALS - flagged


def test_coverage_at_another_level() -> None:
    rng = np.random.default_rng(21)
    covered = 0
    for _ in range(TRIALS):
        ref = MixtureReference.from_histograms(STABLE.window(rng, n=50_000, prior=0.1))
        w = STABLE.window(rng, n=10_000, prior=0.03)
        est = estimate_prior(ref, w.positives + w.negatives, threshold=0.5, level=0.8)
        covered += est.lower <= 0.03 <= est.upper
    low, high = stats.binom.interval(0.999, TRIALS, 0.8)
    assert low <= covered <= high, covered


def test_ignoring_the_references_sampling_error_would_over_reject() -> None:
    """The check above has teeth: the textbook test (reference as truth) fails it at N = 10 R."""
    rng = np.random.default_rng(22)
    trials, naive = 100, 0
    for _ in range(trials):
        ref = MixtureReference.from_histograms(STABLE.window(rng, n=5_000, prior=0.1))
        w = STABLE.window(rng, n=50_000, prior=0.1)
        counts = ref.grouped(w.positives + w.negatives)
        prior = ml_prior(counts, ref.f_positive, ref.f_negative)
        sampling = GroupedSampling.at(ref, prior, float(counts.sum()))
        without = dataclasses.replace(sampling, reference_cov=0.0 * sampling.reference_cov)
        p = mixture_fit_test(counts, without).p_value
        assert p is not None
        naive += p < ALPHA
    assert not _at_most_alpha(naive, trials), naive


@pytest.mark.parametrize("shift", [0.2, 0.3])
def test_fit_test_detects_a_shift_of_the_negatives_on_10k_windows(shift: float) -> None:
    moved = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-1.5 + shift)
    settings = DriftSettings(alpha=0.01)
    rng = np.random.default_rng(int(shift * 10))
    trials, flagged = 40, 0
    for _ in range(trials):
        ref = MixtureReference.from_histograms(STABLE.window(rng, n=240_000, prior=0.1))
        w = moved.window(rng, n=10_000, prior=0.1)
        est = estimate_prior(ref, w.positives + w.negatives, threshold=0.5, settings=settings)
        flagged += est.verdict == "likelihood" and not est.reliable
    assert flagged >= 0.9 * trials, flagged

"""Per-class likelihood-shift tests: combination, Šidák across classes, effects, flags."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from app.drift.histograms import WindowHistograms
from app.drift.likelihood import PSI_BINS, likelihood_shift_test
from app.drift.settings import DriftSettings
from app.drift.simulation import BinormalStream
from app.drift.two_sample import coarsen, quantile_bin_starts, sidak
from app.metrics.binning import default_bin_edges
from app.metrics.probability import population_stability_index


def _hist(
    pos: Sequence[int] | npt.NDArray[np.int64], neg: Sequence[int] | npt.NDArray[np.int64]
) -> WindowHistograms:
    return WindowHistograms(pos, neg, np.linspace(0.0, 1.0, len(pos) + 1))


def test_identical_distributions_give_no_evidence_and_zero_effects() -> None:
    pos = list(range(1, 41))
    neg = list(range(80, 0, -2))
    r = likelihood_shift_test(
        _hist([3 * c for c in pos], [3 * c for c in neg]), _hist(pos, neg), DriftSettings()
    )
    assert r.status == "ok" and r.flag is False
    assert r.p_value == pytest.approx(1.0)
    for c in (r.positive, r.negative):
        assert c.chi2_statistic == pytest.approx(0.0, abs=1e-9)
        assert c.rank_z == pytest.approx(0.0, abs=1e-9)
        assert c.superiority == pytest.approx(0.5)
        assert c.psi == pytest.approx(0.0, abs=1e-12)
        assert c.wasserstein_score == pytest.approx(0.0, abs=1e-12)


def test_a_moved_class_is_flagged_alone_with_sidak_adjusted_p() -> None:
    neg = [200] * 20
    ref = _hist([10] * 10 + [40] * 10, neg)
    win = _hist([40] * 10 + [10] * 10, neg)  # positives moved down, negatives unchanged
    r = likelihood_shift_test(ref, win, DriftSettings())
    assert r.flag is True
    assert r.positive.flag is True and r.negative.flag is False
    assert r.positive.p_value is not None
    assert r.positive.p_adjusted == pytest.approx(sidak(r.positive.p_value, 2), rel=1e-12)
    assert r.p_value == r.positive.p_adjusted
    assert r.effect == r.positive.psi
    # CDF gap 0.06(j+1) up to bin 9, then 0.6 - 0.06(j-9); sum 6.0 times bin spacing 0.05
    assert r.positive.wasserstein_score == pytest.approx(0.3, rel=1e-12)


def test_psi_is_the_metrics_library_psi_over_reference_deciles() -> None:
    rng = np.random.default_rng(11)
    ref_pos = rng.integers(0, 30, 200)
    win_pos = rng.integers(0, 30, 200)
    ones = np.full(200, 100)
    r = likelihood_shift_test(_hist(ref_pos, ones), _hist(win_pos, ones), DriftSettings())
    deciles = quantile_bin_starts(ref_pos.astype(np.float64), PSI_BINS)
    a = coarsen(ref_pos.astype(np.float64), deciles)
    b = coarsen(win_pos.astype(np.float64), deciles)
    assert deciles.size == PSI_BINS
    assert r.positive.psi == pytest.approx(population_stability_index(a, b), rel=1e-12)
    exact = float(np.sum((b / b.sum() - a / a.sum()) * np.log((b / b.sum()) / (a / a.sum()))))
    assert r.positive.psi == pytest.approx(exact, rel=1e-9)  # no empty decile: no floor


def test_flag_needs_minimum_effect_too() -> None:
    ref = _hist([10] * 10 + [40] * 10, [200] * 20)
    win = _hist([40] * 10 + [10] * 10, [200] * 20)
    r = likelihood_shift_test(ref, win, DriftSettings())
    assert r.effect is not None
    strict = likelihood_shift_test(ref, win, DriftSettings(min_likelihood_effect=r.effect))
    assert strict.p_value == r.p_value and strict.flag is False


def test_class_below_min_count_is_insufficient_and_the_other_is_tested_alone() -> None:
    ref = _hist([50] * 10, [500] * 10)
    win = _hist([2] * 10, [30] * 5 + [70] * 5)  # 20 positives < 30
    r = likelihood_shift_test(ref, win, DriftSettings(min_class_count=30))
    assert r.positive.status == "insufficient_data"
    assert r.positive.to_dict()["p_value"] is None and r.positive.flag is None
    assert r.negative.status == "ok" and r.status == "ok"
    assert r.negative.p_value is not None
    assert r.negative.p_adjusted == pytest.approx(r.negative.p_value, rel=1e-12)  # m = 1
    assert r.flag is True


def test_no_class_testable_is_insufficient_data() -> None:
    r = likelihood_shift_test(_hist([5] * 4, [5] * 4), _hist([50] * 4, [50] * 4), DriftSettings())
    assert r.status == "insufficient_data"
    assert (r.p_value, r.effect, r.flag) == (None, None, None)
    d = r.to_dict()
    assert set(d["per_class"]) == {"positive", "negative"}


def test_test_bins_shrink_so_every_bin_expects_five_examples() -> None:
    ref = _hist([100] * 100, [100] * 100)
    r = likelihood_shift_test(ref, _hist([1] * 30 + [0] * 70, [1] * 100), DriftSettings())
    assert r.positive.chi2_bins == 30 // 5
    assert r.negative.chi2_bins == DriftSettings().test_bins


def test_class_p_value_is_bonferroni_of_rank_and_chi_square() -> None:
    ref = _hist([10] * 10 + [40] * 10, [200] * 20)
    win = _hist([12] * 10 + [38] * 10, [200] * 20)
    c = likelihood_shift_test(ref, win, DriftSettings()).positive
    assert c.rank_p_value is not None and c.chi2_p_value is not None
    assert c.p_value == min(1.0, 2 * min(c.rank_p_value, c.chi2_p_value))


@pytest.mark.parametrize(
    ("reference_n", "window_n", "reference_prior", "window_prior", "seed"),
    [
        (1_000, 100_000, 0.1, 0.1, 11),  # window 100 times the reference
        (1_000, 100_000, 0.1, 0.3, 12),  # ... and a pure prior shift
        (10_000, 1_000_000, 0.005, 0.005, 13),  # ~50 reference positives
        (100_000, 1_000, 0.1, 0.1, 14),  # reference 100 times the window
    ],
)
@pytest.mark.slow
def test_false_alarm_rate_is_alpha_whatever_the_window_reference_ratio(
    reference_n: int, window_n: int, reference_prior: float, window_prior: float, seed: int
) -> None:
    """No shift: at most the 99.9% quantile of Binomial(1000, alpha) flags.

    1,000 trials at alpha 0.05 fail a true rate of 2 alpha by 3 standard
    deviations; chi-square bins cut at the reference's own quantiles raised
    about 15% in the first two cases.
    """
    alpha, trials = 0.05, 1_000
    stream = BinormalStream(default_bin_edges((0.5,)), mu_positive=0.0, mu_negative=-2.5)
    settings = DriftSettings(alpha=alpha, min_likelihood_effect=0.0)
    rng = np.random.default_rng(seed)
    flags = 0
    for _ in range(trials):
        reference = stream.window(rng, n=reference_n, prior=reference_prior)
        window = stream.window(rng, n=window_n, prior=window_prior)
        flags += likelihood_shift_test(reference, window, settings).flag is True
    assert flags <= stats.binom.ppf(0.999, trials, alpha)

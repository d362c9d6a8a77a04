"""The label-free prior: grouping, maximum likelihood, EM fixed point, interval, adjusted count."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.drift.histograms import WindowHistograms
from app.drift.settings import DriftSettings
from app.drift.simulation import BinormalStream
from app.errors import InvalidInput
from app.estimation import MixtureReference, estimate_prior, estimate_window
from app.estimation.prior import (
    adjusted_count_prior,
    equal_prior_p_value,
    mixture_log_likelihood,
    ml_prior,
    profile_interval,
)
from app.estimation.specification import SpecificationTest
from app.metrics.binning import default_bin_edges

EDGES = default_bin_edges((0.5,))
STREAM = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-1.5)


def _reference(rng: np.random.Generator, n: int = 100_000, prior: float = 0.1) -> MixtureReference:
    return MixtureReference.from_histograms(STREAM.window(rng, n=n, prior=prior))


def _unlabelled(rng: np.random.Generator, n: int, prior: float) -> np.ndarray:
    w = STREAM.window(rng, n=n, prior=prior)
    return w.positives + w.negatives


# --- grouping -------------------------------------------------------------------


def test_groups_follow_the_equal_reference_mass_rule_with_the_pseudo_count() -> None:
    rng = np.random.default_rng(1)
    hist = STREAM.window(rng, n=50_000, prior=0.2)
    ref = MixtureReference.from_histograms(hist)
    total = hist.positives + hist.negatives
    cum = np.cumsum(total)
    # group k (1..G-1) ends with the first bin where the cumulative count reaches k/G of the total
    ends = [int(np.argmax(cum * 20 >= k * cum[-1])) for k in range(1, 20)]
    assert ref.starts.tolist() == [0, *[e + 1 for e in ends]]
    assert ref.n_groups == 20
    for g in range(20):
        stop = ref.starts[g + 1] if g + 1 < 20 else EDGES.size - 1
        assert ref.positives[g] == hist.positives[ref.starts[g] : stop].sum()
        assert ref.negatives[g] == hist.negatives[ref.starts[g] : stop].sum()
    pooled = (ref.positives + ref.negatives) / 50_000  # 10 pseudo-examples per class, spread so
    assert np.allclose(ref.f_positive, (ref.positives + 10 * pooled) / (hist.n_positives + 10.0))
    assert np.allclose(ref.f_negative, (ref.negatives + 10 * pooled) / (hist.n_negatives + 10.0))
    # both smoothed classes are raw mixtures: f = f0 + a (f1 - f0) at a0, a1
    raw1, raw0 = ref.positives / hist.n_positives, ref.negatives / hist.n_negatives
    a0, a1 = ref.smoothing
    assert np.allclose(ref.f_positive, raw0 + a1 * (raw1 - raw0), rtol=1e-12)
    assert np.allclose(ref.f_negative, raw0 + a0 * (raw1 - raw0), rtol=1e-12)
    assert 0.0 < a0 < ref.prior < a1 < 1.0
    # equal mass: every group holds about 1/20 of the reference
    assert np.all(np.abs((ref.positives + ref.negatives) / 50_000 - 0.05) < 0.01)
    assert ref.prior == hist.prior
    assert ref.curve.positives == hist.n_positives


@pytest.mark.parametrize("reference_positives", [50, 100, 1_000])
def test_the_pseudo_count_does_not_bias_the_prior(reference_positives: int) -> None:
    """A window that is exactly the reference's classes mixed at pi gives pi on the raw scale,
    however small the reference (the uniform pseudo-count gave about pi (1 + 10 / R1))."""
    rng = np.random.default_rng(reference_positives)
    hist = STREAM.window(rng, n=reference_positives * 100, prior=0.01)
    ref = MixtureReference.from_histograms(hist)
    a0, a1 = ref.smoothing
    f1, f0 = hist.positives / hist.n_positives, hist.negatives / hist.n_negatives
    for pi in (0.005, 0.01, 0.05):
        counts = ref.grouped(10_000 * (pi * f1 + (1 - pi) * f0))
        smoothed = ml_prior(counts, ref.f_positive, ref.f_negative)
        assert a0 + smoothed * (a1 - a0) == pytest.approx(pi, rel=1e-6)


@pytest.mark.parametrize(
    ("mu_negative", "reference_prior"), [(-2.5, 0.01), (-2.5, 0.1), (-1.0, 0.1)]
)
@pytest.mark.slow
def test_the_prior_is_unbiased_at_50_reference_positives(
    mu_negative: float, reference_prior: float
) -> None:
    """50 reference positives, windows of 10,000 rows at twice the reference's prior: the mean
    relative error of pi_hat is small. The uniform pseudo-count of 0.5 gave +17% and +21% with
    the strong classifier (AUC 0.96); without the errors-in-variables correction the weak one
    (AUC 0.76) gave -10%."""
    stream = BinormalStream(EDGES, mu_positive=0.0, mu_negative=mu_negative)
    rng = np.random.default_rng(50)
    errors, covered, trials = [], 0, 300
    for _ in range(trials):
        ref = MixtureReference.from_histograms(
            stream.window(rng, n=round(50 / reference_prior), prior=reference_prior)
        )
        w = stream.window(rng, n=10_000, prior=2 * reference_prior)
        est = estimate_prior(ref, w.positives + w.negatives, threshold=0.5)
        errors.append(est.value / (2 * reference_prior) - 1)
        covered += est.lower <= 2 * reference_prior <= est.upper
    assert abs(np.mean(errors)) < 0.05, np.mean(errors)
    assert covered >= stats.binom.ppf(0.001, trials, 0.95), covered


def test_a_bin_holding_much_of_the_reference_merges_groups() -> None:
    edges = np.linspace(0.0, 1.0, 5)
    hist = WindowHistograms([1, 0, 60, 1], [1, 30, 6, 1], edges)
    ref = MixtureReference.from_histograms(hist, groups=10)
    assert ref.starts.tolist() == [0, 2, 3]
    assert ref.positives.tolist() == [1.0, 60.0, 1.0]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"groups": 1}, "groups"),
        ({"groups": True}, "groups"),
        ({"pseudo_count": 0.0}, "pseudo_count"),
    ],
)
def test_bad_grouping_options_name_the_field(kwargs: dict[str, object], field: str) -> None:
    hist = WindowHistograms([1, 2], [2, 1], [0.0, 0.5, 1.0])
    with pytest.raises(InvalidInput) as err:
        MixtureReference.from_histograms(hist, **kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


@pytest.mark.parametrize(
    ("positives", "negatives", "reason"),
    [
        ([0, 0], [2, 1], "both classes"),
        ([0, 7], [0, 3], "same score distribution"),  # every score in one bin: one group
        ([2, 4], [2, 4], "same score distribution"),
    ],
)
def test_a_reference_that_cannot_identify_the_prior_is_refused(
    positives: list[int], negatives: list[int], reason: str
) -> None:
    with pytest.raises(InvalidInput, match=reason) as err:
        MixtureReference.from_histograms(WindowHistograms(positives, negatives, [0.0, 0.5, 1.0]))
    assert err.value.field == "reference"


@pytest.mark.parametrize(
    ("unlabelled", "reason"),
    [
        ([1.0, 2.0], "array of 3"),
        ([0, 0, 0], "empty"),
        ([1, -1, 2], ">= 0"),
        ([[1, 2, 3]], "array"),
    ],
)
def test_bad_unlabelled_histograms_are_refused(unlabelled: object, reason: str) -> None:
    ref = MixtureReference.from_histograms(
        WindowHistograms([1, 2, 3], [3, 2, 1], [0.0, 0.2, 0.6, 1.0]), groups=2
    )
    with pytest.raises(InvalidInput, match=reason) as err:
        estimate_prior(ref, unlabelled, threshold=0.6)
    assert err.value.field == "unlabelled"


# --- the maximum-likelihood prior -------------------------------------------------


def _brute_force_argmax(counts: np.ndarray, f1: np.ndarray, f0: np.ndarray) -> float:
    grid = np.linspace(0.0, 1.0, 200_001)
    ll = np.log(grid[:, None] * f1 + (1.0 - grid[:, None]) * f0) @ counts
    return float(grid[int(np.argmax(ll))])


@pytest.mark.parametrize(("prior", "n"), [(0.02, 10_000), (0.1, 3_000), (0.5, 20_000), (0.9, 500)])
def test_ml_prior_is_the_brute_force_maximum(prior: float, n: int) -> None:
    rng = np.random.default_rng(int(prior * 1000) + n)
    ref = _reference(rng)
    counts = ref.grouped(_unlabelled(rng, n, prior))
    f1, f0 = ref.f_positive, ref.f_negative
    pi_hat = ml_prior(counts, f1, f0)
    assert abs(pi_hat - _brute_force_argmax(counts, f1, f0)) <= 5e-6
    # the root of L' to machine precision: no better value within a few ulps
    best = mixture_log_likelihood(counts, f1, f0, pi_hat)
    for step in (1e-9, 1e-12):
        for other in (pi_hat - step, pi_hat + step):
            assert mixture_log_likelihood(counts, f1, f0, other) <= best + 1e-9 * abs(best)


def test_ml_prior_converges_at_a_tiny_prior() -> None:
    """Seed 26 of 100 references x 20 windows at prior 0.001: the root near 1.3e-4 made
    Brent fail to converge in 100 iterations with the smallest float as tolerance."""
    rng = np.random.default_rng(26)
    ref = MixtureReference.from_histograms(
        STREAM.window(rng, n=100_000, prior=0.01), pseudo_count=0.5
    )
    _unlabelled(rng, 10_000, 0.001)
    counts = ref.grouped(_unlabelled(rng, 10_000, 0.001))
    f1, f0 = ref.f_positive, ref.f_negative
    pi_hat = ml_prior(counts, f1, f0)
    assert pi_hat == pytest.approx(_brute_force_argmax(counts, f1, f0), abs=5e-6)
    assert abs(float(counts @ ((f1 - f0) / (f0 + pi_hat * (f1 - f0))))) < 1e-6  # L'(pi_hat) = 0


def test_ml_prior_is_zero_or_one_when_the_slope_keeps_its_sign() -> None:
    ref = _reference(np.random.default_rng(3))
    f1, f0 = ref.f_positive, ref.f_negative
    low = ref.grouped((EDGES[:-1] < 0.05).astype(np.float64))  # only the lowest scores
    assert ml_prior(low, f1, f0) == 0.0 == _brute_force_argmax(low, f1, f0)
    high = ref.grouped((EDGES[:-1] >= 0.9).astype(np.float64))  # only the highest scores
    assert ml_prior(high, f1, f0) == 1.0 == _brute_force_argmax(high, f1, f0)


def _saerens_em(counts: np.ndarray, f1: np.ndarray, f0: np.ndarray, start: float) -> float:
    """EM of Saerens, Latinne and Decaestecker (2002) on the groups, iterated to convergence."""
    pi = start
    for _ in range(100_000):
        posterior = pi * f1 / (pi * f1 + (1.0 - pi) * f0)
        new = float(counts @ posterior / counts.sum())
        if abs(new - pi) < 1e-15:
            return new
        pi = new
    return pi


@pytest.mark.parametrize("prior", [0.03, 0.1, 0.3, 0.7])
def test_the_em_fixed_point_is_the_ml_prior(prior: float) -> None:
    rng = np.random.default_rng(int(prior * 100))
    ref = _reference(rng)
    counts = ref.grouped(_unlabelled(rng, 10_000, prior))
    f1, f0 = ref.f_positive, ref.f_negative
    pi_hat = ml_prior(counts, f1, f0)
    for start in (0.5, ref.prior):
        assert _saerens_em(counts, f1, f0, start) == pytest.approx(pi_hat, abs=1e-9)


# --- the interval and the tests ----------------------------------------------------


def test_profile_interval_ends_are_where_the_deviance_reaches_the_quantile() -> None:
    rng = np.random.default_rng(4)
    ref = _reference(rng)
    counts = ref.grouped(_unlabelled(rng, 5_000, 0.1))
    f1, f0 = ref.f_positive, ref.f_negative
    pi_hat = ml_prior(counts, f1, f0)
    top = mixture_log_likelihood(counts, f1, f0, pi_hat)
    for level, scale in ((0.95, 1.0), (0.8, 1.0), (0.95, 0.5)):
        lower, upper = profile_interval(counts, f1, f0, pi_hat, level=level, scale=scale)
        q = stats.chi2.ppf(level, 1)
        assert 0.0 < lower < pi_hat < upper < 1.0
        for end in (lower, upper):
            deviance = 2.0 * (top - mixture_log_likelihood(counts, f1, f0, end))
            assert scale * deviance == pytest.approx(q, rel=1e-9)
            # the likelihood-ratio test at the end has p-value 1 - level
            p = equal_prior_p_value(counts, f1, f0, pi_hat, end, scale=scale)
            assert p == pytest.approx(1.0 - level, rel=1e-6)
    narrow = profile_interval(counts, f1, f0, pi_hat, level=0.95)
    wide = profile_interval(counts, f1, f0, pi_hat, level=0.95, scale=0.5)
    assert wide[0] < narrow[0] and wide[1] > narrow[1]


def test_profile_interval_reaches_the_boundary() -> None:
    f1, f0 = np.array([0.1, 0.3, 0.6]), np.array([0.6, 0.3, 0.1])
    counts = np.array([6.0, 3.0, 1.0])
    assert ml_prior(counts, f1, f0) == 0.0
    lower, upper = profile_interval(counts, f1, f0, 0.0, level=0.95)
    assert lower == 0.0 and 0.0 < upper < 1.0
    assert profile_interval(np.array([1.0, 1.0, 1.0]), f1, f0, 0.5, level=0.95) == (0.0, 1.0)


def test_adjusted_count_prior() -> None:
    assert adjusted_count_prior(0.2, tpr=0.8, fpr=0.1) == pytest.approx(0.1 / 0.7)
    assert adjusted_count_prior(0.05, tpr=0.8, fpr=0.1) == 0.0
    assert adjusted_count_prior(0.95, tpr=0.8, fpr=0.1) == 1.0
    assert adjusted_count_prior(0.5, tpr=0.3, fpr=0.3) is None
    assert adjusted_count_prior(0.5, tpr=float("nan"), fpr=0.3) is None


def test_estimate_prior_reads_the_adjusted_count_at_the_primary_threshold() -> None:
    rng = np.random.default_rng(6)
    hist = STREAM.window(rng, n=100_000, prior=0.1)
    ref = MixtureReference.from_histograms(hist)
    u = _unlabelled(rng, 20_000, 0.05)
    est = estimate_prior(ref, u, threshold=0.5)
    at = EDGES[:-1] >= 0.5
    tpr = hist.positives[at].sum() / hist.n_positives
    fpr = hist.negatives[at].sum() / hist.n_negatives
    assert est.bbse == pytest.approx((u[at].sum() / u.sum() - fpr) / (tpr - fpr), rel=1e-12)
    assert est.bbse == pytest.approx(0.05, abs=0.02)
    assert est.value == pytest.approx(0.05, abs=0.015)
    assert est.lower < 0.05 < est.upper


# --- verdict -------------------------------------------------------------------------


def test_verdicts_none_prior_likelihood() -> None:
    rng = np.random.default_rng(7)
    ref = _reference(rng, n=200_000)
    settings = DriftSettings(alpha=0.01)
    same = estimate_prior(ref, _unlabelled(rng, 10_000, 0.1), threshold=0.5, settings=settings)
    assert (same.verdict, same.reliable, same.status) == ("none", True, "ok")
    assert same.p_value is not None and same.p_value > 0.01
    assert same.fit.df == 18 and same.fit.p_value is not None and same.fit.p_value > 0.01
    shifted = estimate_prior(ref, _unlabelled(rng, 10_000, 0.03), threshold=0.5, settings=settings)
    assert (shifted.verdict, shifted.reliable) == ("prior", True)
    assert shifted.p_value is not None and shifted.p_value < 1e-6
    ignored = DriftSettings(alpha=0.01, min_prior_effect=0.1)
    small = estimate_prior(ref, _unlabelled(rng, 10_000, 0.03), threshold=0.5, settings=ignored)
    assert small.verdict == "none"
    moved = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-1.0)
    w = moved.window(rng, n=10_000, prior=0.1)
    broken = estimate_prior(ref, w.positives + w.negatives, threshold=0.5, settings=settings)
    assert (broken.verdict, broken.reliable) == ("likelihood", False)
    assert broken.unreliable_reason == "likelihood_shift"


def test_the_specification_test_sees_the_frauds_scores_sink() -> None:
    """The demo's degradation (frauds' mean logit 0.5 -> -1.5, prior unchanged): the mixture
    still fits (fit p 0.98), but pi_hat (0.006) and the adjusted counts (0.0014 at 0.5)
    disagree far beyond their joint sampling error; one degree of freedom per threshold."""
    edges = default_bin_edges((0.5, 0.3))
    demo = BinormalStream(edges, 0.5, -3.5, 1.2, 1.2)
    rng = np.random.default_rng(1)
    ref = MixtureReference.from_histograms(demo.window(rng, n=400_000, prior=0.01))
    w = BinormalStream(edges, -1.5, -3.5, 1.2, 1.2).window(rng, n=100_000, prior=0.01)
    settings = DriftSettings(alpha=0.01)
    u = w.positives + w.negatives
    est = estimate_prior(ref, u, threshold=0.5, thresholds=(0.5, 0.3), settings=settings)
    assert est.fit.p_value is not None and est.fit.p_value > 0.5
    assert est.specification.df == 2
    assert est.specification.p_value is not None and est.specification.p_value < 1e-6
    assert (est.verdict, est.unreliable_reason) == ("likelihood", "likelihood_shift")
    assert est.bbse is not None and est.value > 3 * est.bbse
    healthy = demo.window(rng, n=100_000, prior=0.01)
    same = estimate_prior(
        ref, healthy.positives + healthy.negatives, threshold=0.5, thresholds=(0.5, 0.3)
    )
    assert same.specification.p_value is not None and same.specification.p_value > 0.01
    # a threshold below every score separates nothing: no test
    nothing = estimate_prior(ref, u, threshold=0.0, settings=settings)
    assert nothing.specification == SpecificationTest(None, 0, None)
    doc = estimate_window(ref, u, thresholds=(0.5, 0.3)).to_document()["fit"]
    assert doc["specification_p_value"] == est.specification.p_value
    assert doc["specification_df"] == 2


def test_too_little_data_is_not_tested() -> None:
    rng = np.random.default_rng(8)
    ref = _reference(rng)
    est = estimate_prior(ref, _unlabelled(rng, 20, 0.1), threshold=0.5)
    assert (est.status, est.verdict, est.reliable) == ("insufficient_data", "none", False)
    assert est.unreliable_reason == "insufficient_data"
    assert est.p_value is None and est.fit.p_value is None and est.fit.statistic is None
    assert 0.0 <= est.lower <= est.value <= est.upper <= 1.0
    small_ref = MixtureReference.from_histograms(STREAM.window(rng, n=200, prior=0.1))
    assert estimate_prior(small_ref, _unlabelled(rng, 5_000, 0.1), threshold=0.5).status == (
        "insufficient_data"
    )


def test_a_reference_filling_two_groups_has_no_fit_test() -> None:
    edges = np.array([0.0, 0.5, 1.0])
    ref = MixtureReference.from_histograms(WindowHistograms([40, 160], [160, 40], edges))
    est = estimate_prior(ref, [100, 100], threshold=0.5, settings=DriftSettings(alpha=0.01))
    assert ref.n_groups == 2
    assert est.fit.df == 0 and est.fit.p_value is None
    assert (est.reliable, est.unreliable_reason) == (False, "too_few_groups")
    assert est.value == pytest.approx(0.5, abs=1e-9)  # (0.5 f1 + 0.5 f0) is uniform

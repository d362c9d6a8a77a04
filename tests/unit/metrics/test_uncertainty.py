"""Credible and bootstrap intervals (app/metrics/uncertainty.py).

Checks: exact Bayesian coverage (truth drawn from the prior), frequentist
coverage at a fixed truth, the exact Beta quantiles of recall, Brodersen's
convolution for balanced accuracy, an example-level bootstrap with
scikit-learn, and the interval properties (contains the point estimate,
narrows with more data, deterministic for a seed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, optimize, stats
from sklearn.metrics import roc_auc_score

from app.errors import InvalidInput
from app.metrics.binning import default_bin_edges, histogram_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import (
    cumulative_counts_from_histograms,
    roc_auc_from_counts,
)
from app.metrics.labeling import LABELING_METRICS
from app.metrics.ops import outperformance_score
from app.metrics.uncertainty import (
    CURVE_AREAS,
    bootstrap_interval,
    bootstrap_intervals,
    credible_interval,
    credible_intervals,
    ops_interval,
    rate_interval,
    row_quantiles,
    sample_rate_posterior,
)

COUNTS = ConfusionCounts(tp=40.0, fp=25.0, fn=10.0, tn=425.0)


def _point(counts: ConfusionCounts, metric: str, prior: float | None = None) -> float:
    c = counts if prior is None else counts.at_prior(prior)
    return float(LABELING_METRICS[metric].func(c.tp, c.fp, c.fn, c.tn))


def _covered(interval: tuple[float, float], truth: float) -> bool:
    return interval[0] <= truth <= interval[1]


# ---------------------------------------------------------------- credible intervals


def test_exact_bayesian_coverage_when_truth_is_drawn_from_the_prior() -> None:
    # pi, alpha, 1 − beta ~ U(0, 1) (the uniform prior, prior_count=1) and the
    # window drawn binomially from them: the posterior interval then covers
    # M(pi, alpha, beta) with probability `level`, for every metric, raw and
    # calibrated (a little more: the boundary rule only widens).
    rng = np.random.default_rng(101)
    total, replications, pi0 = 200, 400, 0.3
    metrics = ["recall", "precision", "f1", "mcc", "balanced_accuracy"]
    hits = dict.fromkeys([*metrics, "calibrated_f1"], 0)
    for _ in range(replications):
        pi, alpha, tpr = rng.random(3)
        p = rng.binomial(total, pi)
        n = total - p
        tp, fp = rng.binomial(p, tpr), rng.binomial(n, alpha)
        counts = ConfusionCounts(tp, fp, p - tp, n - fp)
        truth = ConfusionCounts.from_rates(pi, alpha, 1 - tpr)
        ci = credible_intervals(counts, metrics, rng=rng, n_samples=2000, prior_count=1.0)
        for m in metrics:
            f = LABELING_METRICS[m].func
            hits[m] += _covered(ci[m], float(f(truth.tp, truth.fp, truth.fn, truth.tn)))
        at_pi0 = ConfusionCounts.from_rates(pi0, alpha, 1 - tpr)
        hits["calibrated_f1"] += _covered(
            credible_interval(counts, "f1", pi0=pi0, rng=rng, n_samples=2000, prior_count=1.0),
            float(LABELING_METRICS["f1"].func(at_pi0.tp, at_pi0.fp, at_pi0.fn, at_pi0.tn)),
        )
    tolerance = 4 * math.sqrt(0.95 * 0.05 / replications)  # 0.044
    for name, h in hits.items():
        assert abs(h / replications - 0.95) < tolerance, (name, h / replications)


def test_bayesian_coverage_of_the_jeffreys_rule_when_truth_is_uniform() -> None:
    # the interval rule (Jeffreys prior) is not the truth's prior here: still nominal
    rng = np.random.default_rng(7)
    n, replications = 150, 400
    hits = 0
    for _ in range(replications):
        pi, alpha, tpr = rng.random(3)
        p = rng.binomial(n, pi)
        tp, fp = rng.binomial(p, tpr), rng.binomial(n - p, alpha)
        counts = ConfusionCounts(tp, fp, p - tp, n - p - fp)
        truth = ConfusionCounts.from_rates(pi, alpha, 1 - tpr)
        ci = credible_interval(counts, "precision", rng=rng, n_samples=2000)
        hits += _covered(ci, truth.tp / (truth.tp + truth.fp))
    assert abs(hits / replications - 0.95) < 4 * math.sqrt(0.95 * 0.05 / replications)


def test_frequentist_coverage_at_a_fixed_truth_is_close_to_nominal() -> None:
    rng = np.random.default_rng(2010)
    p, n, alpha, tpr, replications = 50, 200, 0.2, 0.7, 400
    truth = (tpr + 1 - alpha) / 2
    hits = 0
    for _ in range(replications):
        tp, fp = rng.binomial(p, tpr), rng.binomial(n, alpha)
        counts = ConfusionCounts(tp, fp, p - tp, n - fp)
        hits += _covered(
            credible_interval(counts, "balanced_accuracy", rng=rng, n_samples=2000), truth
        )
    assert 0.91 <= hits / replications <= 0.99


def test_recall_interval_is_the_exact_jeffreys_quantile_range() -> None:
    low, high = credible_interval(COUNTS, "recall", rng=np.random.default_rng(1), n_samples=200_000)
    exact = stats.beta(COUNTS.tp + 0.5, COUNTS.fn + 0.5).ppf([0.025, 0.975])
    assert (low, high) == pytest.approx(rate_interval(COUNTS.tp, COUNTS.positives), abs=2e-3)
    assert low == pytest.approx(exact[0], abs=2e-3)
    assert high == pytest.approx(exact[1], abs=2e-3)


@pytest.mark.slow
def test_balanced_accuracy_interval_matches_brodersens_convolution() -> None:
    # Brodersen et al.: the posterior of BA = (TPR + TNR)/2 is the convolution of
    # Beta(TP+a, FN+a) and Beta(TN+a, FP+a) (a = 1/2 here); its CDF by numerical integration.
    tpr = stats.beta(COUNTS.tp + 0.5, COUNTS.fn + 0.5)
    tnr = stats.beta(COUNTS.tn + 0.5, COUNTS.fp + 0.5)

    def cdf(x: float) -> float:
        value, _ = integrate.quad(lambda t: tpr.cdf(2 * x - t) * tnr.pdf(t), 0.0, 1.0, limit=200)
        return float(value)

    exact = [optimize.brentq(lambda x, q=q: cdf(x) - q, 0.3, 1.0) for q in (0.025, 0.975)]
    low, high = credible_interval(
        COUNTS, "balanced_accuracy", rng=np.random.default_rng(3), n_samples=200_000
    )
    assert low == pytest.approx(exact[0], abs=2e-3)
    assert high == pytest.approx(exact[1], abs=2e-3)


@pytest.mark.parametrize("metric", ["recall", "precision", "f1", "mcc", "accuracy", "cba", "lift"])
@pytest.mark.parametrize("pi0", [None, 0.5])
def test_interval_contains_the_point_estimate(metric: str, pi0: float | None) -> None:
    low, high = credible_interval(COUNTS, metric, pi0=pi0, rng=np.random.default_rng(0))
    assert low < _point(COUNTS, metric, pi0) < high


@pytest.mark.parametrize("metric", ["recall", "f1", "mcc"])
def test_interval_narrows_with_more_data(metric: str) -> None:
    big = ConfusionCounts(COUNTS.tp * 10, COUNTS.fp * 10, COUNTS.fn * 10, COUNTS.tn * 10)
    small_ci = credible_interval(COUNTS, metric, rng=np.random.default_rng(0))
    big_ci = credible_interval(big, metric, rng=np.random.default_rng(0))
    ratio = (big_ci[1] - big_ci[0]) / (small_ci[1] - small_ci[0])
    assert 0.2 < ratio < 0.45  # about 1/sqrt(10) = 0.32


def test_intervals_are_deterministic_for_a_seed() -> None:
    def run(seed: int) -> dict[str, tuple[float, float]]:
        return credible_intervals(COUNTS, ["f1", "mcc"], pi0=0.2, rng=np.random.default_rng(seed))

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_prior_sampling_widens_only_prior_dependent_metrics() -> None:
    # the prior fixed at the data's P/n is the metric at pi0 = P/n
    fixed = credible_intervals(
        COUNTS, ["recall", "precision"], pi0=COUNTS.prior, rng=np.random.default_rng(9)
    )
    sampled = credible_intervals(COUNTS, ["recall", "precision"], rng=np.random.default_rng(9))
    assert sampled["recall"] == pytest.approx(fixed["recall"], abs=1e-12)  # same rate draws
    width = {k: v[1] - v[0] for k, v in fixed.items()}
    sampled_width = {k: v[1] - v[0] for k, v in sampled.items()}
    assert sampled_width["precision"] > width["precision"]


@pytest.mark.parametrize("a", [1.0, 0.5])  # the specification's uniform prior, Jeffreys
def test_posterior_draws_have_the_beta_moments(a: float) -> None:
    post = sample_rate_posterior(
        COUNTS, rng=np.random.default_rng(4), n_samples=100_000, prior_count=a
    )
    assert post.alpha.mean() == pytest.approx(
        (COUNTS.fp + a) / (COUNTS.negatives + 2 * a), rel=5e-3
    )
    assert (1 - post.beta).mean() == pytest.approx(
        (COUNTS.tp + a) / (COUNTS.positives + 2 * a), rel=5e-3
    )
    expected = (COUNTS.positives + a) / (COUNTS.n + 2 * a)
    assert post.prior.mean() == pytest.approx(expected, rel=5e-3)
    fixed = sample_rate_posterior(COUNTS, rng=np.random.default_rng(4), pi0=0.3, prior_count=a)
    assert np.all(fixed.prior == 0.3)


def test_undefined_metric_gives_a_nan_interval() -> None:
    empty = ConfusionCounts(0.0, 0.0, 0.0, 0.0)
    low, high = credible_interval(empty, "f1", rng=np.random.default_rng(0))
    assert math.isnan(low) and math.isnan(high)
    # with pi0 every rate is still defined by its (flat) posterior
    low, high = credible_interval(empty, "f1", pi0=0.5, rng=np.random.default_rng(0))
    assert 0.0 <= low < high <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"metric": "nope"}, "metric"),
        ({"level": 1.0}, "level"),
        ({"level": 0.0}, "level"),
        ({"n_samples": 10}, "n_samples"),
        ({"n_samples": 1000.0}, "n_samples"),
        ({"pi0": 1.5}, "pi0"),
        ({"prior_count": 0.0}, "prior_count"),
        ({"rng": 42}, "rng"),
        ({"counts": (1, 2, 3, 4)}, "counts"),
        ({"counts": ConfusionCounts(-1.0, 2.0, 3.0, 4.0)}, "tp"),
    ],
)
def test_credible_interval_rejects_bad_input(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {
        "counts": COUNTS,
        "metric": "f1",
        "rng": np.random.default_rng(0),
        **kwargs,
    }
    with pytest.raises(InvalidInput) as err:
        credible_interval(**args)  # type: ignore[arg-type]
    assert err.value.field == field


# ---------------------------------------------------------------- OPS intervals


def test_ops_interval_maps_the_ends_and_keeps_the_point_inside() -> None:
    prior = COUNTS.prior
    ci = credible_interval(COUNTS, "f1", rng=np.random.default_rng(0))
    low, high = ops_interval("f1", ci, prior)
    assert low == pytest.approx(outperformance_score("f1", ci[0], prior))
    assert high == pytest.approx(outperformance_score("f1", ci[1], prior))
    assert low <= outperformance_score("f1", _point(COUNTS, "f1"), prior) <= high


def test_ops_interval_of_a_lower_is_better_metric_is_reordered() -> None:
    prior = COUNTS.prior
    ci = credible_interval(COUNTS, "error_rate", rng=np.random.default_rng(0))
    low, high = ops_interval("error_rate", ci, prior)
    assert low < high
    assert low == pytest.approx(outperformance_score("error_rate", ci[1], prior))


def test_ops_interval_of_undefined_interval_is_undefined() -> None:
    low, high = ops_interval("f1", (math.nan, math.nan), 0.2)
    assert math.isnan(low) and math.isnan(high)


# ---------------------------------------------------------------- bootstrap intervals


def _binormal_histograms(
    rng: np.random.Generator, p: int, n: int, separation: float, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    labels = np.r_[np.ones(p, dtype=int), np.zeros(n, dtype=int)]
    logits = rng.normal(np.where(labels == 1, separation, 0.0), 1.0)
    return histogram_counts(1.0 / (1.0 + np.exp(-logits)), labels, edges)


EDGES = default_bin_edges()


@pytest.mark.slow
def test_bootstrap_auc_interval_covers_the_true_auc() -> None:
    # binormal scores: true ROC-AUC = Phi(d / sqrt(2)) whatever the monotone map
    rng = np.random.default_rng(77)
    d, replications = 1.2, 150
    truth = float(stats.norm.cdf(d / math.sqrt(2)))
    hits = 0
    for _ in range(replications):
        pos, neg = _binormal_histograms(rng, 100, 300, d, EDGES)
        hits += _covered(bootstrap_interval(pos, neg, "auc_roc", rng=rng, n_resamples=200), truth)
    assert 0.88 <= hits / replications <= 0.99


@pytest.mark.slow
def test_bootstrap_width_matches_an_example_level_bootstrap() -> None:
    rng = np.random.default_rng(12)
    labels = np.r_[np.ones(150, dtype=int), np.zeros(450, dtype=int)]
    scores = 1.0 / (1.0 + np.exp(-rng.normal(np.where(labels == 1, 1.0, 0.0), 1.0)))
    pos, neg = histogram_counts(scores, labels, EDGES)
    ours = bootstrap_interval(pos, neg, "auc_roc", rng=rng, n_resamples=2000)
    # stratified resampling of the examples themselves, scored by scikit-learn
    ip, ineg = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    aucs = []
    for _ in range(400):
        idx = np.r_[rng.choice(ip, ip.size), rng.choice(ineg, ineg.size)]
        aucs.append(roc_auc_score(labels[idx], scores[idx]))
    theirs = np.quantile(aucs, [0.025, 0.975])
    assert ours[0] == pytest.approx(theirs[0], abs=0.012)
    assert ours[1] == pytest.approx(theirs[1], abs=0.012)


@pytest.mark.parametrize("method", ["multinomial", "poisson"])
def test_bootstrap_intervals_contain_the_point_estimates(method: str) -> None:
    pos, neg = _binormal_histograms(np.random.default_rng(1), 80, 920, 1.5, EDGES)
    curve = cumulative_counts_from_histograms(pos, neg, EDGES)
    calibrated = ["calibrated_auc_pr", "calibrated_auc_lift", "calibrated_auc_roc"]
    names = [*CURVE_AREAS, *calibrated]
    ci = bootstrap_intervals(
        pos,
        neg,
        names,
        pi0=0.5,
        rng=np.random.default_rng(2),
        method=method,  # type: ignore[arg-type]
    )
    for name in CURVE_AREAS:
        point = float(CURVE_AREAS[name](curve.tps, curve.fps))
        assert ci[name][0] < point < ci[name][1], name
    for name in calibrated:  # the areas of the curve at pi0
        point = float(CURVE_AREAS[name.removeprefix("calibrated_")](*curve.counts_at_prior(0.5)))
        assert ci[name][0] < point < ci[name][1], name
    assert ci["calibrated_auc_pr"][0] > ci["auc_pr"][1]  # balanced classes: a higher AUC-PR
    assert ci["calibrated_auc_roc"] == pytest.approx(ci["auc_roc"], abs=1e-12)  # prior-free


def test_bootstrap_interval_narrows_with_more_data_and_is_deterministic() -> None:
    pos, neg = _binormal_histograms(np.random.default_rng(4), 60, 240, 1.0, EDGES)
    small = bootstrap_interval(pos, neg, "auc_roc", rng=np.random.default_rng(0))
    big = bootstrap_interval(pos * 16, neg * 16, "auc_roc", rng=np.random.default_rng(0))
    assert 0.15 < (big[1] - big[0]) / (small[1] - small[0]) < 0.35  # about 1/4
    assert small == bootstrap_interval(pos, neg, "auc_roc", rng=np.random.default_rng(0))


def test_bootstrap_chunks_give_the_same_areas_as_one_curve() -> None:
    # one resample of the observed counts with zero variance: identical bins
    pos = np.array([0, 0, 3, 0, 5, 7])
    neg = np.array([9, 4, 2, 0, 1, 0])
    curve = cumulative_counts_from_histograms(pos, neg, np.linspace(0.0, 1.0, 7))
    exact = float(roc_auc_from_counts(curve.tps, curve.fps))
    low, high = bootstrap_interval(pos * 1000, neg * 1000, "auc_roc", rng=np.random.default_rng(0))
    assert low < exact < high
    assert high - low < 0.01


def test_bootstrap_undefined_area_is_nan() -> None:
    pos, neg = np.zeros(5), np.array([1, 2, 3, 4, 5])
    low, high = bootstrap_interval(pos, neg, "auc_roc", rng=np.random.default_rng(0))
    assert math.isnan(low) and math.isnan(high)
    low, high = bootstrap_interval(np.zeros(3), np.zeros(3), "auc_pr", rng=np.random.default_rng(0))
    assert math.isnan(low) and math.isnan(high)
    low, high = bootstrap_interval(
        pos, neg, "calibrated_auc_pr", pi0=0.3, method="poisson", rng=np.random.default_rng(0)
    )
    assert math.isnan(low) and math.isnan(high)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"positives": [1, -2, 3]}, "positives"),
        ({"negatives": [1, 2]}, "negatives"),
        ({"positives": [[1, 2, 3]], "negatives": [[1, 2, 3]]}, "positives"),
        ({"area": "f1"}, "area"),
        ({"method": "jackknife"}, "method"),
        ({"positives": [1.5, 2, 3]}, "method"),
        ({"n_resamples": 50}, "n_resamples"),
        ({"level": 1.2}, "level"),
        ({"pi0": 0.0}, "pi0"),
        ({"area": "calibrated_auc_pr"}, "pi0"),
        ({"area": "calibrated_f1", "pi0": 0.5}, "area"),
        ({"rng": None}, "rng"),
    ],
)
def test_bootstrap_rejects_bad_input(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {
        "positives": [1, 2, 3],
        "negatives": [3, 2, 1],
        "area": "auc_roc",
        "rng": np.random.default_rng(0),
        **kwargs,
    }
    with pytest.raises(InvalidInput) as err:
        bootstrap_interval(**args)  # type: ignore[arg-type]
    assert err.value.field == field


def test_rate_interval_of_impossible_counts_is_undefined() -> None:
    for x, n in [(0, 0), (5, 3), (-1, 3)]:
        low, high = rate_interval(x, n)
        assert math.isnan(low) and math.isnan(high)
    assert rate_interval(30, 30)[1] == 1.0 and rate_interval(29, 30)[1] == 1.0


@pytest.mark.parametrize(
    ("counts", "pi0"),
    [
        (COUNTS, None),
        (COUNTS, 0.01),
        (ConfusionCounts(1.0, 0.0, 30.0, 2.0), None),  # boundaries: FP, TP, N near 0
        (ConfusionCounts(0.0, 0.0, 3.0, 0.0), None),  # undefined metrics, n <= 2 sides
        (ConfusionCounts(0.0, 0.0, 0.0, 0.0), None),  # empty: every raw metric undefined
    ],
)
def test_intervals_of_several_metrics_are_those_of_one_call_per_metric(
    counts: ConfusionCounts, pi0: float | None
) -> None:
    posterior = sample_rate_posterior(counts, rng=np.random.default_rng(4), n_samples=500, pi0=pi0)
    together = posterior.intervals(LABELING_METRICS, 0.9)
    alone = {name: posterior.interval(name, 0.9) for name in LABELING_METRICS}
    assert together.keys() == alone.keys()
    for name, (low, high) in alone.items():
        assert together[name] == pytest.approx((low, high), rel=0.0, abs=0.0, nan_ok=True), name
    with pytest.raises(InvalidInput):
        posterior.intervals(["f1", "nope"])


def test_bootstrap_areas_alone_equal_the_areas_drawn_together() -> None:
    pos = np.array([0.0, 1, 2, 5, 12, 30, 0, 9])
    neg = np.array([40.0, 25, 10, 4, 1, 1, 0, 0])
    names = ["gini", "calibrated_gini", "auc_roc", "ks", "calibrated_auc_pr", "nauc_lift"]
    options = {"pi0": 0.1, "n_resamples": 200, "method": "poisson"}
    together = bootstrap_intervals(pos, neg, names, rng=np.random.default_rng(9), **options)
    for name in names:
        alone = bootstrap_interval(pos, neg, name, rng=np.random.default_rng(9), **options)
        assert together[name] == alone, name
    twice = bootstrap_intervals(pos, neg, ["gini", "gini"], rng=np.random.default_rng(9), **options)
    assert twice == {"gini": together["gini"]}


def test_a_few_undefined_draws_are_left_out_of_the_interval() -> None:
    from app.metrics.uncertainty import RatePosterior

    rng = np.random.default_rng(6)
    prior = rng.beta(20.0, 80.0, size=1000)
    prior[:30] = np.nan  # 3% of the draws undefined: fewer than 1 - level
    posterior = RatePosterior(
        prior=prior, alpha=rng.beta(5.0, 95.0, 1000), beta=rng.beta(3.0, 17.0, 1000)
    )
    samples = posterior.metric_samples("precision")
    assert np.isnan(samples[:30]).all() and np.isfinite(samples[30:]).all()
    tails = [(1.0 - 0.95) / 2.0, (1.0 + 0.95) / 2.0]
    expected = tuple(float(q) for q in np.quantile(samples[30:], tails))
    assert posterior.intervals(["precision", "recall"])["precision"] == expected
    prior[:100] = np.nan  # 10%: too many
    assert all(math.isnan(x) for x in posterior.interval("precision"))


@pytest.mark.parametrize("seed", range(40))
def test_row_quantiles_equal_numpys_linear_quantiles_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 16)), int(rng.integers(1, 4_001))
    rows = rng.beta(rng.uniform(0.2, 40.0), rng.uniform(0.2, 40.0), size=(m, n))
    if seed % 4 == 0:
        rows = np.round(rows, 2)  # ties
    probs = [0.0, 0.025, 0.5, 0.975, 1.0, *rng.uniform(0.0, 1.0, size=3).tolist()]
    got = row_quantiles(rows, probs)
    assert got.shape == (len(probs), m)
    assert np.array_equal(got, np.quantile(rows, probs, axis=1))
    assert np.array_equal(got[0], rows.min(axis=1)) and np.array_equal(got[4], rows.max(axis=1))

"""Attribution of AUC-PR, precision and F1 changes to prior and likelihood."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from sklearn.metrics import average_precision_score, f1_score, precision_score

from app.drift.attribution import attribute_changes
from app.drift.histograms import WindowHistograms
from app.drift.settings import DriftSettings
from app.drift.simulation import BinormalStream
from app.errors import InvalidInput
from app.metrics.binning import default_bin_edges

EDGES = default_bin_edges((0.5,), n_bins=2_000)
STREAM = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-2.5)
SETTINGS = DriftSettings()


def _samples(
    h: WindowHistograms,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """One example per count, its score the bin's lower edge (exact at every edge)."""
    lower = h.edges[:-1]
    scores = np.concatenate(
        [np.repeat(lower, h.positives.astype(int)), np.repeat(lower, h.negatives.astype(int))]
    )
    labels = np.concatenate(
        [np.ones(int(h.n_positives), np.int64), np.zeros(int(h.n_negatives), np.int64)]
    )
    return scores, labels


def _raw_metrics(
    h: WindowHistograms, weights: tuple[float, float] = (1.0, 1.0)
) -> dict[str, float]:
    """scikit-learn's metrics of the expanded examples, positives/negatives weighted."""
    s, y = _samples(h)
    w = np.where(y == 1, weights[0], weights[1])
    pred = (s >= 0.5).astype(int)
    return {
        "auc_pr": average_precision_score(y, s, sample_weight=w),
        "precision": precision_score(y, pred, sample_weight=w),
        "f1": f1_score(y, pred, sample_weight=w),
    }


@pytest.fixture(scope="module")
def pair() -> tuple[WindowHistograms, WindowHistograms]:
    rng = np.random.default_rng(2024)
    reference = STREAM.window(rng, n=50_000, prior=0.10)
    moved = BinormalStream(EDGES, mu_positive=-0.4, mu_negative=-2.3)
    return reference, moved.window(rng, n=10_000, prior=0.03)


def test_parts_sum_to_the_total_and_total_is_the_raw_change(
    pair: tuple[WindowHistograms, WindowHistograms],
) -> None:
    reference, window = pair
    result = attribute_changes(reference, window, threshold=0.5, settings=SETTINGS)
    assert list(result) == ["auc_pr", "precision", "f1"]
    for a in result.values():
        assert a.status == "ok"
        assert a.total == a.prior + a.likelihood  # exactly, as reported
        assert a.total == pytest.approx(a.window - a.reference, abs=1e-14)


def test_end_points_are_the_raw_metrics_of_reference_and_window(
    pair: tuple[WindowHistograms, WindowHistograms],
) -> None:
    reference, window = pair
    result = attribute_changes(reference, window, threshold=0.5, settings=SETTINGS)
    raw_r, raw_w = _raw_metrics(reference), _raw_metrics(window)
    for name, a in result.items():
        assert a.reference == pytest.approx(raw_r[name], abs=1e-12)
        assert a.window == pytest.approx(raw_w[name], abs=1e-12)


def test_reference_at_window_prior_equals_reweighted_reference_examples(
    pair: tuple[WindowHistograms, WindowHistograms],
) -> None:
    """M(L_r, pi_w): the reference's examples reweighted to the window's class mix."""
    reference, window = pair
    pi_r, pi_w = reference.prior, window.prior
    weights = (pi_w / pi_r, (1 - pi_w) / (1 - pi_r))
    expected = _raw_metrics(reference, weights)
    result = attribute_changes(reference, window, threshold=0.5, settings=SETTINGS)
    for name, a in result.items():
        assert a.reference_at_window_prior == pytest.approx(expected[name], abs=1e-12)


def test_pure_prior_change_at_population_level_is_all_prior() -> None:
    """Same per-class distributions, only the mix differs: the likelihood part is exactly 0."""
    base_pos = np.round(STREAM.p_positive * 1e9)
    base_neg = np.round(STREAM.p_negative * 1e9)
    reference = WindowHistograms(base_pos, 9 * base_neg, EDGES)  # pi = 0.10
    window = WindowHistograms(base_pos, 49 * base_neg, EDGES)  # pi = 0.02
    result = attribute_changes(reference, window, threshold=0.5, settings=SETTINGS)
    for a in result.values():
        assert a.likelihood == 0.0
        assert a.prior == a.total
        assert a.prior < -0.05  # every one of these metrics drops when positives get rarer


@pytest.mark.parametrize(("n", "most_share"), [(10_000, 0.25), (100_000, 0.08)])
def test_pure_prior_change_in_samples_is_almost_all_prior(n: int, most_share: float) -> None:
    """In samples the likelihood part is sampling noise, shrinking like 1/sqrt(n)."""
    rng = np.random.default_rng(5)
    likelihood, total = [], []
    for _ in range(30):
        reference = STREAM.window(rng, n=5 * n, prior=0.10)
        window = STREAM.window(rng, n=n, prior=0.02)
        a = attribute_changes(reference, window, threshold=0.5, settings=SETTINGS)["auc_pr"]
        likelihood.append(a.likelihood)
        total.append(a.total)
    assert np.mean(np.abs(likelihood)) < most_share * np.mean(np.abs(total))


def test_pure_likelihood_change_at_the_same_prior_has_no_prior_part() -> None:
    base_pos = np.round(STREAM.p_positive * 1e9)
    base_neg = np.round(STREAM.p_negative * 1e9)
    moved = np.round(BinormalStream(EDGES, -0.5, -2.5).p_positive * 1e9)
    reference = WindowHistograms(base_pos, 9 * base_neg, EDGES)
    window = WindowHistograms(moved, 9 * base_neg, EDGES)  # P differs by rounding only
    assert window.prior == pytest.approx(reference.prior, abs=1e-9)
    result = attribute_changes(reference, window, threshold=0.5, settings=SETTINGS)
    for a in result.values():
        assert abs(a.prior) < 1e-8
        assert a.likelihood < 0.0  # positives scoring lower hurts every one of them


def test_window_short_of_a_class_keeps_only_the_prior_part() -> None:
    rng = np.random.default_rng(9)
    reference = STREAM.window(rng, n=50_000, prior=0.10)
    window = STREAM.window(rng, n=1_000, prior=0.01)  # ~10 positives
    result = attribute_changes(reference, window, threshold=0.5, settings=SETTINGS)
    for a in result.values():
        assert a.status == "insufficient_data"
        assert np.isfinite(a.prior)
        d = a.to_dict()
        assert d["prior"] is not None
        assert d["total"] is None and d["likelihood"] is None and d["window"] is None


def test_thin_reference_gives_nothing() -> None:
    rng = np.random.default_rng(9)
    reference = STREAM.window(rng, n=1_000, prior=0.01)
    window = STREAM.window(rng, n=10_000, prior=0.10)
    result = attribute_changes(reference, window, threshold=0.5, settings=SETTINGS)
    assert all(a.status == "insufficient_data" for a in result.values())
    assert all(v is None for a in result.values() for k, v in a.to_dict().items() if k != "status")


def test_threshold_must_be_an_edge(pair: tuple[WindowHistograms, WindowHistograms]) -> None:
    with pytest.raises(InvalidInput) as err:
        attribute_changes(*pair, threshold=0.4999, settings=SETTINGS)
    assert err.value.field == "threshold"


def test_unknown_labeling_metric_is_refused(
    pair: tuple[WindowHistograms, WindowHistograms],
) -> None:
    with pytest.raises(InvalidInput) as err:
        attribute_changes(*pair, threshold=0.5, settings=SETTINGS, labeling_metrics=("nope",))
    assert err.value.field == "labeling_metrics"


def test_other_labeling_metrics_from_the_registry(
    pair: tuple[WindowHistograms, WindowHistograms],
) -> None:
    result = attribute_changes(
        *pair, threshold=0.5, settings=SETTINGS, labeling_metrics=("mcc", "accuracy")
    )
    assert list(result) == ["auc_pr", "mcc", "accuracy"]
    assert all(a.total == a.prior + a.likelihood for a in result.values())

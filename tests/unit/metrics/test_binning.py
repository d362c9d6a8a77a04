"""Default bin edges, histogram counts, and histogram-vs-raw curve areas."""

from __future__ import annotations

import numpy as np
import pytest

from app.drift.simulation import binormal_scores
from app.errors import InvalidInput
from app.metrics.binning import (
    DEFAULT_N_BINS,
    LOGIT_HIGH,
    LOGIT_LOW,
    check_bin_edges,
    default_bin_edges,
    histogram_counts,
)
from app.metrics.curves import (
    average_precision_from_counts,
    cumulative_counts,
    cumulative_counts_from_histograms,
    roc_auc_from_counts,
)


def test_default_edges_are_uniform_in_logit_with_thresholds_as_exact_edges() -> None:
    thresholds = (0.5, 0.137, 0.9)
    e = default_bin_edges(thresholds)
    assert e[0] == 0.0 and e[-1] == 1.0
    assert np.all(np.diff(e) > 0)
    assert all(t in e for t in thresholds)
    assert e.size - 1 == DEFAULT_N_BINS + len(thresholds)
    inner = np.setdiff1d(e[1:-1], thresholds)
    logits = np.log(inner / (1 - inner))
    assert logits[0] == pytest.approx(LOGIT_LOW) and logits[-1] == pytest.approx(LOGIT_HIGH)
    width = (LOGIT_HIGH - LOGIT_LOW) / (DEFAULT_N_BINS - 2)
    np.testing.assert_allclose(np.diff(logits), width, rtol=1e-6)


def test_a_threshold_that_is_already_an_edge_adds_no_bin() -> None:
    base = default_bin_edges((), n_bins=10)
    assert np.array_equal(default_bin_edges((base[3],), n_bins=10), base)
    assert base.size == 11


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"thresholds": (0.0,)}, "thresholds"),
        ({"thresholds": (1.0,)}, "thresholds"),
        ({"n_bins": 1}, "n_bins"),
        ({"n_bins": 10.0}, "n_bins"),
        ({"n_bins": True}, "n_bins"),
    ],
)
def test_default_edges_reject_bad_arguments(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        default_bin_edges(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def test_histogram_counts_match_numpy_histogram_including_scores_on_edges() -> None:
    rng = np.random.default_rng(0)
    edges = default_bin_edges((0.3, 0.5), n_bins=50)
    s = np.concatenate((rng.random(5000), edges, [0.0, 1.0, 1.0]))  # edges and both ends
    y = rng.random(s.size) < 0.4
    pos, neg = histogram_counts(s, y, edges)
    assert pos.dtype == np.int64 and neg.dtype == np.int64
    np.testing.assert_array_equal(pos, np.histogram(s[y], bins=edges)[0])
    np.testing.assert_array_equal(neg, np.histogram(s[~y], bins=edges)[0])


def test_check_bin_edges_names_the_field() -> None:
    for bad in ([0.0, 0.5], [0.0, 0.5, 0.5, 1.0], [[0.0, 1.0]]):
        with pytest.raises(InvalidInput) as err:
            check_bin_edges(bad)
        assert err.value.field == "edges"


# (n, prior, s, temper): a sample of the grid measured in docs/metrics.md, with its
# hardest cases (narrow score band, prior 0.001 with an over-confident model).
HISTOGRAM_CASES = [
    (1_000_000, 0.001, 3.0, 2.0),
    (200_000, 0.5, 0.5, 0.5),
    (200_000, 0.1, 1.0, 0.5),
    (200_000, 0.01, 2.0, 1.0),
    (200_000, 0.001, 1.0, 1.0),
    (200_000, 0.001, 4.0, 1.0),
    (200_000, 0.1, 4.0, 2.0),
]


@pytest.mark.parametrize(("n", "prior", "s", "temper"), HISTOGRAM_CASES)
def test_default_bin_areas_stay_within_1e3_of_exact(
    n: int, prior: float, s: float, temper: float
) -> None:
    rng = np.random.default_rng([n, int(1e6 * prior), int(10 * s), int(10 * temper)])
    scores, y = binormal_scores(rng, n, prior, s, temper)
    exact = cumulative_counts(scores, y)
    edges = default_bin_edges()
    binned = cumulative_counts_from_histograms(*histogram_counts(scores, y, edges), edges)
    for area in (roc_auc_from_counts, average_precision_from_counts):
        want = float(area(exact.tps, exact.fps))
        got = float(area(binned.tps, binned.fps))
        assert abs(got - want) < 1e-3, (area.__name__, got, want)

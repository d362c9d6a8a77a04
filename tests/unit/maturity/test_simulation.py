"""Simulated label delivery."""

from __future__ import annotations

import numpy as np
import pytest

from app.drift.histograms import WindowHistograms
from app.errors import InvalidInput
from app.maturity.simulation import class_rates, deliver_labels


def test_labels_are_delivered_at_their_rates() -> None:
    full = WindowHistograms([0, 20_000, 20_000], [20_000, 20_000, 0], [0.0, 0.3, 0.6, 1.0])
    w = deliver_labels(np.random.default_rng(0), full, [0.0, 0.5, 0.9], 0.1)
    assert np.array_equal(w.unlabelled, [20_000.0, 40_000.0, 20_000.0])
    # binomial counts: within 5 standard deviations of their means
    np.testing.assert_allclose(w.positives, [0.0, 10_000.0, 18_000.0], atol=5 * 71)
    np.testing.assert_allclose(w.negatives, [2_000.0, 2_000.0, 0.0], atol=5 * 43)


def test_rates_outside_0_1_are_refused() -> None:
    full = WindowHistograms([1, 1], [1, 1], [0.0, 0.5, 1.0])
    with pytest.raises(InvalidInput) as err:
        deliver_labels(np.random.default_rng(0), full, 0.5, [0.2, 1.5])
    assert err.value.field == "negative_rate"


@pytest.mark.parametrize(("prior", "completeness"), [(0.05, 0.1), (0.05, 0.5), (0.2, 0.9)])
def test_class_rates_reach_the_completeness(prior: float, completeness: float) -> None:
    positive, negative = class_rates(prior, completeness)
    assert prior * positive + (1 - prior) * negative == pytest.approx(completeness)
    assert positive == pytest.approx(min(1.0, 3.5 * negative))

"""Closed-form OPS of MCC, precision and accuracy against an independent integration
and the one-dimensional method they replace."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

from app.metrics.confusion import ConfusionCounts
from app.metrics.labeling import LABELING_METRICS
from app.metrics.ops import labeling_outperformance_scores, outperformance_scores
from app.metrics.ops_closed import CLOSED_FORMS
from app.metrics.ops_labeling import worse_areas

PRIORS = (1e-4, 0.003, 0.02, 0.1, 0.37, 0.8, 0.997, 1.0 - 1e-4)
INTEGRATED_PRIORS = PRIORS[1:-1]
"""Priors at which the independent integration resolves the boundary to 1e-6 (at 1e-4 the
worse set of precision is thinner than a node; tests/unit/metrics/test_ops_labeling.py
checks precision and accuracy there against their own closed forms)."""
NODES = 20_000  # midpoint nodes in the false positive rate


def lowest(name: str) -> float:
    return LABELING_METRICS[name].lower


def boundary_integral(name: str, value: float, prior: float) -> float:
    """Independent reference: for each false positive rate y (a midpoint grid), the true
    positive rate below which the registry's metric is worse than ``value``, found by
    bisection on the metric itself (it increases with the true positive rate), and the
    mean of those lengths. The boundary's square-root corners leave about NODES^-1.5."""
    metric = LABELING_METRICS[name]
    y = (np.arange(NODES) + 0.5) / NODES
    lo, hi = np.zeros(NODES), np.ones(NODES)

    def worse(x: np.ndarray) -> np.ndarray:
        c = ConfusionCounts.from_rates(prior, cast(float, y), cast(float, 1.0 - x))
        return cast(np.ndarray, metric.func(c.tp, c.fp, c.fn, c.tn) < value)

    below_top = worse(np.full(NODES, 1.0 - 1e-15))
    for _ in range(45):
        mid = 0.5 * (lo + hi)
        is_worse = worse(mid)
        lo, hi = np.where(is_worse, mid, lo), np.where(is_worse, hi, mid)
    return float(np.mean(np.where(below_top, 1.0, lo)))


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
@pytest.mark.parametrize("prior", INTEGRATED_PRIORS)
def test_closed_forms_match_an_independent_integration(name: str, prior: float) -> None:
    ops = CLOSED_FORMS[name]
    for value in np.linspace(lowest(name), 1.0, 9):
        assert ops(value, prior) == pytest.approx(
            boundary_integral(name, value, prior), abs=1e-6
        ), (value, prior)


def test_mcc_closed_form_reproduces_the_papers_example() -> None:
    # The authors' O_MCC(0.4, pi=0.1), from their 200-step numerical integration.
    assert CLOSED_FORMS["mcc"](0.4, 0.1) == pytest.approx(0.8949958133257554, abs=1e-5)


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_closed_forms_agree_with_the_one_dimensional_method(name: str) -> None:
    """The stored ``ops_*`` of these metrics move by at most the error of the method they
    replace (documented below 1e-4)."""
    values = np.linspace(lowest(name), 1.0, 101)
    for prior in PRIORS:
        old = worse_areas(LABELING_METRICS[name], values, [prior] * values.size)
        new = np.array([CLOSED_FORMS[name](v, prior) for v in values])
        assert np.max(np.abs(new - old)) < 5e-5, prior


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_closed_forms_are_monotone_percentiles(name: str) -> None:
    rng = np.random.default_rng(7)
    for prior in rng.uniform(0.001, 0.999, 20):
        ops = [CLOSED_FORMS[name](v, prior) for v in np.linspace(lowest(name), 1.0, 201)]
        assert ops[0] == pytest.approx(0.0, abs=1e-12)
        assert ops[-1] == pytest.approx(1.0, abs=1e-12)
        assert np.all(np.diff(ops) >= -1e-12)


def test_the_public_entry_points_use_the_closed_forms() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        prior = float(rng.uniform(0.01, 0.99))
        values = {"mcc": float(rng.uniform(-1, 1)), "precision": float(rng.uniform())}
        values["accuracy"] = float(rng.uniform())
        together = labeling_outperformance_scores(values, prior)
        for name, value in values.items():
            exact = CLOSED_FORMS[name](value, prior)
            assert together[name] == exact
            assert outperformance_scores(name, [value], [prior]) == [exact]

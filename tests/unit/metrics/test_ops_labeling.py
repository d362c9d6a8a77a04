"""OPS of labeling metrics against closed forms, brute-force grids and published values."""

from __future__ import annotations

import functools
import math
from typing import cast

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.errors import InvalidInput
from app.metrics.confusion import ConfusionCounts
from app.metrics.labeling import LABELING_METRICS
from app.metrics.ops import outperformance_score
from app.metrics.ops_labeling import f1_ops, labeling_ops, worse_area

GRID = 1000  # brute-force reference: 1e6 cells, accurate to about 1/GRID along the boundary
GRID_TOLERANCE = 1e-3
PRIORS = (1e-4, 0.001, 0.02, 0.1, 0.5, 0.9, 0.999, 1.0 - 1e-4)
MUS = tuple(float(m) for m in np.linspace(0.0, 1.0, 21))


@functools.lru_cache(maxsize=8)
def metric_grid(name: str, prior: float, n: int) -> np.ndarray:
    """M(prior, a, b) on the n x n midpoint grid, rows b, columns a (cached, read-only)."""
    g = (np.arange(n) + 0.5) / n
    a, b = np.meshgrid(g, g)
    c = ConfusionCounts.from_rates(prior, cast(float, a), cast(float, b))
    v = LABELING_METRICS[name].func(c.tp, c.fp, c.fn, c.tn)
    v.flags.writeable = False
    return v


def grid_ops(name: str, value: float, prior: float, n: int = GRID) -> float:
    """Brute force: the fraction of grid cells whose centre is worse than ``value``."""
    v = metric_grid(name, prior, n)
    worse = v < value if LABELING_METRICS[name].greater_is_better else v > value
    return float(np.mean(worse))


# ----------------------------------------------------------- independent closed forms
def precision_closed(mu: float, pi: float) -> float:
    """precision < mu  <=>  a > k (1 - b) with k = pi (1 - mu) / (mu (1 - pi))."""
    if mu <= 0.0:
        return 0.0
    k = pi * (1.0 - mu) / (mu * (1.0 - pi))
    return 1.0 - k / 2.0 if k <= 1.0 else 1.0 / (2.0 * k)


def accuracy_closed(mu: float, pi: float) -> float:
    """accuracy < mu  <=>  (1 - pi) A + pi B > 1 - mu; CDF of a sum of two scaled uniforms."""
    p, q, c = max(pi, 1.0 - pi), min(pi, 1.0 - pi), 1.0 - mu
    if c <= 0.0:
        cdf = 0.0
    elif c <= q:
        cdf = c * c / (2.0 * p * q)
    elif c <= p:
        cdf = (c - q / 2.0) / p
    elif c < 1.0:
        cdf = 1.0 - (1.0 - c) ** 2 / (2.0 * p * q)
    else:
        cdf = 1.0
    return 1.0 - cdf


def sum_above(c: float) -> float:
    """Pr{A + B > c} for independent A, B ~ U[0, 1]."""
    if c <= 0.0:
        return 1.0
    if c <= 1.0:
        return 1.0 - c * c / 2.0
    return max(0.0, (2.0 - c) ** 2 / 2.0)


PRIOR_FREE_CLOSED = {
    "recall": lambda mu: mu,  # 1 - B < mu
    "specificity": lambda mu: mu,
    "fpr": lambda mu: 1.0 - mu,  # lower is better: Pr{A > mu}
    "fnr": lambda mu: 1.0 - mu,
    "balanced_accuracy": lambda mu: sum_above(2.0 - 2.0 * mu),
    "informedness": lambda mu: sum_above(1.0 - mu),
    "g_mean": lambda mu: 0.0 if mu <= 0.0 else mu * mu * (1.0 - 2.0 * math.log(mu)),
    "precision_gain": lambda mu: precision_closed(1.0 / (2.0 - mu), 0.5),  # a > (1 - mu)(1 - b)
}


# --------------------------------------------------------------------------- F1
def test_f1_closed_form_reproduces_the_papers_example() -> None:
    assert f1_ops(0.6, 0.1) == pytest.approx(0.9576719576719577, abs=1e-12)


@pytest.mark.parametrize("prior", [0.05, 0.3, 0.5, 0.8])
@pytest.mark.parametrize("mu", [0.1, 0.35, 0.6, 0.9])
def test_f1_closed_form_matches_brute_force_grid(prior: float, mu: float) -> None:
    assert f1_ops(mu, prior) == pytest.approx(grid_ops("f1", mu, prior), abs=GRID_TOLERANCE)


def test_f1_closed_form_is_continuous_at_the_branch_point() -> None:
    for pi in (0.01, 0.3, 0.7):
        knot = 2.0 * pi / (1.0 + pi)
        assert f1_ops(knot - 1e-9, pi) == pytest.approx(f1_ops(knot + 1e-9, pi), abs=1e-7)
    assert f1_ops(0.0, 0.3) == 0.0
    assert f1_ops(1.0, 0.3) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("prior", PRIORS)
def test_one_dimensional_method_matches_f1_closed_form(prior: float) -> None:
    f1 = LABELING_METRICS["f1"]
    worst = max(abs(worse_area(f1, mu, prior) - f1_ops(mu, prior)) for mu in MUS)
    assert worst < 1e-4


# ----------------------------------------------------- other closed forms and grids
@pytest.mark.parametrize("prior", PRIORS)
def test_precision_and_accuracy_match_closed_forms(prior: float) -> None:
    for mu in MUS:
        assert labeling_ops("precision", mu, prior) == pytest.approx(
            precision_closed(mu, prior), abs=1e-4
        )
        assert labeling_ops("accuracy", mu, prior) == pytest.approx(
            accuracy_closed(mu, prior), abs=1e-4
        )


@pytest.mark.parametrize("name", sorted(PRIOR_FREE_CLOSED))
def test_prior_free_metrics_match_closed_forms_at_every_prior(name: str) -> None:
    closed = PRIOR_FREE_CLOSED[name]
    assert not LABELING_METRICS[name].prior_dependent
    for prior in (0.001, 0.3, 0.999):
        for mu in (*MUS, -0.5, -3.0):
            if LABELING_METRICS[name].lower <= mu:
                assert labeling_ops(name, mu, prior) == pytest.approx(closed(mu), abs=1e-4)


@pytest.mark.parametrize("prior", [0.02, 0.5, 0.97])
def test_recall_gain_matches_closed_form(prior: float) -> None:
    # recall_gain = 1 - pi B / ((1 - pi)(1 - B)) < mu  <=>  B > c / (1 + c), c = (1-mu)(1-pi)/pi
    for mu in (-5.0, -1.0, 0.0, 0.5, 0.9):
        c = (1.0 - mu) * (1.0 - prior) / prior
        assert labeling_ops("recall_gain", mu, prior) == pytest.approx(1.0 / (1.0 + c), abs=1e-4)


@pytest.mark.parametrize("name", ["mcc", "precision", "accuracy", "cohen_kappa", "iam", "p4"])
@pytest.mark.parametrize("prior", [0.03, 0.5, 0.9])
def test_matches_brute_force_grid(name: str, prior: float) -> None:
    v = metric_grid(name, prior, GRID)
    finite = v[np.isfinite(v)]
    for q in (0.1, 0.5, 0.9):
        mu = float(np.quantile(finite, q)) + 1e-7  # off the grid's own values
        assert labeling_ops(name, mu, prior) == pytest.approx(
            grid_ops(name, mu, prior), abs=GRID_TOLERANCE
        )


def test_mcc_matches_the_papers_example() -> None:
    # The authors' O_MCC(0.4, pi=0.1) (their 200-step numerical integration).
    assert labeling_ops("mcc", 0.4, 0.1) == pytest.approx(0.8949958133257554, abs=1e-4)


def test_mcc_zero_is_the_median_by_symmetry() -> None:
    for prior in (0.01, 0.3, 0.5, 0.9):
        assert labeling_ops("mcc", 0.0, prior) == pytest.approx(0.5, abs=1e-4)
        for mu in (0.2, 0.7):
            assert labeling_ops("mcc", -mu, prior) == pytest.approx(
                1.0 - labeling_ops("mcc", mu, prior), abs=2e-4
            )


# ------------------------------------------------------------ registry properties
@pytest.mark.parametrize("name", sorted(LABELING_METRICS))
def test_every_metric_is_monotone_in_both_error_rates(name: str) -> None:
    """The premise of the diagonal method: a worse error rate never improves M."""
    m = LABELING_METRICS[name]
    sign = 1.0 if m.greater_is_better else -1.0
    for prior in (0.001, 0.2, 0.5, 0.95):
        v = sign * metric_grid(name, prior, 301)
        for axis in (0, 1):
            step = np.diff(v, axis=axis)
            ref = np.abs(np.delete(v, 0, axis=axis))
            assert not np.any(step > 1e-9 * (1.0 + ref))


@pytest.mark.parametrize("name", sorted(LABELING_METRICS))
def test_ops_is_a_monotone_percentile_in_zero_one(name: str) -> None:
    m = LABELING_METRICS[name]
    prior = 0.15
    v = metric_grid(name, prior, 200)
    finite = v[np.isfinite(v)]
    mus = np.quantile(finite, np.linspace(0.0, 1.0, 15))
    ops = np.array([outperformance_score(name, float(mu), prior) for mu in mus])
    assert np.all((ops >= 0.0) & (ops <= 1.0))
    steps = np.diff(ops) if m.greater_is_better else -np.diff(ops)
    assert np.all(steps >= -1e-9)
    assert ops[-1 if m.greater_is_better else 0] > 0.99  # the best observed value beats ~all
    assert ops[0 if m.greater_is_better else -1] < 0.01


@pytest.mark.parametrize(
    ("low", "high"), [("error_rate", "accuracy"), ("fnr", "recall"), ("fpr", "specificity")]
)
def test_lower_is_better_metrics_rank_like_their_complement(low: str, high: str) -> None:
    for prior in (0.05, 0.6):
        for x in (0.1, 0.4, 0.75):
            assert labeling_ops(low, x, prior) == pytest.approx(
                labeling_ops(high, 1.0 - x, prior), abs=1e-4
            )


def test_lift_maps_to_precision() -> None:
    for prior in (0.01, 0.2, 0.7):
        for precision in (0.05, 0.3, 0.8):
            lift = precision / prior
            expected = outperformance_score("precision", precision, prior)
            assert outperformance_score("lift", lift, prior) == pytest.approx(expected, abs=1e-12)
            # the registry's own lift function, integrated directly, agrees
            assert worse_area(LABELING_METRICS["lift"], lift, prior) == pytest.approx(
                expected, abs=1e-4
            )


@settings(max_examples=40, deadline=None)
@given(
    mu=st.floats(0.0, 1.0),
    prior=st.floats(1e-3, 1.0 - 1e-3),
)
def test_f1_numeric_and_closed_agree_everywhere(mu: float, prior: float) -> None:
    assert worse_area(LABELING_METRICS["f1"], mu, prior) == pytest.approx(
        f1_ops(mu, prior), abs=1e-4
    )


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("metric", "value", "prior", "at", "field"),
    [
        ("f11", 0.5, 0.3, None, "metric"),
        ("", 0.5, 0.3, None, "metric"),
        ("f1", 0.5, 0.0, None, "prior"),
        ("f1", 0.5, 1.0, None, "prior"),
        ("f1", 0.5, float("nan"), None, "prior"),
        ("f1", float("nan"), 0.3, None, "value"),
        ("f1", float("inf"), 0.3, None, "value"),
        ("f1", 1.2, 0.3, None, "value"),
        ("mcc", -1.5, 0.3, None, "value"),
        ("lift", 11.0, 0.1, None, "value"),  # above 1 / prior
        ("f1", "high", 0.3, None, "value"),
        ("f1", 0.5, 0.3, 0.5, "at"),
    ],
)
def test_bad_input_names_the_field(
    metric: str, value: object, prior: float, at: float | None, field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        outperformance_score(metric, value, prior, at=at)  # type: ignore[arg-type]
    assert err.value.field == field


def test_rounding_just_outside_the_range_is_accepted() -> None:
    assert outperformance_score("f1", 1.0 + 1e-12, 0.3) == pytest.approx(1.0)
    assert outperformance_score("lift", (1.0 + 1e-12) / 0.1, 0.1) == pytest.approx(1.0)
    assert outperformance_score(" F1 ", 0.6, 0.1) == pytest.approx(f1_ops(0.6, 0.1))


@pytest.mark.parametrize(
    "name", ["f1", "mcc", "precision", "accuracy", "error_rate", "recall_gain"]
)
def test_the_ops_of_several_pairs_are_those_of_one_call_per_pair(name: str) -> None:
    from app.metrics.ops_labeling import labeling_ops_pairs, worse_areas

    rng = np.random.default_rng(11)
    low, high = LABELING_METRICS[name].lower, LABELING_METRICS[name].upper
    values = [float(v) for v in rng.uniform(max(low, -1.0), min(high, 1.0), size=7)]
    priors = [1e-4, 0.001, 0.05, 0.3, 0.5, 0.97, 1.0 - 1e-6]
    one_by_one = [labeling_ops(name, v, p) for v, p in zip(values, priors, strict=True)]
    assert labeling_ops_pairs(name, values, priors) == one_by_one
    if name != "f1":
        areas = worse_areas(LABELING_METRICS[name], values, priors)
        assert areas.tolist() == [
            worse_area(LABELING_METRICS[name], v, p) for v, p in zip(values, priors, strict=True)
        ]
    assert labeling_ops_pairs(name, [], []) == []


@pytest.mark.parametrize("prior", [0.003, 0.2, 0.9])
def test_the_ops_of_several_metrics_at_one_prior_are_those_of_one_call_per_metric(
    prior: float,
) -> None:
    """The batched areas (one grid, one bisection) are bit for bit the areas one by one."""
    from app.metrics.ops import labeling_outperformance_scores
    from app.metrics.ops_labeling import labeling_ops_at

    rng = np.random.default_rng(12)
    names = ["f1", "mcc", "precision", "accuracy", "error_rate", "recall_gain", "recall"]
    values = {}
    for name in names:
        low, high = LABELING_METRICS[name].lower, LABELING_METRICS[name].upper
        values[name] = float(rng.uniform(max(low, -1.0), min(high, 1.0)))
    batched = labeling_ops_at(values, prior)
    assert list(batched) == names
    assert batched == {name: labeling_ops(name, v, prior) for name, v in values.items()}
    checked = labeling_outperformance_scores(values, prior)
    assert checked == {name: outperformance_score(name, v, prior) for name, v in values.items()}
    assert labeling_ops_at({}, prior) == {}
    with pytest.raises(InvalidInput):
        labeling_outperformance_scores({"auc_pr": 0.5}, prior)


@pytest.mark.parametrize("prior", [0.02, 0.1, 0.5, 0.9])
def test_the_ops_of_every_labeling_metric_at_once_are_those_of_one_call_each(
    prior: float,
) -> None:
    """Aliases included: ``lift`` is scored as the precision it stands for, as
    :func:`outperformance_score` scores it, not as a precision of the lift's value."""
    from app.metrics.ops import labeling_outperformance_scores

    rng = np.random.default_rng(21)
    values = {}
    for name, spec in LABELING_METRICS.items():
        if name == "lift":  # a lift is a precision over the prior: 1 / prior at most
            values[name] = float(rng.uniform(0.0, 1.0 / prior))
            continue
        values[name] = float(rng.uniform(max(spec.lower, -1.0), min(spec.upper, 1.0)))
    together = labeling_outperformance_scores(values, prior)
    assert list(together) == list(values)
    assert together == {name: outperformance_score(name, v, prior) for name, v in values.items()}
    lift = labeling_outperformance_scores({"lift": values["lift"]}, prior)["lift"]
    assert lift == outperformance_score("precision", values["lift"] * prior, prior)

"""OPS of scoring metrics: DBT reference values against independent per-curve
computations, interpolation error against exact evaluation, the paper's values."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from app.errors import InvalidInput
from app.metrics.curves import (
    cumulative_counts,
    gain_auc_from_counts,
    lift_auc_ideal,
    precision_at_recall,
    roc_auc_from_counts,
)
from app.metrics.dbt import dbt_reference, monte_carlo_standard_error, sample_dbt
from app.metrics.ops import outperformance_score
from app.metrics.ops_scoring import (
    ScoringReference,
    oprc_curve,
    ops_lift_curve,
    recall_grid,
    scoring_reference,
)


@pytest.fixture(scope="module")
def small() -> ScoringReference:
    return ScoringReference(sample_dbt(3000, 8, np.random.default_rng(5)))


@pytest.fixture(scope="module")
def default() -> ScoringReference:
    return scoring_reference()


@pytest.fixture(scope="module")
def paper() -> ScoringReference:
    """The paper's setting: depth 9 (its notebook draws 400,000 curves; we draw 20,000)."""
    return ScoringReference(sample_dbt(20_000, 9, np.random.default_rng(2025)))


def tolerance(p: float, n_curves: int, sigmas: float = 4.0) -> float:
    """Agreement allowed between two Monte-Carlo estimates (ours and the paper's, G = 4e5)."""
    se = np.hypot(monte_carlo_standard_error(p, n_curves), monte_carlo_standard_error(p, 400_000))
    return float(sigmas * se)


def count_below(values: np.ndarray, mu: float) -> float:
    return float(np.mean(values < mu))


# ------------------------------------------------------- reference values per curve
def test_roc_auc_of_each_curve_is_its_trapezoid_area(small: ScoringReference) -> None:
    d = small.dbt
    independent = np.trapezoid(d.tpr, d.alpha, axis=1)
    assert np.allclose(small.exact_values("auc_roc", 0.3), independent, atol=1e-12)
    # prior-free: the same at any prior, up to rounding
    assert np.allclose(small.sorted_values("auc_roc"), np.sort(small.exact_values("auc_roc", 0.7)))


def test_average_precision_of_each_curve_is_the_step_sum(small: ScoringReference) -> None:
    d, pi = small.dbt, 0.2
    recall, alpha = d.tpr[:, 1:], d.alpha[:, 1:]
    precision = pi * recall / (pi * recall + (1 - pi) * alpha)
    independent = np.sum(np.diff(d.tpr, axis=1) * precision, axis=1)
    assert np.allclose(small.exact_values("auc_pr", pi), independent, atol=1e-12)


def test_roc_auc_reference_is_symmetric_around_one_half(small: ScoringReference) -> None:
    # alpha and recall follow the same law independently: AUC and 1 - AUC are alike.
    assert small.ops_area("auc_roc", 0.5, 0.3) == pytest.approx(0.5, abs=tolerance(0.5, 3000))


@pytest.mark.parametrize("area", ["auc_pr", "auc_lift"])
@pytest.mark.parametrize("prior", [0.0007, 0.013, 0.31, 0.5, 0.88, 0.9991])
def test_interpolated_areas_match_exact_evaluation(
    small: ScoringReference, area: str, prior: float
) -> None:
    exact = small.exact_values(area, prior)
    approx = small.interpolated_values(area, prior)
    assert np.max(np.abs(approx - exact)) < 1e-4
    ranked = np.sort(exact)
    for mu in np.quantile(exact, np.linspace(0.02, 0.98, 25)):
        ops_exact = np.searchsorted(ranked, mu, side="left") / ranked.size
        # a few curves out of 3000 at most, far below the Monte-Carlo error
        assert abs(small.ops_area(area, float(mu), prior) - ops_exact) <= 2.0 / ranked.size


def test_interpolation_is_exact_on_a_node(small: ScoringReference) -> None:
    prior = 1.0 / (1.0 + np.exp(-0.5))  # logit 0.5 is a node
    assert np.allclose(
        small.interpolated_values("auc_pr", prior), small.exact_values("auc_pr", prior), atol=1e-12
    )


@pytest.mark.parametrize("recall", [0.05, 0.5, 0.9, 1.0])
def test_alpha_at_recall_matches_per_curve_interpolation(
    small: ScoringReference, recall: float
) -> None:
    d = small.dbt
    independent = np.array([np.interp(recall, d.tpr[g], d.alpha[g]) for g in range(d.n_curves)])
    assert np.allclose(small.alpha_at_recall(recall), independent, atol=1e-12)


@pytest.mark.parametrize(("prior", "recall"), [(0.1, 0.9), (0.4, 0.3), (0.02, 0.6)])
def test_precision_at_recall_ops_matches_brute_force(
    small: ScoringReference, prior: float, recall: float
) -> None:
    d = small.dbt
    alpha = np.array([np.interp(recall, d.tpr[g], d.alpha[g]) for g in range(d.n_curves)])
    precision = prior * recall / (prior * recall + (1 - prior) * alpha)
    for mu in np.quantile(precision, [0.1, 0.5, 0.9]) + 1e-9:
        ops = outperformance_score("precision_at_recall", mu, prior, at=recall, reference=small)
        assert ops == count_below(precision, mu)


@pytest.mark.parametrize(("prior", "fraction"), [(0.1, 0.2), (0.3, 0.5), (0.02, 0.01), (0.6, 0.9)])
def test_precision_at_fraction_ops_matches_brute_force(
    small: ScoringReference, prior: float, fraction: float
) -> None:
    d = small.dbt
    x = prior * d.tpr + (1 - prior) * d.alpha  # fraction predicted positive at every point
    recall = np.array([np.interp(fraction, x[g], d.tpr[g]) for g in range(d.n_curves)])
    precision = prior * recall / fraction
    for mu in np.quantile(precision, [0.1, 0.5, 0.9]) + 1e-9:
        ops = outperformance_score("precision_at_fraction", mu, prior, at=fraction, reference=small)
        assert ops == count_below(precision, mu)


# ------------------------------------------------------------------ paper's values
@pytest.mark.parametrize("depth_ref", ["default", "paper"])
@pytest.mark.slow
def test_auc_pr_matches_the_paper(depth_ref: str, request: pytest.FixtureRequest) -> None:
    ref = request.getfixturevalue(depth_ref)
    ops = outperformance_score("auc_pr", 0.6, 0.1, reference=ref)
    assert ops == pytest.approx(0.962125, abs=tolerance(0.962, ref.n_curves))


@pytest.mark.parametrize("depth_ref", ["default", "paper"])
def test_precision_at_recall_matches_the_paper(
    depth_ref: str, request: pytest.FixtureRequest
) -> None:
    ref = request.getfixturevalue(depth_ref)
    ops = outperformance_score("precision_at_recall", 0.4, 0.1, at=0.9, reference=ref)
    assert ops == pytest.approx(0.973175, abs=tolerance(0.973, ref.n_curves))


@pytest.mark.parametrize("depth_ref", ["default", "paper"])
def test_lift_at_fraction_matches_the_paper(depth_ref: str, request: pytest.FixtureRequest) -> None:
    ref = request.getfixturevalue(depth_ref)
    ops = outperformance_score("lift_at_fraction", 4.0, 0.1, at=0.2, reference=ref)
    assert ops == pytest.approx(0.94815, abs=tolerance(0.948, ref.n_curves))


def right_step_lift_area(ref: ScoringReference, pi: float) -> np.ndarray:
    """The paper's lift area: lift at the right end of each step, summed."""
    d = ref.dbt
    x = pi * d.tpr + (1 - pi) * d.alpha
    return np.sum(np.diff(x, axis=1) * d.tpr[:, 1:] / x[:, 1:], axis=1)


def test_lift_area_matches_the_paper_under_its_integration_rule(paper: ScoringReference) -> None:
    """The paper sums the lift at the right end of each step (lift 1/pi at x = 0).

    Computed that way on depth-9 curves, OPS(2.5 at pi = 0.1) reproduces the
    paper's 0.9555. The rule underestimates a decreasing curve, the more so the
    coarser the curve (depth 8 gives about 0.960). The service integrates the
    lift of the piecewise-linear gain curve (app.metrics.areas): larger areas,
    hence a lower OPS, and nearly the same at depth 8 and 9.
    """
    pi = 0.1
    right_steps = right_step_lift_area(paper, pi)
    assert count_below(right_steps, 2.5) == pytest.approx(
        0.9555, abs=tolerance(0.955, paper.n_curves)
    )
    service_rule = paper.exact_values("auc_lift", pi)
    assert count_below(service_rule, 2.5) < count_below(right_steps, 2.5) - 0.005


def test_default_reference_is_reproducible(default: ScoringReference) -> None:
    again = ScoringReference(sample_dbt(default.n_curves, 8, np.random.default_rng(20_250_511)))
    for metric, value, at in (
        ("auc_pr", 0.3, None),
        ("auc_roc", 0.7, None),
        ("precision_at_recall", 0.2, 0.5),
    ):
        assert outperformance_score(metric, value, 0.05, at=at, reference=again) == (
            outperformance_score(metric, value, 0.05, at=at, reference=default)
        )


# ----------------------------------------------------------- properties, aliases
@pytest.mark.parametrize(
    ("metric", "at", "values"),
    [
        ("auc_roc", None, np.linspace(0.0, 1.0, 21)),
        ("ks", None, np.linspace(0.0, 1.0, 21)),
        ("auc_pr", None, np.linspace(0.0, 1.0, 21)),
        ("auc_lift", None, np.linspace(0.0, 5.0, 21)),
        ("precision_at_recall", 0.5, np.linspace(0.0, 1.0, 21)),
        ("precision_at_fraction", 0.1, np.linspace(0.0, 1.0, 21)),
    ],
)
def test_ops_is_monotone_in_zero_one(
    small: ScoringReference, metric: str, at: float | None, values: np.ndarray
) -> None:
    ops = [outperformance_score(metric, float(v), 0.15, at=at, reference=small) for v in values]
    assert all(0.0 <= o <= 1.0 for o in ops)
    assert np.all(np.diff(ops) >= 0.0)
    assert ops[0] == 0.0 and ops[-1] > 0.99


def test_aliases_map_to_their_metric(small: ScoringReference) -> None:
    pi = 0.2
    auc = outperformance_score("auc_roc", 0.8, pi, reference=small)
    assert outperformance_score("gini", 0.6, pi, reference=small) == auc
    assert outperformance_score("nauc_lift", 0.5, pi, reference=small) == (
        outperformance_score("auc_lift", 0.5 * float(lift_auc_ideal(pi)), pi, reference=small)
    )
    assert outperformance_score("lift_at_fraction", 2.0, pi, at=0.3, reference=small) == (
        outperformance_score("precision_at_fraction", 0.4, pi, at=0.3, reference=small)
    )


def test_gain_area_is_affine_in_roc_auc_so_its_ops_is_roc_aucs() -> None:
    rng = np.random.default_rng(8)
    y = (rng.random(500) < 0.25).astype(int)
    curve = cumulative_counts(1 / (1 + np.exp(-(rng.normal(size=500) + y))), y)
    pi = curve.prior
    gain = float(gain_auc_from_counts(curve.tps, curve.fps))
    auc = float(roc_auc_from_counts(curve.tps, curve.fps))
    assert gain == pytest.approx(pi / 2 + (1 - pi) * auc, abs=1e-12)
    assert outperformance_score("auc_gain", gain, pi) == pytest.approx(
        outperformance_score("auc_roc", auc, pi), abs=1.0 / 20_000
    )


@pytest.mark.parametrize(
    ("metric", "value", "at", "field"),
    [
        ("precision_at_recall", 0.5, None, "at"),
        ("precision_at_recall", 0.5, 0.0, "at"),
        ("precision_at_fraction", 0.5, 1.5, "at"),
        ("precision_at_fraction", 0.5, float("nan"), "at"),
        ("auc_pr", 0.5, 0.3, "at"),
        ("auc_pr", 1.5, None, "value"),
        ("auc_roc", -0.1, None, "value"),
        ("auc_lift", -1.0, None, "value"),
        ("gini", 1.5, None, "value"),
    ],
)
def test_bad_input_names_the_field(
    small: ScoringReference, metric: str, value: float, at: float | None, field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        outperformance_score(metric, value, 0.3, at=at, reference=small)
    assert err.value.field == field


# ------------------------------------------------------------------ OPRC, OPS-lift
def _curve(seed: int, shift: float, n: int = 2000, prior: float = 0.2):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < prior).astype(int)
    return cumulative_counts(1 / (1 + np.exp(-(rng.normal(size=n) + shift * y))), y)


def test_oprc_is_the_ops_of_precision_at_each_recall(small: ScoringReference) -> None:
    curve = _curve(1, 1.5)
    u, ops = oprc_curve(curve, reference=small)
    assert np.array_equal(u, recall_grid(20)) and ops.shape == (20,)
    for k in (0, 7, 19):
        observed = precision_at_recall(curve, float(u[k]))
        assert ops[k] == outperformance_score(
            "precision_at_recall", observed, curve.prior, at=float(u[k]), reference=small
        )


def test_better_rankers_have_higher_oprc_and_ops_lift(small: ScoringReference) -> None:
    strong, weak = _curve(2, 3.0), _curve(2, 0.3)
    for curve_ops in (oprc_curve, ops_lift_curve):
        s = curve_ops(strong, reference=small)[1]
        w = curve_ops(weak, reference=small)[1]
        assert np.all((s >= 0.0) & (s <= 1.0)) and np.all((w >= 0.0) & (w <= 1.0))
        assert np.mean(s) > np.mean(w) + 0.2


def test_ops_lift_curve_at_a_reference_prior(small: ScoringReference) -> None:
    curve = _curve(3, 1.0)
    x, ops = ops_lift_curve(curve, 0.05, n_points=5, reference=small)
    assert np.array_equal(x, recall_grid(5)) and ops.shape == (5,)
    assert np.all(np.isfinite(ops))


@pytest.mark.parametrize("label", [1, 0])
def test_one_class_curves_have_no_oprc_or_ops_lift(small: ScoringReference, label: int) -> None:
    """Issue 20: the OPRC of three rows labelled [1, 1, 1] divided by 1 - prior."""
    curve = cumulative_counts(np.array([0.9, 0.2, 0.6]), np.full(3, label))
    for curve_ops in (oprc_curve, ops_lift_curve):
        grid, ops = curve_ops(curve, reference=small)
        assert np.array_equal(grid, recall_grid(20)) and np.all(np.isnan(ops))


def test_lift_nodes_stay_finite_where_the_node_prior_rounds_to_one() -> None:
    """A window of 2^53 rows with one negative: its prior's nodes reach priors that
    round to 1.0, whose -ln was 0 (a division by zero, then NaN nodes)."""
    ref = ScoringReference(sample_dbt(200, 4, np.random.default_rng(9)))
    prior = 1.0 - 2.0**-53
    assert 1.0 / (1.0 + math.exp(-(math.floor(math.log(2.0**53) / 0.25) + 2) * 0.25)) == 1.0
    values = ref.interpolated_values("auc_lift", prior)
    assert np.all(np.isfinite(values))
    assert 0.0 <= ref.ops_area("auc_lift", float(lift_auc_ideal(prior)), prior) <= 1.0


def test_default_reference_is_built_once(default: ScoringReference) -> None:
    assert scoring_reference() is default
    assert default.dbt is dbt_reference()


def test_warm_up_builds_what_a_window_needs() -> None:
    ref = ScoringReference(sample_dbt(200, 4, np.random.default_rng(9)))
    ref.warm_up([0.1])
    nodes = len(ref._nodes)
    assert nodes == 8  # four nodes around logit(0.1) for each of AUC-PR and the lift area
    outperformance_score("auc_pr", 0.5, 0.1, reference=ref)
    outperformance_score("auc_lift", 1.5, 0.1, reference=ref)
    assert len(ref._nodes) == nodes


def test_precision_at_recall_saturates_outside_the_unit_interval(small: ScoringReference) -> None:
    assert small.ops_precision_at_recall(0.0, 0.1, 0.5) == 0.0
    assert small.ops_precision_at_recall(1.0 + 1e-12, 0.1, 0.5) == 1.0


def test_per_recall_cache_is_bounded_and_recomputes_the_same(small: ScoringReference) -> None:
    first = small.sorted_alpha_at_recall(0.5).copy()
    for k in range(300):
        small.sorted_alpha_at_recall(0.001 + k / 400)
    assert len(small._alpha_sorted) <= 257
    np.testing.assert_array_equal(small.sorted_alpha_at_recall(0.5), first)


@pytest.mark.parametrize(
    ("metric", "values", "at"),
    [
        ("f1", [0.2, 0.7, 0.0], None),
        ("mcc", [-0.3, 0.4, 1.0], None),
        ("lift", [0.5, 2.0, 1.0], None),
        ("auc_pr", [0.0, 0.3, 0.9], None),
        ("auc_roc", [0.4, 0.8, 1.0], None),
        ("gini", [-0.2, 0.5, 0.9], None),
        ("auc_lift", [1.0, 1.5, 2.0], None),
        ("precision_at_recall", [0.1, 0.5, 0.9], 0.6),
        ("precision_at_fraction", [0.1, 0.5, 0.9], 0.05),
    ],
)
def test_the_ops_of_several_pairs_equal_one_call_per_pair(
    metric: str, values: list[float], at: float | None
) -> None:
    from app.metrics.ops import outperformance_scores

    priors = [0.02, 0.3, 0.6]
    expected = [
        outperformance_score(metric, v, p, at=at) for v, p in zip(values, priors, strict=True)
    ]
    assert outperformance_scores(metric, values, priors, at=at) == expected


@pytest.mark.parametrize(
    ("values", "priors", "field"),
    [
        ([0.5, 0.6], [0.1], "priors"),
        ([0.5, math.nan], [0.1, 0.2], "value"),
        ([0.5], [0.0], "prior"),
    ],
)
def test_the_ops_of_several_pairs_reject_bad_input(
    values: list[float], priors: list[float], field: str
) -> None:
    from app.metrics.ops import outperformance_scores

    with pytest.raises(InvalidInput) as err:
        outperformance_scores("mcc", values, priors)
    assert err.value.field == field


def test_a_node_store_is_asked_for_each_node_and_its_bytes_are_used() -> None:
    """With a store (app/worker/node_store.py), each node comes from ``store.node``,
    which is handed the builder; the values are those built in memory."""
    curves = sample_dbt(200, 4, np.random.default_rng(9))
    asked: list[tuple[str, int]] = []

    class Store:
        def node(self, area: str, index: int, build: Callable[[], np.ndarray]) -> np.ndarray:
            asked.append((area, index))
            return build()

    stored = ScoringReference(curves)
    stored.store_nodes_in(Store())
    values = stored.interpolated_values("auc_pr", 0.1)
    assert len(asked) == 4 and {area for area, _ in asked} == {"auc_pr"}
    in_memory = ScoringReference(curves).interpolated_values("auc_pr", 0.1)
    np.testing.assert_array_equal(values, in_memory)
    ranked = stored.sorted_values("auc_roc")
    assert asked[-1] == ("sorted-auc_roc", 0)
    np.testing.assert_array_equal(ranked, ScoringReference(curves).sorted_values("auc_roc"))

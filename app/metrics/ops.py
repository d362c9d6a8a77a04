"""The outperformance score (OPS): public entry point (docs/outperformance.md).

OPS_M(mu; pi) is the probability that a reference classifier does worse than
the observed value mu of metric M on data with class prior pi: a percentile
rank in [0, 1], higher is better, comparable across metrics and across
windows with different priors.

* Labeling metrics (every name of ``LABELING_METRICS``): reference error rates
  A, B ~ U[0, 1]; :mod:`app.metrics.ops_labeling`. For a metric where lower
  is better (error_rate, fpr, fnr) "worse" means a higher value.
* Scoring metrics: DBT reference curves; :mod:`app.metrics.ops_scoring`.
* Names that are positive-affine transforms of a supported metric (with
  coefficients that may depend on pi) map to it, since the OPS is invariant
  under such maps: ``lift`` = precision / pi, ``gini`` = 2 AUC - 1,
  ``nauc_lift`` = lift area / (1 - ln pi), ``lift_at_fraction`` = precision at
  the fraction / pi, ``auc_gain`` = pi/2 + (1 - pi) ROC-AUC.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.errors import InvalidInput
from app.metrics.curves import lift_auc_ideal
from app.metrics.labeling import LABELING_METRICS
from app.metrics.ops_labeling import labeling_ops_at, labeling_ops_pairs
from app.metrics.validation import check_probability

if TYPE_CHECKING:
    from app.metrics.ops_scoring import ScoringReference

POINT_METRICS = ("precision_at_recall", "precision_at_fraction")
"""Scoring metrics read at one point of the curve; ``at`` gives the point."""

SCORING_METRICS = ("auc_pr", "auc_roc", "auc_lift", "ks", *POINT_METRICS)
"""Scoring metrics with a DBT reference."""

_TOLERANCE = 1e-9  # values this far outside a metric's range are rounding, not errors


@dataclass(frozen=True, slots=True)
class _Alias:
    """``name`` = a positive-affine map of ``target``: target value = ``to_target(value, pi)``."""

    target: str
    to_target: Callable[[float, float], float]
    meaning: str


ALIASES: dict[str, _Alias] = {
    "lift": _Alias("precision", lambda v, pi: v * pi, "precision / prior"),
    "lift_at_fraction": _Alias(
        "precision_at_fraction", lambda v, pi: v * pi, "precision at the fraction / prior"
    ),
    "gini": _Alias("auc_roc", lambda v, pi: (v + 1.0) / 2.0, "2 * auc_roc - 1"),
    "nauc_lift": _Alias(
        "auc_lift", lambda v, pi: v * float(lift_auc_ideal(pi)), "auc_lift / (1 - ln prior)"
    ),
    "auc_gain": _Alias(
        "auc_roc", lambda v, pi: (v - pi / 2.0) / (1.0 - pi), "prior/2 + (1 - prior) * auc_roc"
    ),
}
"""Names whose OPS is that of another metric, with the value map."""


def supported_metrics() -> tuple[str, ...]:
    """Every metric name :func:`outperformance_score` accepts, sorted."""
    return tuple(sorted({*LABELING_METRICS, *SCORING_METRICS, *ALIASES}))


def _range(metric: str) -> tuple[float, float]:
    """Closed range of possible values of a labeling or scoring metric."""
    if metric in LABELING_METRICS:
        m = LABELING_METRICS[metric]
        return m.lower, m.upper
    if metric == "auc_lift":
        return 0.0, math.inf
    return 0.0, 1.0


def _check_value(metric: str, value: float, shown: str, shown_value: float) -> float:
    lower, upper = _range(metric)
    if lower - _TOLERANCE <= value <= upper + _TOLERANCE:
        return min(max(value, lower), upper)
    raise InvalidInput("value", f"{shown_value!r} is outside the possible range of {shown}")


def _check_at(metric: str, at: float | None) -> float | None:
    if metric not in POINT_METRICS:
        if at is not None:
            raise InvalidInput("at", f"only {' and '.join(POINT_METRICS)} take 'at', not {metric}")
        return None
    what = "recall u" if metric == "precision_at_recall" else "fraction predicted positive"
    if at is None:
        raise InvalidInput("at", f"is required for {metric}: the {what}, in (0, 1]")
    u = float(at)
    if not (math.isfinite(u) and 0.0 < u <= 1.0):
        raise InvalidInput("at", f"is {at!r}; the {what} must be in (0, 1]")
    return u


def outperformance_score(
    metric: str,
    value: float,
    prior: float,
    *,
    at: float | None = None,
    reference: ScoringReference | None = None,
) -> float:
    """The outperformance score of ``value`` of ``metric`` at class prior ``prior``.

    Parameters
    ----------
    metric : str
        A labeling metric name (``app.metrics.labeling.LABELING_METRICS``), a
        scoring metric (``auc_pr``, ``auc_roc``, ``auc_lift``, ``ks``,
        ``precision_at_recall``, ``precision_at_fraction``) or an alias
        (``lift``, ``gini``, ``nauc_lift``, ``lift_at_fraction``, ``auc_gain``).
    value : float
        The observed value, within the metric's possible range.
    prior : float
        Class prior pi of the data, in (0, 1).
    at : float or None
        Recall u (``precision_at_recall``) or fraction of the population
        predicted positive (``precision_at_fraction``, ``lift_at_fraction``),
        in (0, 1]; must be None for every other metric.
    reference : ScoringReference or None
        DBT reference for scoring metrics; default
        ``app.metrics.ops_scoring.scoring_reference()`` (d = 8, G = 20,000).

    Returns
    -------
    float
        OPS in [0, 1]: the probability that a reference classifier does worse.
        Labeling metrics are exact to 1e-4; scoring metrics carry the
        Monte-Carlo error ``sqrt(OPS (1 - OPS) / G)`` (at most 0.0035).

    Raises
    ------
    InvalidInput
        Unknown ``metric``, non-finite or impossible ``value``, ``prior``
        outside (0, 1), ``at`` missing, unexpected or outside (0, 1].

    Examples
    --------
    >>> round(outperformance_score("f1", 0.6, 0.1), 4)
    0.9577
    >>> a = outperformance_score("lift", 6.0, 0.1)  # lift = precision / prior
    >>> abs(a - outperformance_score("precision", 0.6, 0.1)) < 1e-12
    True
    """
    return outperformance_scores(metric, [value], [prior], at=at, reference=reference)[0]


def outperformance_scores(
    metric: str,
    values: Sequence[float],
    priors: Sequence[float],
    *,
    at: float | None = None,
    reference: ScoringReference | None = None,
) -> list[float]:
    """:func:`outperformance_score` of several (value, prior) pairs of one metric.

    The same values as one call per pair; the labeling metrics' areas are
    evaluated for all pairs at once (e.g. the ends of an interval at the ends
    of a prior's interval, :func:`app.metrics.uncertainty.ops_interval`).

    Parameters
    ----------
    metric : str
        As in :func:`outperformance_score`.
    values, priors : sequences of float, length M
        Pair i is the observed value ``values[i]`` at class prior ``priors[i]``.
    at, reference
        As in :func:`outperformance_score` (shared by every pair).

    Returns
    -------
    list of float, length M

    Examples
    --------
    >>> [round(x, 4) for x in outperformance_scores("f1", [0.6, 0.6], [0.1, 0.5])]
    [0.9577, 0.6429]
    """
    target, mus, pis, u = _validated(metric, values, priors, at)
    if target in LABELING_METRICS:
        return labeling_ops_pairs(target, mus, pis)

    from app.metrics.ops_scoring import scoring_reference

    ref = reference if reference is not None else scoring_reference()
    if u is None:
        return [ref.ops_area(target, mu, pi) for mu, pi in zip(mus, pis, strict=True)]
    if target == "precision_at_recall":
        return [ref.ops_precision_at_recall(mu, pi, u) for mu, pi in zip(mus, pis, strict=True)]
    return [ref.ops_precision_at_fraction(mu, pi, u) for mu, pi in zip(mus, pis, strict=True)]


def _validated(
    metric: str, values: Sequence[float], priors: Sequence[float], at: float | None
) -> tuple[str, list[float], list[float], float | None]:
    """The metric whose OPS is computed, its values (clamped to its range), the priors
    and ``at``, checked as :func:`outperformance_scores` documents."""
    name = str(metric).strip().lower()
    alias = ALIASES.get(name)
    target = alias.target if alias is not None else name
    if target not in LABELING_METRICS and target not in SCORING_METRICS:
        raise InvalidInput(
            "metric", f"unknown metric {metric!r}; expected one of {', '.join(supported_metrics())}"
        )
    if len(values) != len(priors):
        raise InvalidInput("priors", f"has {len(priors)} elements but values has {len(values)}")
    pis, mus = [], []
    for value, prior in zip(values, priors, strict=True):
        pis.append(check_probability("prior", prior))
        try:
            mu = float(value)
        except (TypeError, ValueError):
            raise InvalidInput("value", f"is {value!r}, must be a number") from None
        if not math.isfinite(mu):
            raise InvalidInput("value", f"is {value!r}, must be finite")
        mus.append(mu)
    u = _check_at(target, at)
    mus = [
        _check_value(target, alias.to_target(mu, pi) if alias else mu, name, mu)
        for mu, pi in zip(mus, pis, strict=True)
    ]
    return target, mus, pis, u


def labeling_outperformance_scores(values: Mapping[str, float], prior: float) -> dict[str, float]:
    """:func:`outperformance_score` of several labeling metrics at one prior, by name.

    The same values as one call per metric; their areas are evaluated
    together (:func:`app.metrics.ops_labeling.labeling_ops_at`).

    Parameters
    ----------
    values : mapping of str to float
        Observed value of each metric; names of ``LABELING_METRICS``.
    prior : float
        Class prior pi of the data, in (0, 1).

    Returns
    -------
    dict of str to float
        The OPS of each metric, in the order of ``values``.

    Raises
    ------
    InvalidInput
        As :func:`outperformance_score`; a name that is not a labeling metric.

    Examples
    --------
    >>> ops = labeling_outperformance_scores({"f1": 0.6, "recall": 0.3}, 0.1)
    >>> round(ops["f1"], 4), round(ops["recall"], 4)
    (0.9577, 0.3)
    """
    checked: dict[str, float] = {}
    aliased: dict[str, tuple[str, float]] = {}  # an alias's OPS is its target's
    pi = prior
    for name, value in values.items():
        if name not in LABELING_METRICS:
            raise InvalidInput("metric", f"{name!r} is not a labeling metric")
        target, mus, pis, _ = _validated(name, [value], [prior], None)
        pi = pis[0]
        if target == name:
            checked[name] = mus[0]
        else:  # the value is already the target's (lift -> precision)
            aliased[name] = (target, mus[0])
    ops = labeling_ops_at(checked, pi)
    for name, (target, mu) in aliased.items():
        ops[name] = labeling_ops_at({target: mu}, pi)[target]
    return {name: ops[name] for name in values}

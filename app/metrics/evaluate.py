"""The full metric set (docs/metrics.md), from raw scores or from window aggregates.

:func:`evaluate_counts` is the one core: it takes a curve (cumulative counts,
exact from scores or from histograms), the confusion matrix at the decision
threshold and the probability sums, and returns the flat mapping of the
metric set. :func:`evaluate` builds those three from per-example scores with
one sort and calls it; the worker calls it with histogram-derived curves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from app.errors import InvalidInput
from app.metrics.areas import curve_areas
from app.metrics.calibrated import calibrated_average_precision, labeling_and_calibrated_metrics
from app.metrics.confusion import ConfusionCounts
from app.metrics.cost import target_weight, weighted_accuracy
from app.metrics.curves import CurveCounts, cumulative_counts
from app.metrics.labeling import LABELING_METRICS, labeling_metrics
from app.metrics.ops import labeling_outperformance_scores, outperformance_score
from app.metrics.probability import ProbabilitySums, brier_score_loss, log_loss
from app.metrics.undefined import to_optional
from app.metrics.validation import (
    check_probability,
    check_scores_labels,
)

OPS_METRICS: tuple[str, ...] = (
    "f1",
    "mcc",
    "precision",
    "accuracy",
    "auc_pr",
    "auc_roc",
    "auc_lift",
)
"""Metrics reported with their outperformance score ``ops_<name>`` (at the data's prior)."""

CURVE_METRICS: tuple[str, ...] = ("auc_roc", "auc_pr", "auc_lift", "nauc_lift", "ks", "gini")
"""Scoring metrics computed from the curve (absent for label-only classifiers)."""


def curve_metrics(curve: CurveCounts) -> dict[str, float | None]:
    """ROC-AUC, AUC-PR (average precision), lift area and its normalised form, KS, Gini.

    Keys are :data:`CURVE_METRICS`; ``None`` where undefined (one class only).
    """
    return {name: to_optional(float(v)) for name, v in curve_areas(curve.tps, curve.fps).items()}


def _check_options(
    pi0: float | None, cost_ratio: float | None, target_prior: float | None
) -> tuple[float | None, float | None, float | None]:
    if target_prior is not None and cost_ratio is None:
        raise InvalidInput("target_prior", "needs cost_ratio (it reweights weighted accuracy)")
    return (
        None if pi0 is None else check_probability("pi0", pi0),
        None
        if cost_ratio is None
        else check_probability("cost_ratio", cost_ratio, open_interval=False),
        None if target_prior is None else check_probability("target_prior", target_prior),
    )


def _ops_of(metrics: dict[str, float | None], prior: float) -> dict[str, float | None]:
    """``ops_<name>`` of the :data:`OPS_METRICS` in ``metrics`` (None where the value is
    undefined or the prior is 0 or 1); the labeling ones evaluated together."""
    names = [name for name in OPS_METRICS if name in metrics]
    if not 0.0 < prior < 1.0:
        return {f"ops_{name}": None for name in names}
    defined = {name: v for name in names if (v := metrics[name]) is not None}
    ops: dict[str, float] = labeling_outperformance_scores(
        {name: v for name, v in defined.items() if name in LABELING_METRICS}, prior
    )
    return {
        f"ops_{name}": None
        if name not in defined
        else to_optional(
            ops[name] if name in ops else outperformance_score(name, defined[name], prior)
        )
        for name in names
    }


def _weighted_accuracy(
    confusion: ConfusionCounts, cost_ratio: float, target_prior: float | None
) -> float | None:
    w = cost_ratio
    if target_prior is not None:
        if not 0.0 < confusion.prior < 1.0:
            return None
        w = target_weight(cost_ratio, confusion.prior, target_prior)
    c = confusion
    return to_optional(weighted_accuracy(c.tp, c.fp, c.fn, c.tn, w))


def evaluate_counts(
    curve: CurveCounts | None,
    confusion: ConfusionCounts,
    sums: ProbabilitySums | None,
    *,
    pi0: float | None = None,
    cost_ratio: float | None = None,
    target_prior: float | None = None,
) -> dict[str, float | None]:
    """The contract's metric set from a curve, a confusion matrix and probability sums.

    Parameters
    ----------
    curve : CurveCounts or None
        Cumulative counts over thresholds, from scores or histograms of the same
        examples as ``confusion``. ``None`` for a label-only classifier: the
        curve metrics, ``calibrated_auc_pr`` and the OPS of curve metrics are
        then absent (not reported as undefined).
    confusion : ConfusionCounts
        The matrix at the decision threshold (exact).
    sums : ProbabilitySums or None
        Probability sums; ``None`` leaves out ``brier`` and ``log_loss``.
    pi0 : float in (0, 1), optional
        Reference prior: adds ``calibrated_<name>`` for every prior-dependent
        labeling metric and ``calibrated_auc_pr``.
    cost_ratio : float in [0, 1], optional
        Adds ``weighted_accuracy`` at w = ``cost_ratio``.
    target_prior : float in (0, 1), optional
        With ``cost_ratio``: weighted accuracy at the target weight
        ``target_weight(cost_ratio, prior, target_prior)`` instead.

    Returns
    -------
    dict
        Every labeling metric of the registry, ``prior``, the curve metrics,
        ``brier``, ``log_loss``, the calibrated metrics, ``ops_<name>`` for
        :data:`OPS_METRICS` at the data's prior, ``weighted_accuracy``; each a
        float or ``None`` when undefined.
    """
    pi0, cost_ratio, target_prior = _check_options(pi0, cost_ratio, target_prior)
    if curve is not None and not math.isclose(curve.n, confusion.n, rel_tol=1e-9):
        raise InvalidInput(
            "confusion", f"holds {confusion.n} examples but the curve holds {curve.n}"
        )
    prior = confusion.prior
    calibrated: dict[str, float | None] = {}
    if pi0 is None:
        out = labeling_metrics(confusion)
    else:
        out, calibrated = labeling_and_calibrated_metrics(confusion, pi0)
    out["prior"] = to_optional(prior)
    if curve is not None:
        out.update(curve_metrics(curve))
    if sums is not None:
        out["brier"] = to_optional(brier_score_loss(sums))
        out["log_loss"] = to_optional(log_loss(sums))
    if pi0 is not None:
        out.update(calibrated)
        if curve is not None:
            out["calibrated_auc_pr"] = to_optional(calibrated_average_precision(curve, pi0))
    out.update(_ops_of(out, prior))
    if cost_ratio is not None:
        out["weighted_accuracy"] = _weighted_accuracy(confusion, cost_ratio, target_prior)
    return out


def threshold_suffix(threshold: float) -> str:
    """Suffix of the metrics at a non-primary threshold: ``"@t=0.3"``."""
    return f"@t={threshold:g}"


def evaluate_at_thresholds(
    thresholds: Sequence[float],
    confusions: Sequence[ConfusionCounts],
    *,
    pi0: float | None = None,
    cost_ratio: float | None = None,
) -> dict[str, float | None]:
    """The threshold-dependent metrics at further thresholds, keys suffixed.

    Parameters
    ----------
    thresholds : sequence of float
        The further (non-primary) thresholds.
    confusions : sequence of ConfusionCounts
        The matrix at each of them; an empty matrix is skipped.
    pi0, cost_ratio : float, optional
        See :func:`evaluate_counts`.

    Returns
    -------
    dict
        For each threshold t, every key of :func:`evaluate_counts` without a
        curve or probability sums except ``prior`` (labeling, calibrated, OPS
        of labeling metrics, weighted accuracy), with the suffix
        :func:`threshold_suffix` of t.

    Examples
    --------
    >>> m = evaluate_at_thresholds([0.3], [ConfusionCounts(8, 2, 2, 88)])
    >>> m["f1@t=0.3"]
    0.8
    """
    out: dict[str, float | None] = {}
    for threshold, counts in zip(thresholds, confusions, strict=True):
        if counts.n <= 0:
            continue
        at_t = evaluate_counts(None, counts, None, pi0=pi0, cost_ratio=cost_ratio)
        suffix = threshold_suffix(threshold)
        out.update({f"{k}{suffix}": v for k, v in at_t.items() if k != "prior"})
    return out


def evaluate(
    scores: Any,
    labels: Any,
    *,
    threshold: float = 0.5,
    pi0: float | None = None,
    cost_ratio: float | None = None,
    target_prior: float | None = None,
) -> dict[str, float | None]:
    """The full metric set for per-example scores and labels (docs/metrics.md).

    Parameters
    ----------
    scores : array_like of float, shape (n,)
        Scores in [0, 1]; example i is predicted positive iff
        ``scores[i] >= threshold``.
    labels : array_like of {0, 1} or bool, shape (n,)
        ``labels[i]`` is 1 when example i is an actual positive.
    threshold : float in [0, 1]
        Decision threshold of the labeling metrics.
    pi0, cost_ratio, target_prior : float, optional
        See :func:`evaluate_counts`.

    Returns
    -------
    dict
        Flat mapping metric name -> float, ``None`` when undefined. Exact:
        ties are grouped as scikit-learn groups them, ``auc_pr`` equals
        ``average_precision_score`` and ``auc_roc`` ``roc_auc_score``.

    Examples
    --------
    >>> m = evaluate([0.9, 0.8, 0.3, 0.2], [1, 0, 1, 0], pi0=0.5)
    >>> m["precision"], m["auc_roc"], m["calibrated_precision"]
    (0.5, 0.75, 0.5)
    """
    _check_options(pi0, cost_ratio, target_prior)
    s, y = check_scores_labels(scores, labels)
    t = check_probability("threshold", threshold, open_interval=False)
    curve = cumulative_counts(s, y)
    return evaluate_counts(
        curve,
        curve.confusion_at(t),
        ProbabilitySums.from_predictions(s, y),
        pi0=pi0,
        cost_ratio=cost_ratio,
        target_prior=target_prior,
    )

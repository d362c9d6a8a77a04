"""Champion/challenger comparison by vote of three metrics (docs/cost.md, "Voting").

Gong, "A novel performance measure for machine learning classification"
(IJMIT 13(1), 2021): for classifiers a and b scored on the same examples,

    vote(a, b) = sgn(AUC_a − AUC_b) + sgn(MCC_a − MCC_b) + sgn(acc_a − acc_b)

an integer in [−3, 3]; a is better when it is positive. ROC-AUC judges the
ranking, MCC and accuracy the decisions at the threshold. The vote is
antisymmetric (vote(a, b) = −vote(b, a)) and vote(a, a) = 0.

Undefined metrics: a metric that is undefined (``None``/nan) for either
classifier casts no vote (its term is 0) — for instance MCC when a classifier
predicts a single class. Equal values also cast no vote; "equal" means within
``tolerance`` (default 1e-12), so that two computations of the same value that
differ in the last bit (e.g. equal ROC-AUCs summed in different orders) tie.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from app.errors import InvalidInput
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import cumulative_counts, roc_auc_from_counts
from app.metrics.labeling import accuracy, mcc
from app.metrics.validation import check_scores_labels

__all__ = ["DEFAULT_TIE_TOLERANCE", "VOTING_METRICS", "vote", "vote_from_metrics"]

VOTING_METRICS: tuple[str, ...] = ("auc_roc", "mcc", "accuracy")
"""The metrics that vote, by their names in :func:`app.metrics.evaluate`."""


DEFAULT_TIE_TOLERANCE = 1e-12
"""Metric differences at most this large count as ties."""


def _sign_of_difference(x: float | None, y: float | None, tolerance: float) -> int:
    if x is None or y is None:
        return 0
    diff = float(x) - float(y)
    if math.isnan(diff) or abs(diff) <= tolerance:
        return 0
    return 1 if diff > 0 else -1


def _check_tolerance(tolerance: float) -> float:
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        raise InvalidInput("tolerance", f"is {tolerance!r}, must be a number") from None
    if not (math.isfinite(tol) and tol >= 0.0):
        raise InvalidInput("tolerance", f"is {tolerance!r}, must be finite and >= 0")
    return tol


def vote_from_metrics(
    metrics_a: Mapping[str, float | None],
    metrics_b: Mapping[str, float | None],
    *,
    tolerance: float = DEFAULT_TIE_TOLERANCE,
) -> int:
    """The vote from metric values already computed for both classifiers.

    Parameters
    ----------
    metrics_a, metrics_b : mapping of str to float or None
        Metric values of the champion (a) and the challenger (b) on the same
        data, e.g. the results of :func:`app.metrics.evaluate`; must hold the
        keys of :data:`VOTING_METRICS`. ``None`` or nan means undefined.
    tolerance : float
        Differences of at most ``tolerance`` are ties (no vote).

    Returns
    -------
    int
        In [−3, 3]; positive when a is better.

    Raises
    ------
    InvalidInput
        A mapping lacks one of :data:`VOTING_METRICS` (field ``metrics_a`` or
        ``metrics_b``), or ``tolerance`` is negative or not finite.

    Examples
    --------
    >>> vote_from_metrics({"auc_roc": 0.9, "mcc": 0.5, "accuracy": 0.8},
    ...                   {"auc_roc": 0.8, "mcc": 0.6, "accuracy": 0.7})
    1
    """
    for field, metrics in (("metrics_a", metrics_a), ("metrics_b", metrics_b)):
        missing = [name for name in VOTING_METRICS if name not in metrics]
        if missing:
            raise InvalidInput(field, f"lacks {', '.join(missing)}")
    tol = _check_tolerance(tolerance)
    return sum(_sign_of_difference(metrics_a[m], metrics_b[m], tol) for m in VOTING_METRICS)


def _voting_metrics(scores: Any, labels: Any, threshold: float) -> dict[str, float | None]:
    curve = cumulative_counts(scores, labels)
    c = ConfusionCounts.from_predictions(scores, labels, threshold)
    return {
        "auc_roc": float(roc_auc_from_counts(curve.tps, curve.fps)),
        "mcc": float(mcc(c.tp, c.fp, c.fn, c.tn)),
        "accuracy": float(accuracy(c.tp, c.fp, c.fn, c.tn)),
    }


def vote(
    scores_a: Any,
    scores_b: Any,
    labels: Any,
    *,
    threshold: float = 0.5,
    tolerance: float = DEFAULT_TIE_TOLERANCE,
) -> int:
    """Vote of champion a against challenger b scored on the same examples.

    Parameters
    ----------
    scores_a, scores_b : array_like of float, shape (n,)
        ``scores_a[i]`` and ``scores_b[i]`` are the two classifiers' scores in
        [0, 1] for example i.
    labels : array_like of {0, 1}, shape (n,)
        ``labels[i]`` is 1 when example i is an actual positive.
    threshold : float
        Decision threshold of both classifiers for MCC and accuracy
        (positive iff score >= threshold).
    tolerance : float
        Metric differences of at most ``tolerance`` are ties (no vote).

    Returns
    -------
    int
        sgn(ΔAUC) + sgn(ΔMCC) + sgn(Δaccuracy), in [−3, 3]; positive when a
        is better. Undefined metrics cast no vote (module docstring).

    Raises
    ------
    InvalidInput
        Invalid scores (field ``scores_a``/``scores_b``), labels,
        threshold or tolerance.

    Examples
    --------
    >>> vote([0.9, 0.8, 0.3, 0.1], [0.9, 0.2, 0.6, 0.1], [1, 1, 0, 0])
    3
    """
    try:
        check_scores_labels(scores_a, labels)
    except InvalidInput as exc:
        raise InvalidInput("scores_a" if exc.field == "scores" else exc.field, exc.reason) from exc
    try:
        check_scores_labels(scores_b, labels)
    except InvalidInput as exc:
        raise InvalidInput("scores_b" if exc.field == "scores" else exc.field, exc.reason) from exc
    return vote_from_metrics(
        _voting_metrics(scores_a, labels, threshold),
        _voting_metrics(scores_b, labels, threshold),
        tolerance=tolerance,
    )

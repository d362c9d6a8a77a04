"""Every metric of a completed window, through the metric registry (docs/maturity.md).

The completed histograms h1, h0 are per-class score histograms like any
window's; their curve gives the curve areas and, at each threshold (a bin
edge), the exact completed confusion matrix, so the registry of
:mod:`app.metrics.evaluate` computes every labelling, calibrated, OPS and
cost metric with no code of its own here. Brier score and log loss are sums
over the examples pooled across both classes: they cannot be completed from
histograms and are ``None`` (:data:`NOT_COMPLETABLE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.drift.histograms import FloatArray
from app.maturity.completion import Completion
from app.metrics.curves import cumulative_counts_from_histograms
from app.metrics.evaluate import evaluate_at_thresholds, evaluate_counts

NOT_COMPLETABLE: tuple[str, ...] = ("brier", "log_loss")
"""Metrics a completion leaves ``None`` (the caller's reason: ``not-completable``)."""


def completed_metrics(
    completion: Completion,
    *,
    edges: Any,
    thresholds: Sequence[float],
    pi0: float | None,
    cost_ratio: float | None,
) -> dict[str, float | None]:
    """The window's metric set from its completed histograms.

    Parameters
    ----------
    completion : Completion
        From :func:`app.maturity.complete`.
    edges : array_like of shape (J + 1,)
        The model's bin edges.
    thresholds : sequence of float
        The model's thresholds (bin edges), primary first; the others give the
        ``@t=`` keys as in a labelled window.
    pi0, cost_ratio : float or None
        As in :func:`app.metrics.evaluate.evaluate_counts`.

    Returns
    -------
    dict
        The keys of a labelled window from histograms (labelling metrics,
        ``prior``, curve areas, calibrated, OPS, ``weighted_accuracy``, the
        further thresholds' keys), plus ``brier`` and ``log_loss`` as ``None``.

    Examples
    --------
    >>> from app.maturity import complete
    >>> c = complete([6, 6], [2, 0], [1, 3], assumption="score")
    >>> m = completed_metrics(c, edges=[0.0, 0.5, 1.0], thresholds=[0.5], pi0=None, cost_ratio=None)
    >>> m["prior"], m["recall"], m["brier"]
    (0.3333333333333333, 0.25, None)
    """
    return histogram_metrics(
        completion.positives,
        completion.negatives,
        edges=edges,
        thresholds=thresholds,
        pi0=pi0,
        cost_ratio=cost_ratio,
    )


def histogram_metrics(
    positives: FloatArray,
    negatives: FloatArray,
    *,
    edges: Any,
    thresholds: Sequence[float],
    pi0: float | None,
    cost_ratio: float | None,
) -> dict[str, float | None]:
    """:func:`completed_metrics` of completed histograms h1 = ``positives``, h0 = ``negatives``."""
    curve = cumulative_counts_from_histograms(positives, negatives, edges)
    options: dict[str, Any] = {"pi0": pi0, "cost_ratio": cost_ratio}
    out = evaluate_counts(curve, curve.confusion_at(thresholds[0]), None, **options)
    further = thresholds[1:]
    out.update(evaluate_at_thresholds(further, [curve.confusion_at(t) for t in further], **options))
    out.update(dict.fromkeys(NOT_COMPLETABLE))
    return out

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

import numpy as np

from app.drift.histograms import FloatArray
from app.maturity.completion import Completion
from app.metrics.confusion import ConfusionCounts
from app.metrics.cost import weighted_accuracy_from_counts
from app.metrics.curves import cumulative_counts_from_histograms
from app.metrics.evaluate import (
    CURVE_METRICS,
    evaluate_at_thresholds,
    evaluate_counts,
    threshold_suffix,
)
from app.metrics.labeling import LABELING_METRICS, PRIOR_DEPENDENT
from app.metrics.uncertainty import row_areas

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


def row_metrics(
    h1: FloatArray,
    h0: FloatArray,
    *,
    edges: Any,
    thresholds: Sequence[float],
    pi0: float | None,
    cost_ratio: float | None,
) -> dict[str, FloatArray]:
    """The metrics of many windows at once, nan where undefined: every key of
    :func:`completed_metrics` but the OPS and :data:`NOT_COMPLETABLE` ones, each by the
    registry's function evaluated once on all rows.

    Parameters
    ----------
    h1, h0 : arrays of shape (W, J)
        Per-class histograms of W windows (completed or not).
    edges, thresholds, pi0, cost_ratio
        As in :func:`completed_metrics`.

    Returns
    -------
    dict of str to array of shape (W,)
    """
    tps = np.cumsum(h1[:, ::-1], axis=1)
    fps = np.cumsum(h0[:, ::-1], axis=1)
    n_pos, n_neg = tps[:, -1], fps[:, -1]
    areas = [*CURVE_METRICS, *(("calibrated_auc_pr",) if pi0 is not None else ())]
    out = row_areas(areas, tps, fps, 0.5 if pi0 is None else pi0)
    out["prior"] = n_pos / (n_pos + n_neg)
    first_bins = np.searchsorted(np.asarray(edges, dtype=np.float64), thresholds)
    for i, (threshold, first) in enumerate(zip(thresholds, first_bins, strict=True)):
        suffix = "" if i == 0 else threshold_suffix(threshold)
        tp, fp = h1[:, first:].sum(axis=1), h0[:, first:].sum(axis=1)
        cells = (tp, fp, n_pos - tp, n_neg - fp)
        with np.errstate(invalid="ignore", divide="ignore"):
            for name, metric in LABELING_METRICS.items():
                out[name + suffix] = metric.func(*cells)
            if pi0 is not None:
                ref = ConfusionCounts.from_rates(pi0, fp / n_neg, cells[2] / n_pos)
                for name in PRIOR_DEPENDENT:
                    out[f"calibrated_{name}{suffix}"] = LABELING_METRICS[name].func(
                        ref.tp, ref.fp, ref.fn, ref.tn
                    )
            if cost_ratio is not None:
                out["weighted_accuracy" + suffix] = weighted_accuracy_from_counts(
                    *cells, cost_ratio
                )
    return out

"""Metrics at a reference prior pi0 (spec section 3): calibrated and class-balanced.

A prior-dependent labeling metric M(pi, alpha, beta) is read at pi0 instead of
the data's prior: M@pi0 = M(pi0, alpha, beta), what the metric would be if the
class mix were pi0 and the error rates unchanged. Nothing is re-derived here:
the registry's functions are evaluated on ``ConfusionCounts.at_prior(pi0)``
and the curve areas on the curve's counts at pi0.

Class-balanced measures (Skrabanek et al.) are the case pi0 = 1/2.
"""

from __future__ import annotations

import numpy as np

from app.metrics.areas import average_precision_from_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.curves import CurveCounts
from app.metrics.labeling import (
    CALIBRATED_PREFIX,
    LABELING_METRICS,
    PRIOR_DEPENDENT,
    labeling_metrics_of,
)
from app.metrics.validation import check_probability

BALANCED_PRIOR = 0.5
"""The reference prior of the class-balanced measures."""


def _at_prior(counts: ConfusionCounts, pi0: float, prefix: str) -> dict[str, float | None]:
    return _prefixed(labeling_metrics_of([counts.at_prior(pi0)], PRIOR_DEPENDENT)[0], prefix)


def _prefixed(metrics: dict[str, float | None], prefix: str) -> dict[str, float | None]:
    return {f"{prefix}{name}": value for name, value in metrics.items()}


def labeling_and_calibrated_metrics(
    counts: ConfusionCounts, pi0: float
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """``labeling_metrics(counts)`` and ``calibrated_metrics(counts, pi0)``, each metric
    evaluated once on both matrices (the same values)."""
    ref = counts.at_prior(check_probability("pi0", pi0))
    raw, at_pi0 = labeling_metrics_of([counts, ref], LABELING_METRICS)
    return raw, _prefixed({name: at_pi0[name] for name in PRIOR_DEPENDENT}, CALIBRATED_PREFIX)


def calibrated_metrics(counts: ConfusionCounts, pi0: float) -> dict[str, float | None]:
    """Every prior-dependent labeling metric at reference prior ``pi0``.

    Parameters
    ----------
    counts : ConfusionCounts
        The confusion matrix observed at the decision threshold.
    pi0 : float in (0, 1)
        Reference prior agreed with the client.

    Returns
    -------
    dict
        ``calibrated_<name>`` for every name in ``labeling.PRIOR_DEPENDENT``
        (``calibrated_precision``, ``calibrated_f1``, ``calibrated_mcc``, ...),
        ``None`` where undefined (always when the data have no positives or no
        negatives, since alpha or beta is then unknown). Independent of the
        data's own prior; equal to the raw metric when ``pi0`` is that prior.

    Examples
    --------
    >>> m = calibrated_metrics(ConfusionCounts(tp=8, fp=2, fn=2, tn=88), 0.1)
    >>> round(m["calibrated_precision"], 4)
    0.8
    """
    return _at_prior(counts, check_probability("pi0", pi0), CALIBRATED_PREFIX)


def class_balanced_metrics(counts: ConfusionCounts) -> dict[str, float | None]:
    """Every prior-dependent labeling metric at pi0 = 1/2 (class-balanced measures).

    Returns
    -------
    dict
        ``balanced_<name>`` for every name in ``labeling.PRIOR_DEPENDENT``:
        balanced precision, balanced F-score (``balanced_f1``), balanced error
        rate (``balanced_error_rate``), ... ``balanced_accuracy`` here is
        (TPR + TNR)/2, the same value as the registry's prior-invariant
        ``balanced_accuracy``, so the two names never disagree.
    """
    return _at_prior(counts, BALANCED_PRIOR, "balanced_")


def calibrated_average_precision(curve: CurveCounts, pi0: float) -> float:
    """AUC-PR at reference prior ``pi0`` (calibrated AUC-PR).

    The average precision of the (recall, precision at pi0) curve, with
    precision at pi0 = pi0·TPR / (pi0·TPR + (1 − pi0)·FPR) at every threshold:
    ``average_precision_from_counts(pi0·TPR, (1 − pi0)·FPR)``, the same
    integration rule as the raw AUC-PR. nan when the curve has no positives or
    no negatives.
    """
    tps, fps = curve.counts_at_prior(check_probability("pi0", pi0))
    if not (np.all(np.isfinite(tps)) and np.all(np.isfinite(fps))):
        return float("nan")
    return float(average_precision_from_counts(tps, fps))

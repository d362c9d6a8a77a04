"""Attribution of a metric's change to the prior and to the likelihood.

A prior-dependent metric of a window is a function M(L, pi) of the per-class
score distributions L = (P(s|y=1), P(s|y=0)), read off the per-class
histograms, and of the prior pi. Against the reference (L_r, pi_r), the change
of a window (L_w, pi_w) splits into::

    prior      = M(L_r, pi_w) - M(L_r, pi_r)    what the new class mix alone does
    likelihood = M(L_w, pi_w) - M(L_r, pi_w)    what the classifier's change does
    total      = prior + likelihood = M(L_w, pi_w) - M(L_r, pi_r)

M(L, pi) for AUC-PR is the average precision of the normalised cumulative
counts ``(pi TPR, (1 - pi) FPR)``; for a labeling metric at the decision
threshold it is the metric of ``ConfusionCounts.from_rates(pi, alpha, beta)``
with the error rates of L at that threshold. At the window's own (L_w, pi_w)
and the reference's own (L_r, pi_r) these are the ordinary raw metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.drift.histograms import WindowHistograms
from app.drift.settings import DriftSettings
from app.errors import InvalidInput
from app.metrics.curves import CurveCounts, average_precision_from_counts
from app.metrics.labeling import LABELING_METRICS
from app.metrics.undefined import to_optional
from app.statuses import DriftStatus

ATTRIBUTED_LABELING_METRICS: tuple[str, ...] = ("precision", "f1")
"""Labeling metrics attributed by default, at the model's decision threshold."""

MetricAtPrior = Callable[[CurveCounts, float], float]


@dataclass(frozen=True, slots=True)
class MetricAttribution:
    """The change of one metric, window against reference, split in two parts.

    Attributes
    ----------
    status : str
        ``"ok"``, or ``"insufficient_data"`` when the window or the reference
        has fewer than ``min_class_count`` of a class. When only the window
        lacks them, ``prior`` (which needs only the window's prior) is still
        given; ``window``, ``likelihood`` and ``total`` are nan.
    reference : float
        M(L_r, pi_r), the metric of the reference.
    reference_at_window_prior : float
        M(L_r, pi_w), the reference classifier at the window's class mix.
    window : float
        M(L_w, pi_w), the metric of the window.
    prior, likelihood, total : float
        The parts of the change and their sum; nan where undefined (serialised
        as ``None``).
    """

    status: str
    reference: float
    reference_at_window_prior: float
    window: float
    prior: float
    likelihood: float
    total: float

    def to_dict(self) -> dict[str, Any]:
        """JSON shape: ``{"total", "prior", "likelihood", "reference", "window", ...}``."""
        return {
            "status": self.status,
            "total": to_optional(self.total),
            "prior": to_optional(self.prior),
            "likelihood": to_optional(self.likelihood),
            "reference": to_optional(self.reference),
            "reference_at_window_prior": to_optional(self.reference_at_window_prior),
            "window": to_optional(self.window),
        }


def _auc_pr_at(curve: CurveCounts, prior: float) -> float:
    return float(average_precision_from_counts(*curve.counts_at_prior(prior)))


def _labeling_at(name: str, threshold: float) -> MetricAtPrior:
    func = LABELING_METRICS[name].func

    def at(curve: CurveCounts, prior: float) -> float:
        c = curve.confusion_at(threshold).at_prior(prior)
        return float(func(c.tp, c.fp, c.fn, c.tn))

    return at


def _at(metric: MetricAtPrior, curve: CurveCounts | None, prior: float) -> float:
    """M(curve's likelihood, prior); nan when the curve is missing or pi is 0 or 1."""
    if curve is None or not 0.0 < prior < 1.0:
        return float("nan")
    return metric(curve, prior)


def attribute_changes(
    reference: WindowHistograms,
    window: WindowHistograms,
    *,
    threshold: float,
    settings: DriftSettings,
    labeling_metrics: Sequence[str] = ATTRIBUTED_LABELING_METRICS,
) -> dict[str, MetricAttribution]:
    """Split the change of AUC-PR and of labeling metrics into prior and likelihood parts.

    Parameters
    ----------
    reference, window : WindowHistograms
        Over the same edges (the caller checks it).
    threshold : float
        The decision threshold; must be one of the edges, so that the
        confusion matrices are exact.
    settings : DriftSettings
        ``min_class_count`` is used.
    labeling_metrics : sequence of str
        Names in ``app.metrics.labeling.LABELING_METRICS``.

    Returns
    -------
    dict
        ``"auc_pr"`` then each labeling metric, mapped to its
        :class:`MetricAttribution`.

    Examples
    --------
    >>> edges = [0.0, 0.5, 1.0]
    >>> ref = WindowHistograms([20, 80], [800, 100], edges)
    >>> win = WindowHistograms([10, 40], [850, 100], edges)
    >>> a = attribute_changes(ref, win, threshold=0.5, settings=DriftSettings(min_class_count=1))
    >>> a["precision"].total == a["precision"].prior + a["precision"].likelihood
    True
    """
    if not np.any(reference.edges == threshold):
        raise InvalidInput("threshold", f"is {threshold!r}, which is not one of the bin edges")
    unknown = [m for m in labeling_metrics if m not in LABELING_METRICS]
    if unknown:
        raise InvalidInput("labeling_metrics", f"unknown metric(s) {unknown}")
    metrics: dict[str, MetricAtPrior] = {"auc_pr": _auc_pr_at}
    metrics.update({name: _labeling_at(name, threshold) for name in labeling_metrics})

    least = settings.min_class_count
    if min(reference.n_positives, reference.n_negatives) < least:
        nan = float("nan")
        return {
            name: MetricAttribution(DriftStatus.INSUFFICIENT_DATA, *[nan] * 6) for name in metrics
        }
    window_ok = min(window.n_positives, window.n_negatives) >= least
    curve_r = reference.curve()
    curve_w = window.curve() if window_ok else None
    pi_r, pi_w = reference.prior, window.prior
    return {
        name: _split(
            DriftStatus.OK if window_ok else DriftStatus.INSUFFICIENT_DATA,
            _at(metric, curve_r, pi_r),
            _at(metric, curve_r, pi_w),
            _at(metric, curve_w, pi_w),
        )
        for name, metric in metrics.items()
    }


def _split(status: str, reference: float, mid: float, window: float) -> MetricAttribution:
    prior, likelihood = mid - reference, window - mid
    return MetricAttribution(status, reference, mid, window, prior, likelihood, prior + likelihood)


def attribution_to_dict(attribution: Mapping[str, MetricAttribution]) -> dict[str, Any]:
    """JSON shape of an attribution: metric name -> ``MetricAttribution.to_dict()``."""
    return {name: a.to_dict() for name, a in attribution.items()}

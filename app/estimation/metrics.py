"""Every metric of a window without labels, from the reference's rates and the estimated prior.

Under a pure prior shift the reference's true- and false-positive rates hold
in the window at every threshold, so a window of N examples at prior pi has
the expected cumulative counts ``N pi TPR_ref(t)`` and ``N (1 - pi)
FPR_ref(t)`` at every bin edge t: the reference's curve re-weighted to pi.
The metric set is then that of :func:`app.metrics.evaluate.evaluate_counts`
on this curve and its matrices at the model's thresholds: the labeling
metrics from the expected confusion matrices, the curve metrics of the
re-weighted curve (AUC-PR and lift move with pi, AUC-ROC and KS do not), the
calibrated metrics at pi0 (those of the reference, since the rates are) and
the outperformance scores at pi.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.estimation.reference import MixtureReference
from app.metrics.curves import CurveCounts
from app.metrics.evaluate import evaluate_at_thresholds, evaluate_counts


def mixture_curve(reference: MixtureReference, prior: float, n: float) -> CurveCounts:
    """The reference curve re-weighted to ``prior`` over ``n`` examples (expected counts).

    Parameters
    ----------
    reference : MixtureReference
    prior : float in [0, 1]
    n : float
        Examples in the window (> 0).

    Returns
    -------
    CurveCounts
        Thresholds of the reference curve; ``tps = n prior TPR``,
        ``fps = n (1 - prior) FPR``.
    """
    ref = reference.curve
    return CurveCounts(
        thresholds=ref.thresholds,
        tps=n * prior * ref.tps / ref.positives,
        fps=n * (1.0 - prior) * ref.fps / ref.negatives,
    )


def estimated_metrics(
    reference: MixtureReference,
    prior: float,
    n: float,
    thresholds: Sequence[float],
    *,
    pi0: float | None = None,
    cost_ratio: float | None = None,
) -> dict[str, float | None]:
    """The metrics of a window of ``n`` examples at ``prior``, named as the labelled ones.

    Parameters
    ----------
    reference : MixtureReference
    prior : float in [0, 1]
        The window's prior (the estimate pi_hat).
    n : float
        Examples in the window.
    thresholds : sequence of float
        The model's thresholds, primary first; each should be a bin edge.
    pi0, cost_ratio : float, optional
        As in :func:`~app.metrics.evaluate.evaluate_counts`.

    Returns
    -------
    dict
        The keys of ``evaluate_counts`` with a curve and without probability
        sums (so no ``brier`` or ``log_loss``) at the primary threshold, and
        those of :func:`~app.metrics.evaluate.evaluate_at_thresholds` at the
        others; ``None`` where undefined (e.g. the class-specific metrics
        at a prior of exactly 0 or 1).
    """
    curve = mixture_curve(reference, prior, n)
    options = {"pi0": pi0, "cost_ratio": cost_ratio}
    out = evaluate_counts(curve, curve.confusion_at(thresholds[0]), None, **options)
    others = thresholds[1:]
    out.update(evaluate_at_thresholds(others, [curve.confusion_at(t) for t in others], **options))
    return out

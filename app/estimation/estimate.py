"""The label-free estimate of one window: prior, metrics, fit, verdict (one call).

:func:`estimate_window` puts the pieces together for a window's unlabelled
score histogram against a :class:`~app.estimation.reference.MixtureReference`:

1. the maximum-likelihood prior pi_hat on the groups, its profile-likelihood
   interval (widened by the reference's share of the estimate's variance) and
   the adjusted count at the primary threshold;
2. every metric at pi_hat (:mod:`app.estimation.metrics`);
3. the goodness-of-fit test of the mixture (:mod:`app.estimation.fit`), the
   specification test of pi_hat against the adjusted counts at the model's
   thresholds (:mod:`app.estimation.specification`) and the likelihood-ratio
   test of "the prior is the reference's";
4. the verdict at the model's drift alpha: ``likelihood`` when the fit test
   or the specification test rejects at alpha / 2 (the scores moved in a way
   no prior explains, so the estimate is unreliable; alpha / 2 each keeps the
   pair's false-alarm rate at most alpha), else ``prior`` when the prior test
   rejects and pi_hat moved by more than the minimum prior effect, else
   ``none``.

The likelihood is maximised over the smoothed group probabilities of the
reference; its maximiser, interval and null value are carried by one affine
map (:func:`~app.estimation.sampling.debiasing_map`) to the raw frequencies'
scale, which removes the pseudo-count's bias, and corrected for the
reference's errors in variables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.drift.histograms import FloatArray
from app.drift.settings import DriftSettings
from app.estimation.fit import MixtureFitTest, mixture_fit_test
from app.estimation.metrics import estimated_metrics
from app.estimation.prior import (
    adjusted_count_prior,
    equal_prior_p_value,
    ml_prior,
    profile_interval,
    unconstrained_prior,
)
from app.estimation.reference import MixtureReference
from app.estimation.sampling import GroupedSampling, debiasing_map
from app.estimation.specification import SpecificationTest, specification_test
from app.metrics.curves import cumulative_counts_from_histograms
from app.metrics.uncertainty import INTERVAL_LEVEL
from app.metrics.validation import check_probability
from app.statuses import DriftStatus, DriftVerdict

LIKELIHOOD_SHIFT = "likelihood_shift"
"""``unreliable_reason`` when the fit is rejected."""
TOO_FEW_GROUPS = "too_few_groups"
"""``unreliable_reason`` when the reference fills fewer than 3 groups (no fit test)."""


@dataclass(frozen=True)
class PriorEstimate:
    """The prior of one window from its unlabelled scores, and what it says.

    Attributes
    ----------
    n : float
        Unlabelled examples in the window.
    value, lower, upper : float
        pi_hat and its interval at ``level``.
    level : float
        Coverage of the interval.
    bbse : float | None
        The adjusted-count prior at the primary threshold (``None`` when the
        reference's TPR equals its FPR there).
    reference_prior : float
        The reference's prior (positives over examples).
    p_value : float | None
        Likelihood-ratio test of ``pi = reference_prior``, with the
        reference's sampling error (of its class shapes and of its prior);
        ``None`` when not tested.
    fit : MixtureFitTest
        Goodness-of-fit of the mixture (``p_value`` None when not tested).
    specification : SpecificationTest
        pi_hat against the adjusted counts at the thresholds (``p_value``
        None when not tested).
    status : DriftStatus
        ``ok``, or ``insufficient_data`` when the window or a reference class
        holds fewer than ``min_class_count`` examples (nothing tested).
    verdict : DriftVerdict
        ``none``, ``prior`` or ``likelihood`` (the drift verdict's vocabulary,
        from the unlabelled scores alone).
    unreliable_reason : str | None
        ``"likelihood_shift"``, ``"insufficient_data"`` or
        ``"too_few_groups"``; ``None`` when the fit was tested and holds.
    """

    n: float
    value: float
    lower: float
    upper: float
    level: float
    bbse: float | None
    reference_prior: float
    p_value: float | None
    fit: MixtureFitTest
    specification: SpecificationTest
    status: DriftStatus
    verdict: DriftVerdict
    unreliable_reason: str | None

    @property
    def reliable(self) -> bool:
        """The fit was tested and not rejected."""
        return self.unreliable_reason is None


@dataclass(frozen=True)
class LabelFreeEstimate:
    """The label-free estimate of one window: its prior and every metric at it.

    Attributes
    ----------
    prior : PriorEstimate
    metrics : dict of str to float or None
        Every metric at pi_hat, names as in the labelled window.
    """

    prior: PriorEstimate
    metrics: dict[str, float | None]

    @property
    def reliable(self) -> bool:
        """The fit was tested and not rejected."""
        return self.prior.reliable

    def to_document(self) -> dict[str, Any]:
        """JSON shape: ``{"n", "prior", "metrics", "fit", "reliable", "unreliable_reason"}``.

        ``prior`` is ``{"value", "lower", "upper", "level", "bbse", "p_value",
        "reference"}``; ``fit`` is ``{"p_value", "statistic", "df", "verdict",
        "status"}``.
        """
        p = self.prior
        return {
            "n": p.n,
            "prior": {
                "value": p.value,
                "lower": p.lower,
                "upper": p.upper,
                "level": p.level,
                "bbse": p.bbse,
                "p_value": p.p_value,
                "reference": p.reference_prior,
            },
            "metrics": dict(self.metrics),
            "fit": {
                "p_value": p.fit.p_value,
                "statistic": p.fit.statistic,
                "df": p.fit.df,
                "specification_p_value": p.specification.p_value,
                "specification_statistic": p.specification.statistic,
                "specification_df": p.specification.df,
                "verdict": str(p.verdict),
                "status": str(p.status),
            },
            "reliable": p.reliable,
            "unreliable_reason": p.unreliable_reason,
        }


def estimate_prior(
    reference: MixtureReference,
    unlabelled: object,
    *,
    threshold: float,
    settings: DriftSettings | None = None,
    level: float = INTERVAL_LEVEL,
    thresholds: Sequence[float] | None = None,
) -> PriorEstimate:
    """Estimate a window's prior from its unlabelled scores and test the mixture.

    Parameters
    ----------
    reference : MixtureReference
        The reference period (the model's drift reference, same segment).
    unlabelled : array_like of shape (J,)
        The window's unlabelled examples per bin of the model (not all zero).
    threshold : float
        The primary threshold (of the adjusted count).
    settings : DriftSettings, optional
        ``alpha`` of the tests, ``min_prior_effect`` of the prior verdict and
        ``min_class_count`` of the window and of each reference class.
    level : float in (0, 1)
        Coverage of the prior's interval.
    thresholds : sequence of float, optional
        Every threshold of the model, for the specification test; default
        ``(threshold,)``.

    Returns
    -------
    PriorEstimate
    """
    settings = settings if settings is not None else DriftSettings()
    level = check_probability("level", level)
    u = reference.check_unlabelled(unlabelled)
    counts = reference.grouped(u)
    n = float(counts.sum())
    f1, f0 = reference.f_positive, reference.f_negative
    smoothed = ml_prior(counts, f1, f0)
    sampling = GroupedSampling.at(reference, smoothed, n)
    v_window, v_reference = sampling.window_variance, sampling.reference_variance
    lower, upper = profile_interval(
        counts, f1, f0, smoothed, level=level, scale=v_window / (v_window + v_reference)
    )
    offset, slope = debiasing_map(reference, smoothed)
    prior = _clip(offset + slope * smoothed)
    ref_prior = reference.prior
    enough = (
        n >= settings.min_class_count
        and min(reference.n_positives, reference.n_negatives) >= settings.min_class_count
    )
    if enough:
        v_prior = ref_prior * (1.0 - ref_prior) / (reference.n_positives + reference.n_negatives)
        prior_p: float | None = equal_prior_p_value(
            counts,
            f1,
            f0,
            smoothed,
            _clip((ref_prior - offset) / slope),
            scale=v_window / (v_window + v_reference + v_prior / slope**2),
        )
        fit = mixture_fit_test(counts, sampling)
        spec = specification_test(
            reference,
            u,
            sampling.influence * slope,
            offset + slope * unconstrained_prior(counts, f1, f0, smoothed),
            (threshold,) if thresholds is None else thresholds,
        )
    else:
        prior_p, fit = None, MixtureFitTest(None, max(reference.n_groups - 2, 0), None)
        spec = SpecificationTest(None, 0, None)
    verdict, reason = _verdict(settings, fit, spec, prior_p, abs(prior - ref_prior), enough)
    return PriorEstimate(
        n=n,
        value=prior,
        lower=_clip(offset + slope * lower),
        upper=_clip(offset + slope * upper),
        level=level,
        bbse=_adjusted_count(reference, u, threshold),
        reference_prior=ref_prior,
        p_value=prior_p,
        fit=fit,
        specification=spec,
        status=DriftStatus.OK if enough else DriftStatus.INSUFFICIENT_DATA,
        verdict=verdict,
        unreliable_reason=reason,
    )


def estimate_window(
    reference: MixtureReference,
    unlabelled: object,
    *,
    thresholds: Sequence[float],
    pi0: float | None = None,
    cost_ratio: float | None = None,
    settings: DriftSettings | None = None,
    level: float = INTERVAL_LEVEL,
) -> LabelFreeEstimate:
    """Estimate a window's prior and every metric from its unlabelled scores.

    Parameters
    ----------
    reference, unlabelled, settings, level
        As in :func:`estimate_prior`.
    thresholds : sequence of float
        The model's thresholds, primary first.
    pi0, cost_ratio : float, optional
        As in :func:`app.metrics.evaluate.evaluate_counts`.

    Returns
    -------
    LabelFreeEstimate

    Examples
    --------
    >>> import numpy as np
    >>> from app.drift.simulation import BinormalStream
    >>> from app.metrics.binning import default_bin_edges
    >>> stream = BinormalStream(default_bin_edges(), mu_positive=0.0, mu_negative=-1.5)
    >>> rng = np.random.default_rng(0)
    >>> reference = MixtureReference.from_histograms(stream.window(rng, n=100_000, prior=0.1))
    >>> w = stream.window(rng, n=10_000, prior=0.03)
    >>> est = estimate_window(reference, w.positives + w.negatives, thresholds=[0.5])
    >>> round(est.prior.value, 2), est.prior.verdict.value, est.reliable
    (0.03, 'prior', True)
    """
    prior = estimate_prior(
        reference,
        unlabelled,
        threshold=thresholds[0],
        settings=settings,
        level=level,
        thresholds=thresholds,
    )
    metrics = estimated_metrics(
        reference, prior.value, prior.n, thresholds, pi0=pi0, cost_ratio=cost_ratio
    )
    return LabelFreeEstimate(prior, metrics)


def _verdict(
    settings: DriftSettings,
    fit: MixtureFitTest,
    spec: SpecificationTest,
    prior_p: float | None,
    prior_change: float,
    enough: bool,
) -> tuple[DriftVerdict, str | None]:
    if not enough:
        return DriftVerdict.NONE, DriftStatus.INSUFFICIENT_DATA.value
    half = settings.alpha / 2.0
    if any(p is not None and p < half for p in (fit.p_value, spec.p_value)):
        return DriftVerdict.LIKELIHOOD, LIKELIHOOD_SHIFT
    reason = TOO_FEW_GROUPS if fit.p_value is None else None
    if (
        prior_p is not None
        and prior_p < settings.alpha
        and prior_change > settings.min_prior_effect
    ):
        return DriftVerdict.PRIOR, reason
    return DriftVerdict.NONE, reason


def _clip(prior: float) -> float:
    return min(max(prior, 0.0), 1.0)


def _adjusted_count(reference: MixtureReference, u: FloatArray, threshold: float) -> float | None:
    at_ref = reference.curve.confusion_at(threshold)
    share = cumulative_counts_from_histograms(u, 0.0 * u, reference.edges).confusion_at(threshold)
    return adjusted_count_prior(share.tp / share.n, 1.0 - at_ref.beta, at_ref.alpha)

"""The drift verdict of one window against its model's reference period."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.drift.attribution import MetricAttribution, attribute_changes, attribution_to_dict
from app.drift.histograms import WindowHistograms
from app.drift.likelihood import LikelihoodShiftTest, likelihood_shift_test
from app.drift.prior import PriorShiftTest, prior_shift_test
from app.drift.settings import DriftSettings
from app.errors import InvalidInput
from app.statuses import DriftStatus, DriftVerdict

VERDICTS: tuple[DriftVerdict, ...] = (
    DriftVerdict.NONE,
    DriftVerdict.PRIOR,
    DriftVerdict.LIKELIHOOD,
    DriftVerdict.BOTH,
)
"""Every verdict :func:`drift_verdict` can give (the service adds ``DriftVerdict.REFERENCE``).

A flag is raised only by a test that ran: when neither part could be tested
the verdict is ``"none"`` and ``status`` says ``"insufficient_data"``."""


@dataclass(frozen=True, slots=True)
class DriftResult:
    """Drift verdict of a window: what moved, how surely, how much, and what it cost.

    Attributes
    ----------
    verdict : str
        ``"none"``, ``"prior"``, ``"likelihood"`` or ``"both"`` from the flags
        of the parts that could be tested (``"none"`` when neither could).
    status : str
        ``"ok"`` when at least one part was tested, else ``"insufficient_data"``.
    prior : PriorShiftTest
    likelihood : LikelihoodShiftTest
    attribution : mapping of str to MetricAttribution
        ``"auc_pr"``, ``"precision"``, ``"f1"``.
    """

    verdict: str
    status: str
    prior: PriorShiftTest
    likelihood: LikelihoodShiftTest
    attribution: Mapping[str, MetricAttribution]

    def to_dict(self) -> dict[str, Any]:
        """The contract's JSON shape.

        ``{"verdict", "status", "prior": {"p_value", "effect", ...}, "likelihood":
        {"p_value", "effect", "per_class": {...}}, "attribution": {"auc_pr":
        {"total", "prior", "likelihood"}, "precision": {...}, "f1": {...}}}``
        """
        return {
            "verdict": self.verdict,
            "status": self.status,
            "prior": self.prior.to_dict(),
            "likelihood": self.likelihood.to_dict(),
            "attribution": attribution_to_dict(self.attribution),
        }


def _status(prior: PriorShiftTest, likelihood: LikelihoodShiftTest) -> str:
    return (
        DriftStatus.OK
        if DriftStatus.OK in (prior.status, likelihood.status)
        else DriftStatus.INSUFFICIENT_DATA
    )


def _verdict(prior: PriorShiftTest, likelihood: LikelihoodShiftTest) -> str:
    return {
        (False, False): DriftVerdict.NONE,
        (True, False): DriftVerdict.PRIOR,
        (False, True): DriftVerdict.LIKELIHOOD,
        (True, True): DriftVerdict.BOTH,
    }[(prior.flag is True, likelihood.flag is True)]


def drift_verdict(
    reference: WindowHistograms,
    window: WindowHistograms,
    *,
    threshold: float,
    settings: DriftSettings | None = None,
    whole: WindowHistograms | None = None,
) -> DriftResult:
    """Test a window against its reference for prior and likelihood shift.

    Parameters
    ----------
    reference : WindowHistograms
        The reference period: the sum of its windows' histograms
        (:meth:`WindowHistograms.pooled`).
    window : WindowHistograms
        The window under test, over the same edges.
    threshold : float
        The model's decision threshold, one of the edges (for the attribution
        of precision and F1).
    settings : DriftSettings, optional
        Defaults to ``DriftSettings()``.
    whole : WindowHistograms, optional
        The whole window when ``window`` is only its labelled part (a partially
        labelled window completed under the class assumption: the labelled
        rows hold its class-conditional score distributions, not its prior):
        the prior test and the attribution read it, the likelihood test
        ``window``. Default ``window``.

    Returns
    -------
    DriftResult

    Examples
    --------
    >>> edges = [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> ref = WindowHistograms([50, 100, 300, 550], [5000, 3000, 800, 200], edges)
    >>> win = WindowHistograms([40, 80, 240, 440], [500, 300, 80, 20], edges)
    >>> print(drift_verdict(ref, win, threshold=0.5).verdict)
    prior
    """
    settings = settings or DriftSettings()
    whole = window if whole is None else whole
    if not (
        np.array_equal(reference.edges, window.edges) and np.array_equal(whole.edges, window.edges)
    ):
        raise InvalidInput("window.edges", "must equal the reference's bin edges")
    prior = prior_shift_test(
        reference.n_positives,
        reference.n_negatives,
        whole.n_positives,
        whole.n_negatives,
        settings,
    )
    likelihood = likelihood_shift_test(reference, window, settings)
    attribution = attribute_changes(reference, whole, threshold=threshold, settings=settings)
    return DriftResult(
        _verdict(prior, likelihood), _status(prior, likelihood), prior, likelihood, attribution
    )

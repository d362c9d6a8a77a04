"""Drift verdicts, pure: prior shift, likelihood shift, attribution of metric changes.

Imports only numpy, scipy, the standard library and :mod:`app.metrics`. The
entry point is :func:`drift_verdict`; docs/drift.md explains the tests.
"""

from app.drift.attribution import MetricAttribution, attribute_changes
from app.drift.histograms import WindowHistograms
from app.drift.likelihood import ClassShiftTest, LikelihoodShiftTest, likelihood_shift_test
from app.drift.prior import PriorShiftTest, prior_shift_test
from app.drift.settings import DriftSettings
from app.drift.verdict import VERDICTS, DriftResult, drift_verdict

__all__ = [
    "VERDICTS",
    "ClassShiftTest",
    "DriftResult",
    "DriftSettings",
    "LikelihoodShiftTest",
    "MetricAttribution",
    "PriorShiftTest",
    "WindowHistograms",
    "attribute_changes",
    "drift_verdict",
    "likelihood_shift_test",
    "prior_shift_test",
]

"""Label-free estimation: the prior and every metric of a window whose labels have not arrived.

Pure (numpy and scipy; no I/O). Build a :class:`MixtureReference` once from a
reference period's per-class histograms, then call :func:`estimate_window`
with each window's unlabelled histogram. docs/estimation.md explains the
method, its assumption (a pure prior shift) and how to read the result.
"""

from app.estimation.estimate import (
    INTERVAL_LEVEL,
    LabelFreeEstimate,
    PriorEstimate,
    estimate_prior,
    estimate_window,
)
from app.estimation.reference import GROUPS, PSEUDO_COUNT, GroupedClasses, MixtureReference

__all__ = [
    "GROUPS",
    "INTERVAL_LEVEL",
    "PSEUDO_COUNT",
    "GroupedClasses",
    "LabelFreeEstimate",
    "MixtureReference",
    "PriorEstimate",
    "estimate_prior",
    "estimate_window",
]

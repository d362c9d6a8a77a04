"""Every status and verdict vocabulary of priorwatch, one enum each.

The members are :class:`enum.StrEnum`: each *is* its string value, so JSON
documents, CSV reports and the Prometheus exposition are written exactly as
with plain strings, and a stored or received string compares equal to its
member. The module has no dependencies; the pure packages import it.

Examples
--------
>>> SlaStatus.MET == "met", f"{DriftVerdict.BOTH}", str(WindowState.PENDING)
(True, 'both', 'pending')
"""

from __future__ import annotations

from enum import StrEnum


class StoredStatus(StrEnum):
    """``window_metrics.status``: how a stored result relates to its aggregate."""

    FRESH = "fresh"
    """Computed from the aggregate's version that was current when it was written."""
    STALE = "stale"
    """Computed from an older version (a batch arrived during the computation).
    No longer written since batches are folded by the worker; rows stored
    before may still hold it, and reads treat it as not fresh."""
    ERROR = "error"
    """The computation failed; the window is retried only when marked again."""


class WindowState(StrEnum):
    """A window's ``status`` in the API: is its result the current one?"""

    FRESH = "fresh"
    """The result is current (or the window was merged and computed now)."""
    PENDING = "pending"
    """The worker has not refreshed the window yet; the last result, if any, is older."""


class SlaStatus(StrEnum):
    """Status of an SLA objective in a window, and of a window in the SLA report."""

    MET = "met"
    """The whole credible interval (or, on point evidence, the value) meets the target."""
    BREACHED = "breached"
    """The whole credible interval (or, on point evidence, the value) misses the target."""
    INCONCLUSIVE = "inconclusive"
    """The credible interval holds values on both sides of the target, or is missing."""
    INSUFFICIENT_DATA = "insufficient_data"
    """The metric is undefined, or a class has too few examples."""
    PENDING = "pending"
    """The window waits for the worker, or the interval deciding an objective is not of its
    current data yet (its detail follows its summary); it counts in no ratio."""
    NO_OBJECTIVES = "no_objectives"
    """The model has no objectives (a window's status only)."""


class DriftVerdict(StrEnum):
    """The ``verdict`` of a window's drift test: what moved against the reference."""

    NONE = "none"
    """Nothing flagged, or nothing could be tested (``status`` says why)."""
    PRIOR = "prior"
    LIKELIHOOD = "likelihood"
    BOTH = "both"
    REFERENCE = "reference"
    """The window belongs to the reference period itself (set by the service)."""


class DriftStatus(StrEnum):
    """Whether a drift test (or a part of it) could run."""

    OK = "ok"
    INSUFFICIENT_DATA = "insufficient_data"
    """A class has fewer than ``min_class_count`` examples, or the reference is empty."""
    NO_REFERENCE = "no_reference"
    """The model has no drift reference: nothing is tested (set by the service)."""

"""The stored document of a window (``window_metrics``) from a computed result.

A full result (both tiers, :attr:`WindowResult.detail`) is stored as it is,
its detail stamped with the version and time of the result. A summary
result keeps the previous detail: the curves and the intervals of
:data:`~app.services.sla_objectives.DETAIL_INTERVALS` of the stored
document, with their own stamp (the version and time they were computed
from), except the intervals of metrics that are now None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.services.sla_objectives import DETAIL_INTERVALS
from app.services.window_compute import WindowResult


@dataclass(frozen=True)
class StoredDetail:
    """The detail tier of the stored document: curves, intervals and their stamp."""

    intervals: Mapping[str, Any]
    curves: dict[str, Any] | None
    version: int
    computed_at: datetime


def window_document(
    result: WindowResult,
    previous: StoredDetail | None,
    *,
    version: int,
    computed_at: datetime,
) -> dict[str, Any]:
    """The columns of ``window_metrics`` for ``result``, computed from aggregate ``version``.

    Parameters
    ----------
    result : WindowResult
        A full or a summary result.
    previous : StoredDetail or None
        The stored detail (read only for a summary result; None: none stored).
    """
    document: dict[str, Any] = {
        "metrics": result.metrics,
        "reasons": result.reasons,
        "intervals": result.intervals,
        "drift": result.drift,
        "curves": result.curves,
        "estimate": result.estimate,
        "detail_version": version,
        "detail_computed_at": computed_at,
    }
    if result.detail:
        return document
    if previous is None:
        document.update(detail_version=None, detail_computed_at=None)
        return document
    carried = {
        name: bounds
        for name, bounds in previous.intervals.items()
        if name in DETAIL_INTERVALS and result.metrics.get(name) is not None
    }
    document.update(
        intervals={**result.intervals, **carried},
        curves=previous.curves,
        detail_version=previous.version,
        detail_computed_at=previous.computed_at,
    )
    return document

"""The stored document of a window (``window_metrics``) from a computed result.

A full result (both tiers, :attr:`WindowResult.detail`) is stored as it is,
its detail stamped with the version and time of the result. A summary
result keeps the stored detail: the columns :data:`KEPT_BY_SUMMARY` (the
curves and the detail's stamp) are left as they are in the database, and
the intervals (all of the detail tier) are carried over from the stored
document, except those of metrics that are now None; so are the intervals
of the ``maturity`` document's completed metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.services.windows.compute import WindowResult

KEPT_BY_SUMMARY = ("curves", "detail_version", "detail_computed_at")
"""Columns of ``window_metrics`` a summary refresh leaves as they are stored (the
detail tier and its stamp; null where nothing is stored yet)."""


def window_document(
    result: WindowResult,
    stored_intervals: Mapping[str, Any] | None,
    stored_maturity: Mapping[str, Any] | None = None,
    *,
    version: int,
    computed_at: datetime,
) -> dict[str, Any]:
    """The columns of ``window_metrics`` for ``result``, computed from aggregate ``version``.

    Parameters
    ----------
    result : WindowResult
        A full or a summary result.
    stored_intervals : mapping or None
        The stored document's intervals (read only for a summary result; None:
        nothing stored).
    stored_maturity : mapping or None
        The stored ``maturity`` document, whose intervals a summary carries over.

    Returns
    -------
    dict
        Every column for a full result; without :data:`KEPT_BY_SUMMARY` for a
        summary (written with :func:`app.db.queue.upsert_window_metrics`'s
        ``keep``).
    """
    document: dict[str, Any] = {
        "metrics": result.metrics,
        "reasons": result.reasons,
        "intervals": result.intervals,
        "drift": result.drift,
        "estimate": result.estimate,
        "maturity": result.maturity,
    }
    if result.detail:
        document.update(
            curves=result.curves, detail_version=version, detail_computed_at=computed_at
        )
        return document
    document["intervals"] = _still_defined(stored_intervals, result.metrics)
    if result.maturity is not None and stored_maturity is not None:
        carried = _still_defined(stored_maturity.get("intervals"), result.maturity["metrics"])
        document["maturity"] = {**result.maturity, "intervals": carried}
    return document


def _still_defined(
    intervals: Mapping[str, Any] | None, metrics: Mapping[str, float | None]
) -> dict[str, Any]:
    """The ``intervals`` of the metrics that still have a value."""
    return {
        name: bounds for name, bounds in (intervals or {}).items() if metrics.get(name) is not None
    }

"""Window starts and timestamps as the service computes and writes them.

The client's copy of ``app.timegrid.window_start`` and
``isoformat_z`` (tests/unit/client/test_parity.py compares them): windows
are half-open UTC intervals whose starts are multiples of the length from
the Unix epoch ("1w": from Monday 1970-01-05).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

WINDOW_LENGTHS: dict[str, timedelta] = {
    "5m": timedelta(minutes=5),
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "1d": timedelta(days=1),
    "1w": timedelta(weeks=1),
}
"""The window lengths of the API, by name."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WEEK_ORIGIN = datetime(1970, 1, 5, tzinfo=UTC)


def window_start(event_at: datetime, window: str) -> datetime:
    """Start (UTC) of the ``window`` (a key of WINDOW_LENGTHS) containing aware ``event_at``.

    >>> window_start(datetime(2026, 3, 4, 10, 59, 59, tzinfo=UTC), "1h").isoformat()
    '2026-03-04T10:00:00+00:00'
    """
    if event_at.tzinfo is None or event_at.utcoffset() is None:
        raise ValueError("event_at must be timezone-aware")
    length = WINDOW_LENGTHS[window]
    origin = _WEEK_ORIGIN if window == "1w" else _EPOCH
    return origin + ((event_at.astimezone(UTC) - origin) // length) * length


def isoformat_z(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix, as the API writes timestamps.

    >>> isoformat_z(datetime(2026, 3, 4, 10, tzinfo=UTC))
    '2026-03-04T10:00:00Z'
    """
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")

"""Window lengths and how an event time maps to its window.

Windows are half-open UTC intervals [start, start + length). Starts are
multiples of the length counted from the Unix epoch (1970-01-01T00:00Z), so
"1h" windows start on the hour and "1d" windows at midnight UTC; "1w" windows
start on Mondays at 00:00 UTC (ISO weeks). Every length divides the next
longer one, so windows nest (5m -> 15m -> 1h -> 6h -> 1d -> 1w).
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
"""The accepted window lengths, by the name used in the API."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_WEEK_ORIGIN = datetime(1970, 1, 5, tzinfo=UTC)  # the first Monday after the epoch


def window_length(window: str) -> timedelta:
    """The length of ``window`` ("5m", "15m", "1h", "6h", "1d" or "1w").

    Raises
    ------
    KeyError
        For any other name (the API validates names before calling this).
    """
    return WINDOW_LENGTHS[window]


def window_start(event_at: datetime, window: str) -> datetime:
    """Start of the window of length ``window`` that contains ``event_at``.

    Parameters
    ----------
    event_at : datetime
        Timezone-aware event time (any offset; the result is UTC).
    window : str
        A key of :data:`WINDOW_LENGTHS`.

    Examples
    --------
    >>> window_start(datetime(2026, 3, 4, 10, 59, 59, tzinfo=UTC), "1h").isoformat()
    '2026-03-04T10:00:00+00:00'
    >>> window_start(datetime(2026, 3, 4, 10, 0, tzinfo=UTC), "1w").isoformat()
    '2026-03-02T00:00:00+00:00'
    """
    if event_at.tzinfo is None or event_at.utcoffset() is None:
        raise ValueError("event_at must be timezone-aware")
    length = window_length(window)
    origin = _WEEK_ORIGIN if window == "1w" else _EPOCH
    elapsed = event_at.astimezone(UTC) - origin
    return origin + (elapsed // length) * length


def window_end(start: datetime, window: str) -> datetime:
    """End (exclusive) of the window that starts at ``start``."""
    return start + window_length(window)


def isoformat_z(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix, as the API writes every timestamp.

    >>> isoformat_z(datetime(2026, 3, 4, 10, tzinfo=UTC))
    '2026-03-04T10:00:00Z'
    """
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")

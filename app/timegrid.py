"""The time grid: instants as the API reads them, window lengths, how an event
time maps to its window, and ranges of windows. A pure leaf (app.errors only),
shared by services, the exporter and the CLI.

Every instant the service takes (a batch ``timestamp``, the ``from``/``to``
of a read, a window ``start``, a drift reference period) goes through
:func:`parse_instant`: an ISO 8601 string (a time without an offset is taken
as UTC) or a number of seconds since the Unix epoch, converted to UTC and
kept within [:data:`EARLIEST`, :data:`LATEST`), so that the window arithmetic
done with it can never overflow (year 1 or 9999 with an offset used to give
a 500). Errors are :class:`InvalidInput` naming the field; a message that
suggests a time shows it URL-encoded when the value came from a query string.

Windows are half-open UTC intervals [start, start + length). Starts are
multiples of the length counted from the Unix epoch (1970-01-01T00:00Z), so
"1h" windows start on the hour and "1d" windows at midnight UTC; "1w" windows
start on Mondays at 00:00 UTC (ISO weeks). Every length divides the next
longer one, so windows nest (5m -> 15m -> 1h -> 6h -> 1d -> 1w).

The Python client keeps its own copy of :func:`window_start` and
:func:`isoformat_z` (priorwatch_client.windows), held equal by
tests/unit/client/test_parity.py.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from app.errors import InvalidInput

WINDOW_LENGTHS: dict[str, timedelta] = {
    "5m": timedelta(minutes=5),
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "1d": timedelta(days=1),
    "1w": timedelta(weeks=1),
}
"""The accepted window lengths, by the name used in the API."""

DEFAULT_WINDOW_COUNT = 100
"""Windows a read shows when ``from`` is omitted: ``from = to - 100 windows``."""

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


DURATION_PATTERN = r"^[1-9][0-9]{0,4}[hdw]$"
"""A duration setting (a model's ``retention``, ``label_horizon``): a positive whole
number of hours, days or weeks ("36h", "90d", "52w")."""

_DURATION_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


def parse_duration(text: str, field: str) -> timedelta:
    """The duration ``text`` names (:data:`DURATION_PATTERN`); InvalidInput naming ``field``.

    >>> parse_duration("90d", "retention")
    datetime.timedelta(days=90)
    """
    if re.fullmatch(DURATION_PATTERN, text) is None:
        raise InvalidInput(field, f"{text!r} is not a duration such as 36h, 90d or 52w")
    return int(text[:-1]) * _DURATION_UNITS[text[-1]]


def isoformat_z(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix, as the API writes every timestamp.

    >>> isoformat_z(datetime(2026, 3, 4, 10, tzinfo=UTC))
    '2026-03-04T10:00:00Z'
    """
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# --- instants (every date the API takes) ------------------------------------

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
"""The earliest accepted instant (the epoch windows are counted from)."""
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
"""Instants must be before this one (a year of room for window arithmetic)."""
EXAMPLE = datetime(2026, 11, 26, 10, tzinfo=UTC)
"""The instant error messages show as an example."""


def shown(moment: datetime, *, in_query: bool) -> str:
    """``moment`` as the caller should write it: ISO 8601 UTC, URL-encoded for a query."""
    text = isoformat_z(moment)
    return quote(text, safe="") if in_query else text


def parse_instant(value: Any, field: str, *, in_query: bool = False) -> datetime:
    """``value`` as a timezone-aware UTC datetime.

    Parameters
    ----------
    value : str, int, float or datetime
        ISO 8601 (no offset: UTC) or seconds since the epoch.
    field : str
        The field named in errors.
    in_query : bool
        The value came from a query string: examples in errors are URL-encoded.

    Raises
    ------
    InvalidInput
        Not a date-time, or outside [EARLIEST, LATEST).
    """
    example = shown(EXAMPLE, in_query=in_query)
    moment = _read(value, field, example)
    try:
        if moment is not None and (moment.tzinfo is None or moment.utcoffset() is None):
            moment = moment.replace(tzinfo=UTC)
        moment = moment.astimezone(UTC) if moment is not None else None
    except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00
        moment = None
    if moment is None or not EARLIEST <= moment < LATEST:
        raise InvalidInput(
            field,
            f"{value!r} is out of range: give an instant from {shown(EARLIEST, in_query=in_query)}"
            f" to before {shown(LATEST, in_query=in_query)}",
        )
    return moment


def _read(value: Any, field: str, example: str) -> datetime | None:
    """The instant written in ``value`` (maybe naive), or None when it cannot be represented."""
    if isinstance(value, datetime):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidInput(field, "must be a finite number of seconds since the epoch")
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        return _from_iso(value, field, example)
    raise InvalidInput(field, f"must be an ISO 8601 date-time, e.g. {example}, or epoch seconds")


def _from_iso(value: str, field: str, example: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        pass
    hint = ""
    if " " in value.strip():
        hint = " (a '+' in a query string must be sent as %2B, or it arrives as a space)"
    raise InvalidInput(
        field, f"{value!r} is not an ISO 8601 date-time, e.g. {example}{hint}"
    ) from None


# --- ranges of windows (reads) ----------------------------------------------


def check_granularity(window: str, granularity: str | None) -> str:
    """The window length to read: the model's own ``window``, or a longer one it divides.

    Parameters
    ----------
    window : str
        The model's window length name.
    granularity : str or None
        A window length name (``"5m"``, ``"15m"``, ``"1h"``, ``"6h"``, ``"1d"``,
        ``"1w"``); None means the model's window.

    Raises
    ------
    InvalidInput
        Unknown name, or not a whole multiple of the model's window.
    """
    if granularity is None:
        return window
    if granularity not in WINDOW_LENGTHS:
        names = ", ".join(WINDOW_LENGTHS)
        raise InvalidInput("granularity", f"{granularity!r} is not a window length ({names})")
    base, wanted = window_length(window), window_length(granularity)
    if wanted < base or wanted % base:
        raise InvalidInput(
            "granularity",
            f"must be a multiple of the model's window {window!r}, got {granularity!r}",
        )
    return granularity


@dataclass(frozen=True)
class WindowRange:
    """Windows of length ``granularity`` whose start lies in [start, end)."""

    start: datetime
    end: datetime
    granularity: str

    @property
    def count(self) -> int:
        """How many windows of the granularity the range spans (rounded up)."""
        length = window_length(self.granularity)
        return max(0, -(-(self.end - self.start) // length))


def resolve_range(
    granularity: str,
    start_from: datetime | None,
    to: datetime | None,
    *,
    now: datetime,
    max_windows: int,
) -> WindowRange:
    """The windows a ``from``/``to`` query asks for.

    ``to`` (exclusive, default now) bounds the window starts; ``from``
    (default ``to`` minus :data:`DEFAULT_WINDOW_COUNT` windows) is rounded
    down to its window's start, so the window containing ``from`` is included.

    Raises
    ------
    InvalidInput
        ``from`` after ``to``, or more than ``max_windows`` windows.
    """
    length = window_length(granularity)
    end = to if to is not None else now
    begin = start_from if start_from is not None else end - DEFAULT_WINDOW_COUNT * length
    if begin > end:
        raise InvalidInput("from", "must not be after to")
    found = WindowRange(window_start(begin, granularity), end, granularity)
    if found.count > max_windows:
        raise InvalidInput(
            "from",
            f"the range spans {found.count} windows of {granularity}; at most {max_windows} "
            "per request (narrow from/to)",
        )
    return found


def check_window_start(start: datetime, granularity: str) -> datetime:
    """``start`` (aware, as every parsed instant is) if it starts a window of ``granularity``.

    Raises InvalidInput naming the window that contains it otherwise.
    """
    aligned = window_start(start, granularity)
    if aligned != start:
        raise InvalidInput(
            "start",
            f"is not the start of a {granularity} window (the window containing it starts "
            f"at {isoformat_z(aligned)})",
        )
    return aligned

"""The one date parser of the API, for reads and writes alike.

Every instant the service takes (a batch ``timestamp``, the ``from``/``to``
of a read, a window ``start``, a drift reference period) goes through
:func:`parse_instant`: an ISO 8601 string (a time without an offset is taken
as UTC) or a number of seconds since the Unix epoch, converted to UTC and
kept within [:data:`EARLIEST`, :data:`LATEST`), so that the window arithmetic
done with it can never overflow (year 1 or 9999 with an offset used to give
a 500). Errors are :class:`InvalidInput` naming the field; a message that
suggests a time shows it URL-encoded when the value came from a query string.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import BeforeValidator

from app.errors import InvalidInput
from app.services.windowing import isoformat_z

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


def _validate_instant(value: Any) -> datetime:
    try:
        return parse_instant(value, "value")
    except InvalidInput as exc:  # pydantic names the field itself
        raise ValueError(exc.reason) from None


Instant = Annotated[datetime, BeforeValidator(_validate_instant)]
"""A pydantic field type read by :func:`parse_instant` (request bodies validated by pydantic)."""

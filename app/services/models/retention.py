"""The ``retention`` setting of a model: its syntax, and the check against the model's window.

How long windows are kept once the setting is set, and the sweep that deletes
the older ones, are the worker's (app/services/refresh/retention.py).
"""

from __future__ import annotations

import re
from datetime import timedelta

from app.errors import InvalidInput
from app.timegrid import window_length

RETENTION_PATTERN = r"^[1-9][0-9]{0,4}[hdw]$"
"""A retention: a positive whole number of hours, days or weeks ("36h", "90d", "52w")."""

_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


def parse_retention(text: str) -> timedelta:
    """The duration a retention names (its syntax is checked by :data:`RETENTION_PATTERN`).

    >>> parse_retention("90d")
    datetime.timedelta(days=90)
    """
    match = re.fullmatch(RETENTION_PATTERN, text)
    if match is None:
        raise InvalidInput("retention", f"{text!r} is not a duration such as 36h, 90d or 52w")
    return int(text[:-1]) * _UNITS[text[-1]]


def check_retention(text: str | None, window: str) -> str | None:
    """``text`` if it is null or at least one window of the model (InvalidInput otherwise)."""
    if text is not None and parse_retention(text) < window_length(window):
        raise InvalidInput("retention", f"must be at least one window of the model ({window})")
    return text

"""The ``retention`` setting of a model: its syntax, and the check against the model's window.

How long windows are kept once the setting is set, and the sweep that deletes
the older ones, are the worker's (app/services/refresh/retention.py).
"""

from __future__ import annotations

from datetime import timedelta

from app.errors import InvalidInput
from app.timegrid import DURATION_PATTERN, parse_duration, window_length

RETENTION_PATTERN = DURATION_PATTERN
"""A retention: a positive whole number of hours, days or weeks ("36h", "90d", "52w")."""


def parse_retention(text: str) -> timedelta:
    """The duration a retention names (its syntax is checked by :data:`RETENTION_PATTERN`).

    >>> parse_retention("90d")
    datetime.timedelta(days=90)
    """
    return parse_duration(text, "retention")


def check_retention(text: str | None, window: str) -> str | None:
    """``text`` if it is null or at least one window of the model (InvalidInput otherwise)."""
    if text is not None and parse_retention(text) < window_length(window):
        raise InvalidInput("retention", f"must be at least one window of the model ({window})")
    return text

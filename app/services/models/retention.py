"""The ``retention`` and ``label_horizon`` settings of a model: their syntax and checks.

How long windows are kept once the setting is set, and the sweep that deletes
the older ones, are the worker's (app/services/refresh/retention.py).
"""

from __future__ import annotations

from datetime import timedelta

from app.errors import InvalidInput
from app.timegrid import DURATION_PATTERN, parse_duration, window_length

RETENTION_PATTERN = DURATION_PATTERN
"""A retention: a positive whole number of hours, days or weeks ("36h", "90d", "52w")."""


LABEL_HORIZON_MAX = timedelta(days=400)
"""Longest ``label_horizon``: labels of a window are accepted at most this long after
it (chargebacks take up to 90 days, a credit default a year)."""


def parse_retention(text: str, field: str = "retention") -> timedelta:
    """The duration a retention names (its syntax is checked by :data:`RETENTION_PATTERN`).

    >>> parse_retention("90d")
    datetime.timedelta(days=90)
    """
    return parse_duration(text, field)


def check_label_horizon(text: str | None) -> str | None:
    """``text`` if it is null or a duration of at most :data:`LABEL_HORIZON_MAX`.

    >>> check_label_horizon("90d")
    '90d'
    >>> check_label_horizon("60w")
    Traceback (most recent call last):
    ...
    app.errors.InvalidInput: label_horizon: is longer than the cap of 400 days
    """
    if text is not None and parse_retention(text, "label_horizon") > LABEL_HORIZON_MAX:
        cap = LABEL_HORIZON_MAX.days
        raise InvalidInput("label_horizon", f"is longer than the cap of {cap} days")
    return text


def check_retention(text: str | None, window: str) -> str | None:
    """``text`` if it is null or at least one window of the model (InvalidInput otherwise)."""
    if text is not None and parse_retention(text) < window_length(window):
        raise InvalidInput("retention", f"must be at least one window of the model ({window})")
    return text

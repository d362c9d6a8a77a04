"""Readable axis ticks for the SLA page's charts (app/sla/html.py).

Values get round steps (1, 2, 2.5 or 5 times a power of ten) and times get
labels on round instants (whole hours, days, Mondays), so a chart reads
``0.5 0.6 0.7`` and ``Nov 25 06:00``, never ``0.537`` or ``11-25 05:00:00``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

_MULTIPLES = (1.0, 2.0, 2.5, 5.0, 10.0)
LABEL_SPACINGS_SECONDS = (
    300, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600,
    86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400, 56 * 86400, 112 * 86400,
)  # fmt: skip
"""Candidate spacings of time labels, smallest first."""
_WEEK = 7 * 86400
_MONDAY_OFFSET = 4 * 86400  # 1970-01-01 was a Thursday; week-long windows start on Mondays


def nice_ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    """About ``count`` intervals of a round step covering ``[lo, hi]``.

    The first tick is at or below ``lo``, the last at or above ``hi``.

    >>> nice_ticks(0.537, 0.863)
    [0.5, 0.6, 0.7, 0.8, 0.9]
    >>> nice_ticks(0.0, 0.07)
    [0.0, 0.02, 0.04, 0.06, 0.08]
    >>> nice_ticks(0.6, 0.6)
    [0.5, 0.55, 0.6, 0.65, 0.7]
    """
    if hi <= lo:
        pad = max(abs(lo) * 0.1, 0.01)
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in _MULTIPLES if raw <= m * power * (1 + 1e-9))
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    decimals = tick_decimals(step)
    return [round(k * step, decimals) for k in range(first, last + 1)]


def tick_decimals(step: float) -> int:
    """Decimals that write every multiple of ``step`` exactly (``0.25`` -> 2)."""
    decimals = 0
    while decimals < 12 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-9:
        decimals += 1
    return decimals


def time_labels(
    starts: Sequence[datetime], window_seconds: int, most: int = 8
) -> list[tuple[int, str]]:
    """(index, label) of the windows to label on a time axis of one point per window.

    Labels fall on round instants: the smallest spacing of
    :data:`LABEL_SPACINGS_SECONDS` that is a multiple of the window length and
    gives at most ``most`` labels over ``len(starts)`` windows. A label shows
    the date where it changes (``Nov 25 06:00``, then ``12:00``); day spacings
    show dates only. Windows too sparse for any round instant get the first
    and the last window labelled.

    >>> from datetime import timedelta
    >>> day = datetime(2026, 11, 25, tzinfo=UTC)
    >>> time_labels([day + timedelta(hours=h) for h in range(24)], 3600, most=4)
    [(0, 'Nov 25 00:00'), (6, '06:00'), (12, '12:00'), (18, '18:00')]
    """
    if not starts:
        return []
    span = len(starts) * window_seconds
    spacing = next(
        (
            s
            for s in LABEL_SPACINGS_SECONDS
            if s >= window_seconds and s % window_seconds == 0 and span / s <= most
        ),
        None,
    )
    chosen: list[int] = []
    if spacing is not None:
        offset = _MONDAY_OFFSET if spacing % _WEEK == 0 else 0
        chosen = [i for i, t in enumerate(starts) if (int(t.timestamp()) - offset) % spacing == 0]
    if len(chosen) < 2:
        chosen = sorted({0, len(starts) - 1})
    dates_only = spacing is not None and spacing >= 86400 and len(chosen) > 2
    labels: list[tuple[int, str]] = []
    last_day = None
    for i in chosen:
        moment = starts[i].astimezone(UTC)
        day = moment.strftime("%b %d")
        if dates_only:
            labels.append((i, day))
        else:
            clock = moment.strftime("%H:%M")
            labels.append((i, clock if day == last_day else f"{day} {clock}"))
        last_day = day
    return labels


def readable_instant(text: str) -> str:
    """An ISO instant as ``2026-11-25 06:00 UTC`` (seconds only when not zero).

    >>> readable_instant("2026-11-25T06:00:00Z")
    '2026-11-25 06:00 UTC'
    """
    moment = datetime.fromisoformat(text).astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M" + (":%S" if moment.second else "") + " UTC")

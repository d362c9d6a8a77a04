"""Window boundaries: alignment, containment, nesting, ISO weeks, UTC output."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.services.models.settings import WindowName
from app.timegrid import (
    WINDOW_LENGTHS,
    isoformat_z,
    window_end,
    window_length,
    window_start,
)

moments = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
windows = st.sampled_from(sorted(WINDOW_LENGTHS))


def test_api_window_names_are_the_window_lengths() -> None:
    assert set(WindowName.__args__) == set(WINDOW_LENGTHS)


@pytest.mark.parametrize(
    ("window", "moment", "start"),
    [
        ("5m", datetime(2026, 3, 4, 10, 7, 30), datetime(2026, 3, 4, 10, 5)),
        ("15m", datetime(2026, 3, 4, 10, 44, 59), datetime(2026, 3, 4, 10, 30)),
        ("1h", datetime(2026, 3, 4, 10, 59, 59, 999999), datetime(2026, 3, 4, 10)),
        ("6h", datetime(2026, 3, 4, 17, 0), datetime(2026, 3, 4, 12)),
        ("1d", datetime(2026, 3, 4, 23, 59), datetime(2026, 3, 4)),
        # 2026-03-04 is a Wednesday; its ISO week starts Monday 2026-03-02
        ("1w", datetime(2026, 3, 4, 10), datetime(2026, 3, 2)),
        ("1w", datetime(2026, 3, 2, 0, 0), datetime(2026, 3, 2)),
        ("1w", datetime(2026, 3, 1, 23, 59), datetime(2026, 2, 23)),
        # before the epoch's first Monday: floor, not truncation toward zero
        ("1w", datetime(1970, 1, 1), datetime(1969, 12, 29)),
    ],
)
def test_known_window_starts(window: str, moment: datetime, start: datetime) -> None:
    assert window_start(moment.replace(tzinfo=UTC), window) == start.replace(tzinfo=UTC)


@given(moments, windows)
def test_start_contains_the_moment_and_is_aligned(moment: datetime, window: str) -> None:
    start = window_start(moment, window)
    assert start <= moment < window_end(start, window)
    assert window_start(start, window) == start
    assert start.tzinfo == UTC
    if window == "1w":
        assert start.weekday() == 0 and start.time() == datetime.min.time()


@given(moments, windows, windows)
def test_windows_nest(moment: datetime, short: str, long: str) -> None:
    if window_length(short) > window_length(long):
        short, long = long, short
    outer = window_start(moment, long)
    inner = window_start(moment, short)
    assert outer <= inner and window_end(inner, short) <= window_end(outer, long)


def test_offsets_are_converted_to_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    moment = datetime(2026, 3, 4, 1, 30, tzinfo=plus_two)  # 2026-03-03T23:30Z
    assert window_start(moment, "1d") == datetime(2026, 3, 3, tzinfo=UTC)
    assert window_start(moment, "1h") == datetime(2026, 3, 3, 23, tzinfo=UTC)


def test_naive_and_unknown_windows_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        window_start(datetime(2026, 3, 4), "1h")
    with pytest.raises(KeyError):
        window_start(datetime(2026, 3, 4, tzinfo=UTC), "2h")


def test_isoformat_z() -> None:
    moment = datetime(2026, 3, 4, 1, 30, tzinfo=timezone(timedelta(hours=2)))
    assert isoformat_z(moment) == "2026-03-03T23:30:00Z"

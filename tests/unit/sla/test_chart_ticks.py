"""Round axis ticks and time labels of the SLA page (app/sla/chart_ticks.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.sla.chart_ticks import nice_ticks, readable_instant, tick_decimals, time_labels

MONDAY = datetime(2026, 11, 23, tzinfo=UTC)


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0.537, 0.863, [0.5, 0.6, 0.7, 0.8, 0.9]),
        (0.0, 1.0, [0.0, 0.25, 0.5, 0.75, 1.0]),
        (-3.2, 7.9, [-5.0, 0.0, 5.0, 10.0]),
        (120.0, 980.0, [0.0, 250.0, 500.0, 750.0, 1000.0]),
    ],
)
def test_ticks_cover_the_range_with_a_round_step(
    lo: float, hi: float, expected: list[float]
) -> None:
    ticks = nice_ticks(lo, hi)
    assert ticks == expected
    assert ticks[0] <= lo and ticks[-1] >= hi


def test_tick_decimals() -> None:
    assert [tick_decimals(s) for s in (5.0, 0.5, 0.25, 0.02, 0.0025)] == [0, 1, 2, 2, 4]


def test_day_windows_are_labelled_by_date_on_round_days() -> None:
    starts = [MONDAY + timedelta(days=d) for d in range(28)]
    labels = time_labels(starts, 86400)
    assert labels == [(0, "Nov 23"), (7, "Nov 30"), (14, "Dec 07"), (21, "Dec 14")]


def test_week_windows_are_labelled_on_mondays() -> None:
    starts = [MONDAY + timedelta(weeks=w) for w in range(30)]
    labels = time_labels(starts, 7 * 86400)
    assert [i for i, _ in labels] == list(range(0, 30, 4))  # 28-day spacing, Monday-aligned
    assert all(starts[i].weekday() == 0 for i, _ in labels)


def test_sparse_or_unaligned_windows_get_the_first_and_last_labelled() -> None:
    # two windows far apart: no round instant among them but the first
    starts = [MONDAY + timedelta(minutes=5), MONDAY + timedelta(hours=9, minutes=5)]
    assert time_labels(starts, 300) == [(0, "Nov 23 00:05"), (1, "09:05")]
    # more windows than any spacing allows: the ends only
    many = [MONDAY + timedelta(weeks=w) for w in range(400)]
    assert [i for i, _ in time_labels(many, 7 * 86400)] == [0, 399]
    assert time_labels([], 3600) == []


def test_readable_instant() -> None:
    assert readable_instant("2026-11-25T06:00:00Z") == "2026-11-25 06:00 UTC"
    assert readable_instant("2026-11-25T07:00:30+01:00") == "2026-11-25 06:00:30 UTC"

"""app.timegrid.parse_instant: the one date parser of the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.errors import InvalidInput
from app.timegrid import EARLIEST, LATEST, parse_instant


def test_forms_of_the_same_instant() -> None:
    moment = datetime(2026, 11, 26, 10, tzinfo=UTC)
    plus_one = timezone(timedelta(hours=1))
    for value in (
        "2026-11-26T10:00:00Z",
        "2026-11-26T10:00:00",  # no offset: UTC
        "2026-11-26T11:00:00+01:00",
        moment.timestamp(),
        int(moment.timestamp()),
        moment.astimezone(plus_one),
    ):
        got = parse_instant(value, "t")
        assert got == moment and got.utcoffset() == timedelta(0), value


@pytest.mark.parametrize(
    "value",
    [
        "0001-01-01T00:00:00+05:00",  # astimezone(UTC) overflows
        "9999-12-31T23:00:00-05:00",
        "1969-12-31T23:59:59Z",
        LATEST.isoformat(),
        -1.0,
        1e300,
        253402300800,  # 10000-01-01
    ],
)
def test_out_of_range_is_invalid_input(value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_instant(value, "from", in_query=True)
    assert caught.value.field == "from"
    assert "1970-01-01T00%3A00%3A00Z" in caught.value.reason


def test_bounds_and_messages() -> None:
    assert parse_instant(EARLIEST.isoformat(), "t") == EARLIEST
    assert parse_instant((LATEST - timedelta(microseconds=1)).isoformat(), "t") < LATEST
    for bad in (float("nan"), True, None, [], "tomorrow"):
        with pytest.raises(InvalidInput):
            parse_instant(bad, "t")
    with pytest.raises(InvalidInput, match="2026-11-26T10:00:00Z"):
        parse_instant("tomorrow", "timestamp")
    with pytest.raises(InvalidInput, match="%2B"):
        parse_instant("2026-11-26T10:00:00 01:00", "from", in_query=True)

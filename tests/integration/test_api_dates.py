"""Dates in reads and writes: one parser, UTC without an offset, 422 out of range.

Extreme instants (year 1 or 9999 with an offset) used to reach arithmetic
that overflows (500); every date the API takes goes through
``app.timegrid.parse_instant`` and is refused with a 422 naming
the field instead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest

PROBLEM = "application/problem+json"
EXTREMES = [
    "0001-01-01T00:00:00+05:00",
    "0001-01-01T03:00:00+02:00",
    "9999-12-31T23:00:00-05:00",
    "9999-12-31T23:59:59Z",
]


@pytest.fixture
def reader(sqlite_url: str, api_for: Callable[..., Any]) -> tuple[Any, dict[str, str]]:
    api = api_for(sqlite_url)
    api.create_model("m", window="1h")
    token = api.create_key("m")
    return api, api.bearer(token)


def _assert_invalid(r: Any, field: str) -> None:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM
    errors = r.json()["errors"]
    assert [e["field"] for e in errors] == [field], errors


@pytest.mark.parametrize("value", EXTREMES)
@pytest.mark.parametrize("param", ["from", "to"])
@pytest.mark.parametrize("path", ["/v1/models/m/windows", "/v1/models/m/sla"])
def test_extreme_read_bounds_are_422(
    reader: tuple[Any, dict[str, str]], path: str, param: str, value: str
) -> None:
    api, headers = reader
    r = api.client.get(path, params={param: value}, headers=headers)
    _assert_invalid(r, param)
    assert "1970-01-01T00%3A00%3A00Z" in r.json()["detail"]  # the accepted range, query-encoded


@pytest.mark.parametrize("value", EXTREMES)
def test_extreme_window_start_is_422(reader: tuple[Any, dict[str, str]], value: str) -> None:
    api, headers = reader
    r = api.client.get(f"/v1/models/m/windows/{quote(value)}", headers=headers)
    _assert_invalid(r, "start")


@pytest.mark.parametrize("value", EXTREMES)
def test_extreme_drift_reference_is_422(reader: tuple[Any, dict[str, str]], value: str) -> None:
    api, _ = reader
    body = {"drift": {"reference": {"from": "2026-01-01T00:00:00Z", "to": value}}}
    r = api.client.patch("/v1/models/m", json=body, headers=api.admin)
    _assert_invalid(r, "drift.reference.to")


@pytest.mark.parametrize("value", EXTREMES)
def test_extreme_batch_timestamp_is_422(reader: tuple[Any, dict[str, str]], value: str) -> None:
    api, headers = reader
    body = {"timestamp": value, "scores": [0.2], "labels": [0]}
    r = api.client.post("/v1/models/m/batches", json=body, headers=headers)
    _assert_invalid(r, "timestamp")


def test_reads_take_a_time_without_offset_as_utc(reader: tuple[Any, dict[str, str]]) -> None:
    api, headers = reader
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    naive = hour.replace(tzinfo=None).isoformat()  # what a batch timestamp also accepts
    body = {"timestamp": naive, "scores": [0.2, 0.9], "labels": [0, 1]}
    assert api.client.post("/v1/models/m/batches", json=body, headers=headers).status_code == 202
    with_offset = api.client.get(
        "/v1/models/m/windows",
        params={"from": hour.isoformat(), "to": (hour + timedelta(hours=1)).isoformat()},
        headers=headers,
    )
    without = api.client.get(
        "/v1/models/m/windows",
        params={"from": naive, "to": (hour + timedelta(hours=1)).replace(tzinfo=None).isoformat()},
        headers=headers,
    )
    assert without.status_code == 200, without.text
    assert without.json() == with_offset.json()
    assert [w["n"] for w in without.json()["windows"]] == [2]
    one = api.client.get(f"/v1/models/m/windows/{naive}", headers=headers)
    assert one.status_code == 200, one.text
    assert one.json()["start"] == hour.isoformat().replace("+00:00", "Z")
    sla = api.client.get("/v1/models/m/sla", params={"from": naive}, headers=headers)
    assert sla.status_code == 200, sla.text


def test_a_bad_time_in_a_query_is_explained_url_encoded(
    reader: tuple[Any, dict[str, str]],
) -> None:
    api, headers = reader
    r = api.client.get("/v1/models/m/windows", params={"from": "yesterday"}, headers=headers)
    _assert_invalid(r, "from")
    assert "2026-11-26T10%3A00%3A00Z" in r.json()["detail"]
    # an unencoded "+01:00" arrives as " 01:00": the message says to encode the plus
    plus = api.client.get("/v1/models/m/windows?from=2026-11-26T10:00:00+01:00", headers=headers)
    _assert_invalid(plus, "from")
    assert "%2B" in plus.json()["detail"]
    # a misaligned window start names the aligned one, URL-safe
    misaligned = api.client.get("/v1/models/m/windows/2026-11-26T10:30:00Z", headers=headers)
    _assert_invalid(misaligned, "start")
    assert "2026-11-26T10:00:00Z" in misaligned.json()["detail"]


def test_batch_timestamp_message_shows_a_plain_example(
    reader: tuple[Any, dict[str, str]],
) -> None:
    api, headers = reader
    body = {"timestamp": "soon", "scores": [0.2], "labels": [0]}
    r = api.client.post("/v1/models/m/batches", json=body, headers=headers)
    _assert_invalid(r, "timestamp")
    assert "2026-11-26T10:00:00Z" in r.json()["detail"]

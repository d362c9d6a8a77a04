"""GET /v1/models/{name}/windows and /windows/{start} through the real app (SQLite, Postgres).

Re-windowing is checked against independent computations: the merged window's
counts equal the exact sums of the stored windows and of the raw data, and its
metrics equal ``app.metrics.evaluate`` on the concatenated raw scores (exactly
for everything computed at the threshold or from sums; to histogram
resolution for curve areas).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
from _metric_compare import assert_matches_evaluate
from _read_support import (
    BACKENDS,
    COST_RATIO,
    HOURS,
    MODEL,
    PI0,
    REFERENCE_HOURS,
    ROWS,
    SCARCE,
    SEGMENTS,
    THRESHOLD,
    Populated,
    iso,
    populated_app,
    shared_database_url,
)

from app.metrics import evaluate

PROBLEM = "application/problem+json"
DAY0 = tuple(h for h in HOURS if h < 24)
DAY1 = tuple(h - 24 for h in HOURS if h >= 24)


@pytest.fixture(scope="module", params=BACKENDS)
def data(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Populated]:
    """The populated app, shared by this module's tests (they only read)."""
    url = shared_database_url(request, tmp_path_factory.mktemp("windows"))
    yield from populated_app(url)


def _day_of(start: str) -> datetime:
    moment = datetime.fromisoformat(start.replace("Z", "+00:00"))
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _expected(data: Populated, segment: str | None, hours: tuple[int, ...]) -> dict[str, Any]:
    scores, labels = data.data(segment, hours)
    return evaluate(scores, labels, threshold=THRESHOLD, pi0=PI0, cost_ratio=COST_RATIO)


def test_stored_windows_carry_the_contract_fields(data: Populated) -> None:
    windows = data.get("/windows", **{"from": iso(data.day)})["windows"]
    assert [w["start"] for w in windows] == [iso(data.hour(h)) for h in HOURS]
    for w, h in zip(windows, HOURS, strict=True):
        assert w["status"] == "fresh"
        assert w["segment"] is None
        assert w["end"] == iso(data.hour(h) + timedelta(hours=1))
        _, labels = data.data(None, (h,))
        assert w["n"] == labels.size == 2 * ROWS
        assert w["positives"] == int(labels.sum())
        assert w["prior"] == pytest.approx(labels.mean(), rel=1e-12)
        assert w["merged_windows"] == 1
        assert set(w) >= {"start", "end", "segment", "n", "prior", "status", "metrics", "drift"}
        assert "curves" not in w
        if h < REFERENCE_HOURS:
            assert w["drift"]["verdict"] == "reference"
        else:
            assert w["drift"]["verdict"] in {"none", "prior", "likelihood", "both"}
            assert {"p_value", "effect"} <= set(w["drift"]["prior"])
            assert {"p_value", "effect"} <= set(w["drift"]["likelihood"])
            assert "auc_pr" in w["drift"]["attribution"]
    # a stored window's metrics are evaluate's on its raw data
    assert_matches_evaluate(
        windows[4]["metrics"], _expected(data, None, (HOURS[4],)), same_names=False
    )
    # from/to select window starts in [from rounded down, to)
    some = data.get(
        "/windows", **{"from": iso(data.hour(1) + timedelta(minutes=30)), "to": iso(data.hour(3))}
    )["windows"]
    assert [w["start"] for w in some] == [iso(data.hour(1)), iso(data.hour(2))]


def test_segment_windows_hold_that_segment_only(data: Populated) -> None:
    for segment in SEGMENTS:
        windows = data.get("/windows", **{"from": iso(data.day), "segment": segment})["windows"]
        assert [w["segment"] for w in windows] == [segment] * len(HOURS)
        for w, h in zip(windows, HOURS, strict=True):
            _, labels = data.raw[(segment, h)]
            assert (w["n"], w["positives"]) == (labels.size, int(labels.sum()))
    scarce = data.get("/windows", **{"from": iso(data.hour(SCARCE[1])), "segment": SCARCE[0]})[
        "windows"
    ][0]
    assert scarce["metrics"]["calibrated_f1"] is None
    assert scarce["reasons"]["calibrated_f1"] == "insufficient_data"
    assert scarce["metrics"]["prior"] is not None


@pytest.mark.parametrize("segment", [None, "eu"])
def test_rewindowing_sums_exactly_and_equals_evaluate(data: Populated, segment: str | None) -> None:
    params: dict[str, Any] = {"from": iso(data.day), "granularity": "1d"}
    if segment:
        params["segment"] = segment
    merged = data.get("/windows", **params)["windows"]
    stored = data.get("/windows", **{k: v for k, v in params.items() if k != "granularity"})
    assert [w["start"] for w in merged] == [iso(data.day), iso(data.day + timedelta(days=1))]
    for w, hours in zip(merged, (DAY0, DAY1), strict=True):
        day_start = data.day if hours is DAY0 else data.day + timedelta(days=1)
        parts = [s for s in stored["windows"] if _day_of(s["start"]) == day_start]
        assert w["status"] == "fresh"
        assert w["granularity"] == "1d"
        assert w["end"] == iso(day_start + timedelta(days=1))
        assert w["merged_windows"] == len(parts) == len(hours)
        # exact sums of the stored windows and of the raw data
        assert w["n"] == sum(p["n"] for p in parts)
        assert w["positives"] == sum(p["positives"] for p in parts)
        offset = 0 if hours is DAY0 else 24
        _, labels = data.data(segment, tuple(offset + h for h in hours))
        assert (w["n"], w["positives"]) == (labels.size, int(labels.sum()))
        assert_matches_evaluate(
            w["metrics"],
            _expected(data, segment, tuple(offset + h for h in hours)),
            same_names=False,
        )
    # day D is not wholly inside the 3-hour reference period: it is tested against it
    assert merged[0]["drift"]["verdict"] in {"none", "prior", "likelihood", "both"}


def test_single_window_has_curves(data: Populated) -> None:
    start = iso(data.hour(4))
    r = data.client.get(f"/v1/models/{MODEL}/windows/{start}", headers=data.read)
    assert r.status_code == 200, r.text
    w = r.json()
    assert (w["start"], w["segment"], w["status"]) == (start, None, "fresh")
    assert {"roc", "pr", "calibrated_pr", "oprc"} <= set(w["curves"])
    roc = w["curves"]["roc"]
    assert len(roc["fpr"]) == len(roc["tpr"]) <= 200
    assert np.all(np.diff(roc["fpr"]) >= 0)
    # the segment's window and the merged day
    eu = data.get(f"/windows/{start}", segment="eu")
    assert eu["segment"] == "eu" and eu["n"] == ROWS
    day = data.get(f"/windows/{iso(data.day)}", granularity="1d")
    assert day["n"] == 2 * ROWS * len(DAY0) and day["curves"]["pr"]["recall"]
    listed = data.get("/windows", **{"from": iso(data.hour(4)), "to": iso(data.hour(5))})
    assert listed["windows"][0]["metrics"] == w["metrics"]


def test_missing_window_is_a_404_problem(data: Populated) -> None:
    empty = iso(data.day - timedelta(hours=5))
    r = data.client.get(f"/v1/models/{MODEL}/windows/{empty}", headers=data.read)
    assert r.status_code == 404
    assert r.headers["content-type"] == PROBLEM
    assert r.json()["type"].endswith("window-not-found")
    r = data.client.get(f"/v1/models/nope/windows/{empty}", headers=data.admin)
    assert r.status_code == 404 and r.json()["type"].endswith("model-not-found")


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"segment": "apac"}, "segment"),
        ({"granularity": "2h"}, "granularity"),
        ({"granularity": "5m"}, "granularity"),
        ({"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, "from"),
        (
            {"from": "2025-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z", "granularity": "1d"},
            "from",
        ),
        ({"from": "2026-01-01T00:00:00"}, "from"),
    ],
)
def test_bad_queries_are_422_naming_the_field(
    data: Populated, params: dict[str, str], field: str
) -> None:
    r = data.client.get(f"/v1/models/{MODEL}/windows", params=params, headers=data.read)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == PROBLEM
    assert [e["field"] for e in r.json()["errors"]] == [field]


def test_unaligned_start_is_422(data: Populated) -> None:
    start = iso(data.hour(4) + timedelta(minutes=30))
    r = data.client.get(f"/v1/models/{MODEL}/windows/{start}", headers=data.read)
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "start"


def test_read_scope_is_required(data: Populated) -> None:
    path = f"/v1/models/{MODEL}/windows"
    assert data.client.get(path).status_code == 401
    assert data.client.get(path, headers=data.ingest).status_code == 403
    assert data.client.get(path, headers=data.read).status_code == 200
    assert data.client.get(path, headers=data.admin).status_code == 200
    r = data.client.post("/v1/models", json={"name": "other", "pi0": 0.1}, headers=data.admin)
    assert r.status_code == 201
    assert data.client.get("/v1/models/other/windows", headers=data.read).status_code == 403

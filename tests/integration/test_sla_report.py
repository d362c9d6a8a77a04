"""GET /v1/models/{name}/sla through the real app (SQLite, Postgres): JSON and CSV.

Values are checked against ``app.metrics.evaluate`` on each window's raw data
at pi0 (the calibrated metric), statuses and the summary against a
brute-force count over the windows.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import pytest
from _read_support import (
    BACKENDS,
    HOURS,
    MODEL,
    OBJECTIVES,
    PI0,
    SCARCE,
    THRESHOLD,
    Populated,
    iso,
    populated_app,
    shared_database_url,
)

from app.metrics import evaluate
from app.sla.csv import CSV_COLUMNS


@pytest.fixture(scope="module", params=BACKENDS)
def data(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Populated]:
    url = shared_database_url(request, tmp_path_factory.mktemp("sla"))
    yield from populated_app(url)


def _report(data: Populated, **params: Any) -> dict[str, Any]:
    return dict(data.get("/sla", **{"from": iso(data.day), **params}))


def _holds(objective: dict[str, Any], value: float) -> bool:
    target = objective["target"]
    return bool(value >= target if objective["op"] == ">=" else value <= target)


def _expected_status(objective: dict[str, Any], got: dict[str, Any]) -> str:
    """The rule of docs/reading.md, from the reported value and interval."""
    if got["value"] is None:
        return "insufficient_data"
    if got["evidence"] == "point":
        return "met" if _holds(objective, got["value"]) else "breached"
    ends = [got["lower"], got["upper"]]
    if None in ends:
        return "inconclusive"
    if all(_holds(objective, v) for v in ends):
        return "met"
    return "breached" if not any(_holds(objective, v) for v in ends) else "inconclusive"


@pytest.mark.parametrize("segment", [None, "us"])
def test_values_are_the_metrics_at_pi0(data: Populated, segment: str | None) -> None:
    report = _report(data, **({"segment": segment} if segment else {}))
    assert (report["model"], report["pi0"], report["segment"]) == (MODEL, PI0, segment)
    assert [o["objective"] for o in report["objectives"]] == [
        "calibrated_f1>=0.3",
        "f1>=0.99",
        "recall>=0.2",
    ]
    assert [o["evaluated_as"] for o in report["objectives"]] == [
        "calibrated_f1",
        "calibrated_f1",  # f1 is prior-dependent: read at pi0
        "recall",
    ]
    assert [o["evidence"] for o in report["objectives"]] == ["interval"] * 3
    assert "inconclusive" in report["rule"]
    assert [w["start"] for w in report["windows"]] == [iso(data.hour(h)) for h in HOURS]
    for window, h in zip(report["windows"], HOURS, strict=True):
        scores, labels = data.data(segment, (h,))
        truth = evaluate(scores, labels, threshold=THRESHOLD, pi0=PI0)
        scarce = (segment, h) == SCARCE
        statuses = []
        for objective, got in zip(OBJECTIVES, window["objectives"], strict=True):
            if scarce:
                assert got["value"] is None
                assert got["reason"] == "insufficient_data"
            else:
                name = got["evaluated_as"]
                assert got["value"] == pytest.approx(truth[name], rel=1e-9), name
                # the worker's credible interval, stored for every one of these metrics
                assert got["lower"] <= got["value"] <= got["upper"], got
            assert got["status"] == _expected_status(objective, got)
            statuses.append(got["status"])
        if "breached" in statuses:
            assert window["status"] == "breached"
        elif set(statuses) == {"met"}:
            assert window["status"] == "met"
        elif "inconclusive" in statuses:
            assert window["status"] == "inconclusive"
        else:
            assert window["status"] == "insufficient_data"


def test_summary_counts_windows_and_compliance(data: Populated) -> None:
    report = _report(data, segment="us")
    windows = report["windows"]
    summary = report["summary"]
    count = {s: sum(w["status"] == s for w in windows) for s in ("met", "breached", "inconclusive")}
    assert summary["windows"] == len(windows) == len(HOURS)
    assert summary["windows_met"] == count["met"]
    assert summary["windows_breached"] == count["breached"]
    assert summary["windows_inconclusive"] == count["inconclusive"]
    assert summary["windows_insufficient_data"] == sum(
        w["status"] == "insufficient_data" for w in windows
    )
    assert summary["compliance_ratio"] == count["met"] / (count["met"] + count["breached"])
    # f1 >= 0.99 at pi0 is out of reach for this classifier: every window breaches it
    per_objective = {o["objective"]: o for o in summary["objectives"]}
    f1 = per_objective["f1>=0.99"]
    assert (f1["windows_met"], f1["windows_breached"], f1["compliance_ratio"]) == (0, 8, 0.0)
    assert f1["windows_insufficient_data"] == 1  # the scarce window
    recall = per_objective["recall>=0.2"]
    recall_met = sum(w["objectives"][2]["status"] == "met" for w in windows)
    assert recall["windows_met"] == recall_met
    assert recall["compliance_ratio"] == recall_met / (recall_met + recall["windows_breached"])


def test_csv_has_one_row_per_window_and_objective(data: Populated) -> None:
    report = _report(data)
    r = data.client.get(
        f"/v1/models/{MODEL}/sla",
        params={"from": iso(data.day)},
        headers={**data.read, "Accept": "text/csv"},
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    reader = csv.DictReader(io.StringIO(r.text))
    assert tuple(reader.fieldnames or ()) == CSV_COLUMNS
    rows = list(reader)
    expected = [(w, o) for w in report["windows"] for o in w["objectives"]]
    assert len(rows) == len(expected) == len(HOURS) * len(OBJECTIVES)
    for row, (window, objective) in zip(rows, expected, strict=True):
        assert row["window_start"] == window["start"]
        assert row["window_end"] == window["end"]
        assert row["segment"] == ""
        assert int(row["n"]) == window["n"]
        assert float(row["prior"]) == window["prior"]
        assert row["objective"] == objective["objective"]
        assert row["evaluated_as"] == objective["evaluated_as"]
        assert float(row["target"]) == objective["target"]
        assert row["status"] == objective["status"]
        assert row["evidence"] == objective["evidence"] == "interval"
        assert row["rule"].startswith("interval: met if lower >= ")
        if objective["value"] is None:
            assert row["value"] == ""
        else:
            assert float(row["value"]) == objective["value"]  # repr round-trips exactly


def test_json_unless_csv_is_preferred(data: Populated) -> None:
    path = f"/v1/models/{MODEL}/sla"
    for accept, kind in [
        ("application/json", "application/json"),
        ("*/*", "application/json"),
        ("text/csv;q=0.5, application/json", "application/json"),
        ("application/json;q=0.5, text/csv", "text/csv"),
    ]:
        r = data.client.get(path, headers={**data.read, "Accept": accept})
        assert r.status_code == 200
        assert r.headers["content-type"].startswith(kind), accept


def test_sla_needs_read_scope_and_a_known_segment(data: Populated) -> None:
    path = f"/v1/models/{MODEL}/sla"
    assert data.client.get(path).status_code == 401
    assert data.client.get(path, headers=data.ingest).status_code == 403
    r = data.client.get(path, params={"segment": "mars"}, headers=data.read)
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "segment"

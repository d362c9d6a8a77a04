"""GET /v1/models/{name}/sla with ``Accept: text/html`` through the real app (SQLite,
Postgres): the page is the HTML rendering of the very report the JSON form returns."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from _read_support import (
    BACKENDS,
    MODEL,
    SEGMENTS,
    Populated,
    iso,
    populated_app,
    shared_database_url,
)
from typer.testing import CliRunner

from app.cli import cli
from app.cli.service import EXIT_USAGE
from app.sla.html import report_to_html, reports_to_html

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.fixture(scope="module", params=BACKENDS)
def data(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Populated]:
    url = shared_database_url(request, tmp_path_factory.mktemp("sla-html"))
    yield from populated_app(url)


def test_html_page_renders_the_json_report(data: Populated) -> None:
    path = f"/v1/models/{MODEL}/sla"
    params = {"from": iso(data.day), "to": iso(data.hour(48))}  # a fixed range: same report
    report = data.client.get(path, params=params, headers=data.read).json()
    assert report["windows"], "the fixture posts windows"
    r = data.client.get(path, params=params, headers={**data.read, "Accept": BROWSER})
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert r.text == report_to_html(report)
    assert r.text.count('<rect x="') == len(report["windows"])


@pytest.mark.parametrize(
    ("accept", "kind"),
    [
        ("text/html", "text/html"),
        ("text/html;q=0.5, application/json", "application/json"),
        ("application/json;q=0.5, text/html", "text/html"),
        ("text/csv, text/html;q=0.9", "text/csv"),
        ("text/csv;q=0.8, text/html", "text/html"),
        ("text/html;q=0", "application/json"),
    ],
)
def test_negotiation_with_html(data: Populated, accept: str, kind: str) -> None:
    r = data.client.get(
        f"/v1/models/{MODEL}/sla",
        params={"from": iso(data.day)},
        headers={**data.read, "Accept": accept},
    )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith(kind), accept


def test_errors_stay_problem_json(data: Populated) -> None:
    r = data.client.get(f"/v1/models/{MODEL}/sla", headers={"Accept": "text/html"})
    assert r.status_code == 401
    assert r.headers["content-type"].startswith("application/problem+json")


def test_every_segment_gets_a_report_and_a_section(data: Populated) -> None:
    """segment=*: all traffic, then each registered segment, in JSON, HTML and CSV alike."""
    path = f"/v1/models/{MODEL}/sla"
    params = {"from": iso(data.day), "to": iso(data.hour(48))}
    every = data.client.get(path, params={**params, "segment": "*"}, headers=data.read)
    assert every.status_code == 200, every.text
    doc = every.json()
    assert [r["segment"] for r in doc["reports"]] == [None, *sorted(SEGMENTS)]
    for report in doc["reports"]:
        one = {**params, "segment": report["segment"]} if report["segment"] else params
        assert data.client.get(path, params=one, headers=data.read).json() == report
    assert {k: doc[k] for k in ("model", "pi0", "from", "to")} == {
        k: doc["reports"][0][k] for k in ("model", "pi0", "from", "to")
    }
    assert doc["rule"] == doc["reports"][0]["rule"]
    page = data.client.get(
        path, params={**params, "segment": "*"}, headers={**data.read, "Accept": BROWSER}
    ).text
    assert page == reports_to_html(doc["reports"])
    assert page.count('<section class="segment">') == len(doc["reports"])
    for segment in SEGMENTS:
        assert f"<h2>Segment: {segment}</h2>" in page
    csv_text = data.client.get(
        path, params={**params, "segment": "*"}, headers={**data.read, "Accept": "text/csv"}
    ).text
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    expected = sum(len(r["windows"]) * len(r["objectives"]) for r in doc["reports"])
    assert len(rows) == expected
    assert {row["segment"] for row in rows} == {"", *SEGMENTS}


def test_cli_asks_for_every_segment(data: Populated, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[Any] = []

    def request(method: str, url: str, *, timeout: Any, **kwargs: Any) -> Any:
        sent.append(kwargs["params"])
        return data.client.request(method, url.removeprefix("http://svc"), **kwargs)

    monkeypatch.setattr("httpx.request", request)  # the CLI imports httpx on its first call
    window = ["--from", iso(data.day), "--to", iso(data.hour(48))]
    token = data.read["Authorization"].removeprefix("Bearer ")
    args = ["sla", MODEL, "--url", "http://svc", "--token", token, *window]
    result = CliRunner().invoke(cli, [*args, "--all-segments"])
    assert result.exit_code == 0, result.output
    assert sent[0]["segment"] == "*"
    assert [r["segment"] for r in json.loads(result.stdout)["reports"]] == [None, *SEGMENTS]
    both = CliRunner().invoke(cli, [*args, "--all-segments", "--segment", "eu"])
    assert both.exit_code == EXIT_USAGE and "not both" in both.output

"""GET /v1/models/{name}/sla with ``Accept: text/html`` through the real app (SQLite,
Postgres): the page is the HTML rendering of the very report the JSON form returns."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _read_support import BACKENDS, MODEL, Populated, iso, populated_app, shared_database_url

from app.services.sla_html import report_to_html

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

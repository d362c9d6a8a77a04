"""Names in the path are checked like names in a body, before any query.

Every route of :data:`app.api.routes.ROUTERS` (what ``create_app`` mounts) is
enumerated, so a new route with a ``{name}`` is covered without editing this
file. A NUL byte once reached PostgreSQL (psycopg ``DataError``: 500 and a
traceback in the log).
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

import pytest
from fastapi.routing import APIRoute

from app.api.routes import ROUTERS

_PARAM = re.compile(r"{(\w+)}")
VALID = {
    "name": "m",
    "start": "2026-11-26T10:00:00Z",
    "key_id": str(uuid.UUID(int=1)),
}
"""A well-formed value of each path parameter (the model ``m`` exists)."""


def _endpoints() -> list[tuple[str, str]]:
    """(method, path template) of every mounted route that has a path parameter."""
    return sorted(
        (method, route.path)
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute) and _PARAM.search(route.path)
        for method in route.methods
    )


def _url(template: str, **values: str) -> str:
    return _PARAM.sub(lambda m: values.get(m.group(1), VALID[m.group(1)]), template)


def _request(api: Any, method: str, url: str) -> Any:
    body: dict[str, Any] | None = {} if method in ("POST", "PATCH", "PUT") else None
    return api.client.request(method, url, json=body, headers=api.admin)


ENDPOINTS = _endpoints()
ID = "{0[0]} {0[1]}".format


def test_every_route_with_a_path_parameter_is_known() -> None:
    names = {p for _, path in ENDPOINTS for p in _PARAM.findall(path)}
    assert names <= set(VALID)  # a new kind of path parameter needs a value above
    assert sum("{name}" in path for _, path in ENDPOINTS) >= 9


@pytest.mark.parametrize(("method", "template"), ENDPOINTS, ids=map(ID, ENDPOINTS))
@pytest.mark.parametrize("bad", ["x%00", "caf%C3%A9", "a" * 65, "m%0A"])
def test_an_invalid_model_name_is_a_422_naming_it(
    api: Any, method: str, template: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    if "{name}" not in template:
        pytest.skip("no model name in this path")
    api.create_model("m")
    with caplog.at_level(logging.WARNING):
        r = _request(api, method, _url(template, name=bad))
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert "name" in [e["field"] for e in r.json()["errors"]]  # and the body's faults, if any
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]


@pytest.mark.parametrize(("method", "template"), ENDPOINTS, ids=map(ID, ENDPOINTS))
def test_a_nul_in_any_path_parameter_is_refused_without_a_500(
    api: Any, method: str, template: str, caplog: pytest.LogCaptureFixture
) -> None:
    api.create_model("m")
    for param in _PARAM.findall(template):
        with caplog.at_level(logging.WARNING):
            r = _request(api, method, _url(template, **{param: "2026%00"}))
        assert r.status_code in (404, 422), (param, r.text)
        assert r.headers["content-type"] == "application/problem+json"
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]


def test_a_key_holder_gets_the_same_answer(api: Any) -> None:
    api.create_model("m")
    token = api.create_key("m")
    r = api.client.get("/v1/models/m%00/windows", headers=api.bearer(token))
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "name"
    r = api.client.get("/v1/models/m%00/windows")  # no token: still 401 first
    assert r.status_code == 401

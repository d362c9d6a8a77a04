"""The batch route's fast path: a well-formed request's inputs are read without
FastAPI's dependency resolution; any request that a dependency would refuse is
left to FastAPI (which answers 415, 401 or 422 as for every route)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.requests import Request

from app.api.routes.batches import BatchRoute, router, well_formed_inputs

SETTINGS = object()
GOOD = {
    "content-type": "application/json; charset=utf-8",
    "authorization": "Bearer pw_token",
    "idempotency-key": "k-1",
}


def _inputs(name: str = "fraud", headers: list[tuple[str, str]] | None = None) -> Any:
    raw = list(GOOD.items()) if headers is None else headers
    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/v1/models/{name}/batches",
        "path_params": {"name": name},
        "headers": [(k.encode(), v.encode()) for k, v in raw],
        "app": SimpleNamespace(state=SimpleNamespace(settings=SETTINGS)),
    }
    return asyncio.run(well_formed_inputs(Request(scope)))


def test_a_well_formed_request_is_read_directly() -> None:
    name, credentials, settings, key = _inputs()
    assert (name, credentials.credentials, settings, key) == ("fraud", "pw_token", SETTINGS, "k-1")
    without_key = [(k, v) for k, v in GOOD.items() if k != "idempotency-key"]
    assert _inputs(headers=without_key)[3] is None


@pytest.mark.parametrize(
    ("name", "headers"),
    [
        ("Fraud", None),  # not a model name: 422 naming it
        ("fraud\n", None),  # nor is this one (a "$" of Python's re would take it)
        ("f" * 65, None),
        ("fraud", [("content-type", "text/plain"), ("authorization", "Bearer t")]),  # 415
        ("fraud", [("content-type", "application/json")]),  # no token: 401
        ("fraud", [("content-type", "application/json"), ("authorization", "Basic dTpw")]),
        ("fraud", [("content-type", "application/json"), ("authorization", "Bearer ")]),
        ("fraud", [*GOOD.items(), ("idempotency-key", "k-2")]),  # the key twice: 422
    ],
)
def test_a_request_a_dependency_would_refuse_goes_through_fastapi(
    name: str, headers: list[tuple[str, str]] | None
) -> None:
    assert _inputs(name, headers) is None


def test_the_batch_route_takes_the_fast_path() -> None:
    assert [type(route) for route in router.routes] == [BatchRoute]

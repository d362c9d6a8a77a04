"""The rejection counter middleware on a small Starlette app (no database)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.api.errors import problem_response, problem_type
from app.exporter.rejections import (
    INTERNAL_ERROR,
    RejectionCounter,
    RejectionCountingMiddleware,
    rejection_reason,
)


async def batches(request: Request) -> Response:
    outcome = request.query_params.get("outcome", "ok")
    if outcome == "ok":
        return JSONResponse({"batch_id": "x"}, status_code=202)
    if outcome == "boom":
        raise RuntimeError("boom")
    if outcome == "plain":
        return Response("nope", status_code=404)
    status, slug = outcome.split(":")
    return problem_response(int(status), type_=problem_type(slug), detail="bad")


def _client() -> tuple[TestClient, RejectionCounter]:
    counter = RejectionCounter()
    app = Starlette(
        routes=[
            Route("/v1/models/{name}/batches", batches, methods=["POST", "GET"]),
            Route("/v1/models/{name}", batches, methods=["POST"]),
        ]
    )
    app.add_middleware(RejectionCountingMiddleware, counter=counter)
    return TestClient(app, raise_server_exceptions=False), counter


def test_failed_batch_posts_count_by_problem_type() -> None:
    client, counter = _client()
    path = "/v1/models/fraud/batches"
    for outcome in ("422:invalid-input", "422:invalid-input", "413:body-too-large", "plain"):
        assert client.post(path, params={"outcome": outcome}).status_code >= 400
    assert client.post(path, params={"outcome": "boom"}).status_code == 500
    assert counter.counts() == {
        "invalid_input": 2,
        "body_too_large": 1,
        "http_404": 1,
        INTERNAL_ERROR: 1,
    }


@pytest.mark.parametrize(
    ("method", "path", "outcome"),
    [
        ("POST", "/v1/models/fraud/batches", "ok"),  # accepted
        ("GET", "/v1/models/fraud/batches", "422:invalid-input"),  # not an ingestion
        ("POST", "/v1/models/fraud", "422:invalid-input"),  # another route
    ],
)
def test_other_requests_are_not_counted(method: str, path: str, outcome: str) -> None:
    client, counter = _client()
    client.request(method, path, params={"outcome": outcome})
    assert counter.counts() == {}


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (409, b'{"type": "urn:priorwatch:problem:request-in-flight"}', "request_in_flight"),
        (404, b'{"type": "about:blank"}', "http_404"),
        (400, b"not json", "http_400"),
        (422, b'{"type": "urn:priorwatch:problem:Weird Slug!"}', "http_422"),
        (422, b"[1, 2]", "http_422"),
    ],
)
def test_rejection_reason(status: int, body: bytes, reason: str) -> None:
    assert rejection_reason(status, body) == reason

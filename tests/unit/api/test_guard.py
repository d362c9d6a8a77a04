"""The response guard's deadline: exempt paths wait as long as they take; a client that
leaves mid-body is nobody's error. The body timeout ends with the body."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive, Scope, Send

from app.api.body_limit import BodySizeLimitMiddleware
from app.api.guard import ResponseGuardMiddleware


async def _slow_app(scope: Scope, receive: Receive, send: Send) -> None:
    await asyncio.sleep(0.3)  # a database read longer than the deadline
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


async def _disconnected_app(scope: Scope, receive: Receive, send: Send) -> None:
    raise ClientDisconnect()


def _call(app: ResponseGuardMiddleware, path: str) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": path, "headers": []}
    asyncio.run(app(scope, receive, send))
    return sent


def test_an_exempt_path_has_no_deadline() -> None:
    guard = ResponseGuardMiddleware(
        _slow_app, deadline_seconds=0.05, retry_after_seconds=1, exempt_paths={"/metrics"}
    )
    assert _call(guard, "/metrics")[0]["status"] == 200
    assert _call(guard, "/v1/models")[0]["status"] == 503


def test_a_client_that_left_mid_body_gets_no_answer_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = ResponseGuardMiddleware(_disconnected_app, deadline_seconds=5, retry_after_seconds=1)
    with caplog.at_level("INFO", logger="priorwatch.api"):
        assert _call(guard, "/v1/models/m/batches") == []
    assert "the client disconnected" in caplog.text
    assert not [record for record in caplog.records if record.exc_info]


def test_the_body_timeout_leaves_the_wait_for_a_disconnect_alone() -> None:
    # after the whole body, a receive waits for the client to leave: no 408 then
    messages = [
        {"type": "http.request", "body": b"{}", "more_body": False},
        {"type": "http.disconnect"},
    ]
    got: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        got.append(await receive())
        await asyncio.sleep(0.1)  # past the body timeout
        got.append(await receive())

    async def receive() -> Message:
        return messages.pop(0)

    async def send(message: Message) -> None:
        raise AssertionError(f"nothing is sent: {message}")

    limit = BodySizeLimitMiddleware(app, max_body_bytes=100, body_timeout_seconds=0.05)
    scope = {"type": "http", "method": "POST", "path": "/x", "headers": []}
    asyncio.run(limit(scope, receive, send))
    assert [m["type"] for m in got] == ["http.request", "http.disconnect"]

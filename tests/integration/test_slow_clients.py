"""Slow clients over a real uvicorn server configured as ``priorwatch serve`` configures it.

A slow body holds no database connection (the caller is authorised first,
then the connection goes back to the pool before the body is awaited), a
body slower than its timeout gets 408, a connection idle or stuck in its
headers is closed, and the request deadline counts from the end of the body
read. Requests are written by hand (tests/_slow_http.py); with
``Expect: 100-continue`` the server's ``100 Continue`` says that the caller
was authorised and the body is being awaited.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx
import orjson
import pytest
import sqlalchemy as sa
import uvicorn
from _slow_http import SlowRequest
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from app.api.connections import HeaderTimeoutProtocol, ServerConfig, server_config
from app.config import Settings, get_settings
from app.main import create_app, run

PROBLEM = "application/problem+json"
BATCH = orjson.dumps(
    {"timestamp": datetime.now(UTC).isoformat(), "scores": [0.1, 0.9, 0.4], "labels": [0, 1, 0]}
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve(settings_for: Callable[..., Settings]) -> Iterator[Callable[..., int]]:
    """Serve ``create_app`` in a thread with :func:`server_config`; yield its port."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(database_url: str, **overrides: object) -> int:
        settings = settings_for(database_url, **overrides)
        port = _free_port()
        config = server_config(
            create_app(settings), settings, host="127.0.0.1", port=port, log_level="warning"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        while not server.started:
            assert thread.is_alive(), "uvicorn did not start"
            thread.join(0.05)
        return port

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(30)


@pytest.fixture
def slow_requests() -> Iterator[list[SlowRequest]]:
    opened: list[SlowRequest] = []
    yield opened
    for request in opened:
        request.close()


def _setup(port: int, admin: dict[str, str], model: str, keys: int) -> list[str]:
    """Register ``model`` and create ``keys`` ingest keys (each new key is a cache miss)."""
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as http:
        r = http.post("/v1/models", json={"name": model, "pi0": 0.1}, headers=admin)
        assert r.status_code == 201, r.text
        tokens = []
        for _ in range(keys):
            r = http.post(f"/v1/models/{model}/keys", json={"scopes": ["ingest"]}, headers=admin)
            assert r.status_code == 201, r.text
            tokens.append(str(r.json()["token"]))
    return tokens


def _head(token: str, length: int) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Content-Length": str(length),
        "Idempotency-Key": str(uuid.uuid4()),
    }


def _idle_in_transaction(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND state LIKE 'idle in transaction%'"
                    )
                ).scalar_one()
            )
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_slow_bodies_hold_no_database_connection(
    serve: Callable[..., int],
    pg_url: str,
    admin_headers: dict[str, str],
    slow_requests: list[SlowRequest],
) -> None:
    # a pool of 2 (1 + 1 overflow): before the fix, the third slow body waited for a
    # connection and got 503, and so did every other request
    port = serve(pg_url, database_pool_size=1, database_pool_timeout_seconds=1)
    slow_tokens = _setup(port, admin_headers, "slow", keys=4)
    (busy_token,) = _setup(port, admin_headers, "busy", keys=1)
    for token in slow_tokens:
        request = SlowRequest(port)
        slow_requests.append(request)
        request.send_head(
            "POST", "/v1/models/slow/batches", _head(token, len(BATCH)), expect_continue=True
        )
        assert request.read_interim_or_answer() == 100  # authorised, the body is awaited
        request.send_body(BATCH[:10])
    assert _idle_in_transaction(pg_url) == 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30.0) as http:
        r = http.post(
            "/v1/models/busy/batches",
            content=BATCH,
            headers={"Authorization": f"Bearer {busy_token}", "Content-Type": "application/json"},
        )
        assert r.status_code == 202, r.text
        assert http.get("/readyz").status_code == 200
    for request in slow_requests:
        request.send_body(BATCH[10:], last=True)
        answer = request.answer()
        assert answer.status == 202, answer.body
        assert orjson.loads(answer.body)["count"] == 3


def test_a_body_slower_than_its_timeout_gets_408_and_the_connection_closes(
    serve: Callable[..., int],
    sqlite_url: str,
    admin_headers: dict[str, str],
    slow_requests: list[SlowRequest],
) -> None:
    port = serve(sqlite_url, body_timeout_seconds=0.5)
    (token,) = _setup(port, admin_headers, "slow", keys=1)
    request = SlowRequest(port)
    slow_requests.append(request)
    request.send_head("POST", "/v1/models/slow/batches", _head(token, len(BATCH)))
    request.send_body(BATCH[:10])  # and nothing more
    answer = request.answer()
    assert answer.status == 408
    assert answer.headers["content-type"].startswith(PROBLEM)
    assert answer.headers["connection"] == "close"
    problem = orjson.loads(answer.body)
    assert problem["type"] == "urn:priorwatch:problem:body-timeout"
    assert "0.5 s" in problem["detail"]
    assert request.closed_by_server()


def test_idle_and_header_incomplete_connections_are_closed(
    serve: Callable[..., int], sqlite_url: str, slow_requests: list[SlowRequest]
) -> None:
    port = serve(sqlite_url, header_timeout_seconds=0.5, keep_alive_seconds=1)
    silent, partial, second = (SlowRequest(port, timeout=20.0) for _ in range(3))
    slow_requests.extend((silent, partial, second))
    partial.send_raw(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    second.send_head("GET", "/healthz", {})
    second.send_body(b"", last=True)
    assert second.answer().status == 200
    second.send_raw(b"GET /healthz HTT")  # the next request on the keep-alive connection
    assert silent.closed_by_server()  # never sent a byte
    assert partial.closed_by_server()
    assert second.closed_by_server()


def test_the_deadline_counts_from_the_end_of_the_body_read(
    serve: Callable[..., int],
    sqlite_url: str,
    admin_headers: dict[str, str],
    slow_requests: list[SlowRequest],
) -> None:
    port = serve(sqlite_url, request_deadline_seconds=1.0)
    (token,) = _setup(port, admin_headers, "slow", keys=1)
    warm_up = SlowRequest(port)  # the first batch of a process is slower
    slow_requests.append(warm_up)
    warm_up.send_head("POST", "/v1/models/slow/batches", _head(token, len(BATCH)))
    warm_up.send_body(BATCH, last=True)
    assert warm_up.answer().status == 202
    request = SlowRequest(port)
    slow_requests.append(request)
    request.send_head("POST", "/v1/models/slow/batches", _head(token, len(BATCH)))
    pieces = [BATCH[i : i + 5] for i in range(0, len(BATCH), 5)]
    for piece in pieces[:-1]:  # the body takes longer than the deadline
        request.send_body(piece)
        time.sleep(0.15)
    assert not request.answer_waiting()
    request.send_body(pieces[-1], last=True)
    answer = request.answer()
    assert answer.status == 202, answer.body  # a slow upload is not a database outage


def test_a_response_is_sent_with_no_connection_checked_out(
    database_url: str, settings_for: Callable[..., Settings], admin_headers: dict[str, str]
) -> None:
    # a client slow to read its response must not hold a pooled connection meanwhile
    app = create_app(settings_for(database_url))
    checked_out: list[int] = []

    async def watch(scope: Scope, receive: Receive, send: Send) -> None:
        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                checked_out.append(app.state.engine.pool.checkedout())
            await send(message)

        await app(scope, receive, watched_send)

    with TestClient(watch) as client:
        r = client.post("/v1/models", json={"name": "m", "pi0": 0.1}, headers=admin_headers)
        assert r.status_code == 201, r.text
        assert client.get("/v1/models/m/windows", headers=admin_headers).status_code == 200
        assert client.get("/v1/models", headers=admin_headers).status_code == 200
    assert checked_out == [0, 0, 0]


def test_serve_bounds_headers_and_idle_connections(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    configs: list[uvicorn.Config] = []

    class Server:  # records the configuration; "fails" to start, as on a taken port
        started = False

        def __init__(self, config: uvicorn.Config) -> None:
            configs.append(config)

        def run(self) -> None:
            pass

    monkeypatch.setattr(uvicorn, "Server", Server)
    monkeypatch.setenv("PRIORWATCH_DATABASE_URL", sqlite_url)
    monkeypatch.setenv("PRIORWATCH_HEADER_TIMEOUT_SECONDS", "3")
    monkeypatch.setenv("PRIORWATCH_KEEP_ALIVE_SECONDS", "7")
    get_settings.cache_clear()
    try:
        with pytest.raises(SystemExit) as exited:
            run(port=8123)
    finally:
        get_settings.cache_clear()
    assert exited.value.code == 3  # uvicorn's startup failure status
    (config,) = configs
    assert isinstance(config, ServerConfig) and config.http is HeaderTimeoutProtocol
    assert config.header_timeout_seconds == 3
    assert config.timeout_keep_alive == 7
    assert config.port == 8123

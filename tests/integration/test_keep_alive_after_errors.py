"""Error answers over a real uvicorn server keep the keep-alive connection usable.

Starlette's last-resort handler sends the 500 and then re-raises; uvicorn
then closes the connection without ``Connection: close``, and a client's next
request on it fails. Each test reuses ONE connection (httpx with a single
connection) and checks, through the peer port the server sees, that the
requests after the error travel on the same connection.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request

from app.config import Settings
from app.main import create_app

PROBLEM = "application/problem+json"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def serve(settings_for: Callable[..., Settings]) -> Iterator[Callable[..., httpx.Client]]:
    """Serve ``create_app`` (plus test routes) with uvicorn in a thread; yield a client
    limited to one connection."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []
    clients: list[httpx.Client] = []
    release = threading.Event()

    def start(database_url: str, **overrides: Any) -> httpx.Client:
        app = create_app(settings_for(database_url, **overrides))
        _add_test_routes(app, release)
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        while not server.started:
            assert thread.is_alive(), "uvicorn did not start"
            thread.join(0.05)
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=30.0,
        )
        clients.append(client)
        return client

    yield start
    release.set()
    for client in clients:
        client.close()
    for server, thread in servers:
        server.should_exit = True
        thread.join(30)


def _add_test_routes(app: FastAPI, release: threading.Event) -> None:
    @app.get("/test/peer")
    def peer(request: Request) -> dict[str, int]:
        assert request.client is not None
        return {"port": request.client.port}

    @app.get("/test/bug")
    def bug() -> None:
        raise RuntimeError("a bug in a handler")

    @app.get("/test/stall")
    def stall() -> None:
        release.wait(60)  # a database call that does not return


def _peer(client: httpx.Client) -> int:
    r = client.get("/test/peer")
    assert r.status_code == 200
    assert r.headers.get("connection", "").lower() != "close"
    return int(r.json()["port"])


def test_a_500_leaves_the_connection_usable(
    serve: Callable[..., httpx.Client], sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = serve(sqlite_url)
    before = _peer(client)
    r = client.get("/test/bug")
    assert r.status_code == 500
    assert r.headers["content-type"].startswith(PROBLEM)
    assert r.json()["type"] == "urn:priorwatch:problem:internal-error"
    assert "a bug" not in r.text
    assert r.headers.get("connection", "").lower() != "close"
    assert _peer(client) == before
    # the traceback was logged once, by the service (not again by uvicorn)
    assert caplog.text.count("Traceback") <= 1
    assert "Exception in ASGI application" not in caplog.text
    assert [rec.getMessage() for rec in caplog.records if rec.exc_info] == [
        "unhandled error on GET /test/bug"
    ]


def test_a_request_past_its_deadline_gets_503_and_the_connection_stays(
    serve: Callable[..., httpx.Client], sqlite_url: str
) -> None:
    # 2 s: /test/peer must answer within it too, in a process that may be busy (a 0.5 s
    # deadline 503'd it once in a full run)
    client = serve(sqlite_url, request_deadline_seconds=2.0, database_retry_after_seconds=3)
    before = _peer(client)
    r = client.get("/test/stall")
    assert r.status_code == 503
    assert r.headers["retry-after"] == "3"
    assert r.json()["type"] == "urn:priorwatch:problem:database-unavailable"
    assert _peer(client) == before


def test_client_errors_and_outages_keep_the_connection(
    serve: Callable[..., httpx.Client], sqlite_url: str, admin_headers: dict[str, str]
) -> None:
    client = serve(sqlite_url)
    before = _peer(client)
    assert client.get("/v1/models/nope", headers=admin_headers).status_code == 404
    assert client.post("/v1/models", content=b"{", headers=admin_headers).status_code in (400, 415)
    assert client.get("/no/such/route").status_code == 404
    assert _peer(client) == before
    down = serve(f"postgresql+psycopg://postgres@127.0.0.1:{_free_port()}/x")
    before = _peer(down)
    assert down.get("/v1/models", headers=admin_headers).status_code == 503
    assert _peer(down) == before


def test_a_body_refused_while_it_streams_says_the_connection_closes_or_keeps_it(
    serve: Callable[..., httpx.Client], sqlite_url: str, admin_headers: dict[str, str]
) -> None:
    client = serve(sqlite_url, max_body_bytes=1000)
    before = _peer(client)

    def chunks() -> Iterator[bytes]:
        for _ in range(20):
            yield b" " * 100

    r = client.post(
        "/v1/models",
        content=chunks(),
        headers={**admin_headers, "Content-Type": "application/json"},
    )
    assert r.status_code == 413
    closing = r.headers.get("connection", "").lower() == "close"
    after = _peer(client)
    assert closing or after == before, (closing, before, after)

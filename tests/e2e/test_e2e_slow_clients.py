"""Slow clients against a real ``priorwatch serve`` process on PostgreSQL (default pool).

Fifty batch bodies are in flight at once, each from its own key (every one
authorised from the database, no cache) and each sent slowly: headers with
``Expect: 100-continue``, the ``100 Continue`` that says the caller was
authorised, part of the body, a trickle, the rest. Meanwhile another model's
client posts batches, the admin reads and ``/readyz`` answers: all succeed
and no connection of the service sits idle in a transaction (the pool of
10 + 10 is free). Then every slow body is accepted, a body that stops
half-way gets 408, and connections idle or stuck in their headers are closed.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import httpx
import orjson
import pytest
import sqlalchemy as sa
from _e2e_support import ADMIN_TOKEN, HTTP_TIMEOUT, Processes, free_port, process_env, wait_ready
from _slow_http import SlowRequest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SLOW_BODIES = 50
BYSTANDER_BATCHES = 5
ENV = {
    "PRIORWATCH_BODY_TIMEOUT_SECONDS": "8",
    "PRIORWATCH_HEADER_TIMEOUT_SECONDS": "1",
    "PRIORWATCH_KEEP_ALIVE_SECONDS": "1",
}
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _body(i: int) -> bytes:
    at = datetime.now(UTC).replace(microsecond=0).isoformat()
    return orjson.dumps({"timestamp": at, "scores": [0.2, 0.7, i / 100], "labels": [0, 1, 0]})


def _keys(http: httpx.Client, model: str, count: int) -> list[str]:
    r = http.post("/v1/models", json={"name": model, "pi0": 0.1}, headers=ADMIN)
    assert r.status_code == 201, r.text
    tokens = []
    for _ in range(count):
        r = http.post(f"/v1/models/{model}/keys", json={"scopes": ["ingest"]}, headers=ADMIN)
        assert r.status_code == 201, r.text
        tokens.append(str(r.json()["token"]))
    return tokens


def _slow_post(port: int, token: str, body: bytes) -> SlowRequest:
    request = SlowRequest(port)
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "Idempotency-Key": str(uuid.uuid4()),
    }
    request.send_head("POST", "/v1/models/slow/batches", headers, expect_continue=True)
    return request


def idle_in_transaction(database_url: str) -> int:
    """Connections to ``database_url``'s database left idle inside a transaction."""
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            query = (
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND state LIKE 'idle in transaction%'"
            )
            return int(conn.execute(sa.text(query)).scalar_one())
    finally:
        engine.dispose()


def test_fifty_slow_bodies_leave_the_service_to_the_others(
    processes: Processes, empty_postgres_url: str
) -> None:
    env = process_env(empty_postgres_url, **ENV)
    processes.run("migrate", ["migrate"], env)
    port = free_port()
    processes.start("serve", ["serve", "--port", str(port)], env)
    base = f"http://127.0.0.1:{port}"
    wait_ready(base, processes)
    opened: list[SlowRequest] = []
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT) as http:
        tokens = _keys(http, "slow", SLOW_BODIES + 1)
        (bystander,) = _keys(http, "bystander", 1)
        try:
            silent, stuck = SlowRequest(port), SlowRequest(port)
            opened += [silent, stuck]
            stuck.send_raw(b"POST /v1/models/slow/batches HTTP/1.1\r\nHost: x\r\nAuthoriz")
            late = _slow_post(port, tokens[-1], _body(99))
            opened.append(late)
            assert late.read_interim_or_answer() == 100
            late.send_body(_body(99)[:20])  # and nothing more
            bodies = [_body(i) for i in range(SLOW_BODIES)]
            slow = []
            for token, body in zip(tokens, bodies, strict=False):
                request = _slow_post(port, token, body)
                opened.append(request)
                slow.append(request)
                assert request.read_interim_or_answer() == 100  # authorised, body awaited
                request.send_body(body[:20])
            for request, body in zip(slow, bodies, strict=True):  # a trickle
                request.send_body(body[20:25])
            # fifty bodies in flight: the others are served, the pool is free
            assert idle_in_transaction(empty_postgres_url) == 0
            headers = {"Authorization": f"Bearer {bystander}", "Content-Type": "application/json"}
            for i in range(BYSTANDER_BATCHES):
                r = http.post("/v1/models/bystander/batches", content=_body(i), headers=headers)
                assert r.status_code == 202, r.text
            assert http.get("/v1/models", headers=ADMIN).status_code == 200
            assert http.get("/readyz").status_code == 200
            for request, body in zip(slow, bodies, strict=True):
                request.send_body(body[25:], last=True)
            for request in slow:
                answer = request.answer()
                assert answer.status == 202, answer.body
            assert silent.closed_by_server()
            assert stuck.closed_by_server()
            answer = late.answer()
            assert answer.status == 408
            assert orjson.loads(answer.body)["type"] == "urn:priorwatch:problem:body-timeout"
            assert late.closed_by_server()
        finally:
            for request in opened:
                request.close()
    engine = sa.create_engine(empty_postgres_url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(
                sa.text(
                    "SELECT m.name, count(*) FROM batch b JOIN model m ON m.id = b.model_id"
                    " GROUP BY m.name ORDER BY m.name"
                )
            ).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in stored] == [
        ("bystander", BYSTANDER_BATCHES),
        ("slow", SLOW_BODIES),
    ]

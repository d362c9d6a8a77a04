"""A database that is down, slow or locked: 503 problem+json with Retry-After, one log
line per failure, bounded waits; and the server-side timeouts of every connection."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from app.config import Settings
from app.db.availability import describe_outage, is_outage
from app.db.session import make_engine

PROBLEM = "application/problem+json"


def _assert_unavailable(r: Any, retry_after: str = "7") -> None:
    assert r.status_code == 503, r.text
    assert r.headers["content-type"].startswith(PROBLEM)
    assert r.headers["retry-after"] == retry_after
    doc = r.json()
    assert doc["type"] == "urn:priorwatch:problem:database-unavailable", doc
    assert doc["status"] == 503


def test_postgres_down_answers_503_with_one_log_line(
    client_for: Callable[..., TestClient],
    admin_headers: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing listens on the port: every call that needs the database gets 503."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/priorwatch"
    client = client_for(url, database_retry_after_seconds=7)
    caplog.set_level(logging.INFO)
    caplog.clear()
    r = client.post("/v1/models", json={"name": "fraud", "pi0": 0.1}, headers=admin_headers)
    _assert_unavailable(r)
    records = [rec for rec in caplog.records if rec.levelno >= logging.WARNING]
    assert len(records) == 1, [rec.getMessage() for rec in records]
    assert records[0].exc_info is None
    assert "database unavailable on POST /v1/models" in records[0].getMessage()
    assert "Traceback" not in caplog.text
    r = client.get("/v1/models/fraud/windows", headers=admin_headers)
    _assert_unavailable(r)


def _closed_port() -> int:
    """A TCP port of 127.0.0.1 on which nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pg_settings(pg_url: str, **overrides: Any) -> Settings:
    return Settings(_env_file=None, database_url=pg_url, **overrides)  # type: ignore[call-arg]


@pytest.mark.postgres
def test_statement_timeout_is_set_on_every_connection(pg_url: str) -> None:
    engine = make_engine(pg_url, _pg_settings(pg_url, database_statement_timeout_seconds=0.2))
    try:
        with engine.connect() as c:
            assert c.execute(sa.text("SHOW statement_timeout")).scalar_one() == "200ms"
            assert c.execute(sa.text("SHOW lock_timeout")).scalar_one() == "5s"
        with pytest.raises(sa.exc.OperationalError) as info, engine.connect() as c:
            c.execute(sa.text("SELECT pg_sleep(5)"))
        assert is_outage(info.value)
        assert describe_outage(info.value).startswith("QueryCanceled: ")
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_lock_timeout_bounds_a_wait_for_a_locked_row(pg_url: str) -> None:
    engine = make_engine(pg_url, _pg_settings(pg_url, database_lock_timeout_seconds=0.2))
    try:
        with engine.connect() as holder, engine.connect() as waiter:
            holder.execute(sa.text("LOCK TABLE alembic_version IN ACCESS EXCLUSIVE MODE"))
            with pytest.raises(sa.exc.OperationalError) as info:
                waiter.execute(sa.text("SELECT * FROM alembic_version"))
            holder.rollback()
        assert is_outage(info.value)
        assert describe_outage(info.value).startswith("LockNotAvailable: ")
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_full_pool_answers_503_after_the_pool_timeout(
    pg_url: str,
    client_for: Callable[..., TestClient],
    admin_headers: dict[str, str],
) -> None:
    """Every pooled connection held elsewhere: the request waits pool_timeout, then 503."""
    client = client_for(
        pg_url,
        database_pool_size=1,  # and as many overflow connections
        database_pool_timeout_seconds=0.2,
        database_retry_after_seconds=7,
    )
    engine: sa.Engine = client.app.state.engine  # type: ignore[attr-defined]
    held = [engine.connect() for _ in range(2)]
    try:
        _assert_unavailable(client.get("/v1/models", headers=admin_headers))
    finally:
        for c in held:
            c.close()
    assert client.get("/v1/models", headers=admin_headers).status_code == 200


def test_sqlite_errors_that_are_not_outages_stay_bugs() -> None:
    import sqlite3

    assert is_outage(
        sa.exc.OperationalError("x", {}, sqlite3.OperationalError("database is locked"))
    )
    assert not is_outage(
        sa.exc.OperationalError("x", {}, sqlite3.OperationalError("no such table: t"))
    )
    assert not is_outage(ValueError("nothing to do with a database"))


def test_connection_options_of_the_url_are_kept() -> None:
    from app.db.session import postgres_connect_args

    args = postgres_connect_args(
        _pg_settings("postgresql+psycopg://x/y", database_connect_timeout_seconds=2.5),
        "-c search_path=app",
    )
    assert args["connect_timeout"] == 3
    assert args["options"] == "-c search_path=app -c statement_timeout=30000 -c lock_timeout=5000"
    assert args["keepalives"] == 1 and args["keepalives_idle"] == 10

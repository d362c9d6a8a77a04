"""Throwaway PostgreSQL databases, for the test suite and the benchmarks.

:func:`scratch_postgres_database` creates an empty database on a server,
yields its URL and drops it afterwards (``WITH (FORCE)``: connections left
open by the block do not keep it alive). tests/conftest.py turns an
unreachable server into a skip (or a failure when PostgreSQL is required);
bench/_common.py into a skipped benchmark section.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

SERVER_URL_VARIABLE = "PRIORWATCH_TEST_POSTGRES_URL"
"""The environment variable naming the server of scratch databases."""
DEFAULT_SERVER_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
"""The server of scratch databases when the variable is not set."""


def scratch_server_url() -> str:
    """The server scratch databases are created on (tests and benchmarks alike)."""
    return os.environ.get(SERVER_URL_VARIABLE, DEFAULT_SERVER_URL)


class ServerUnavailable(Exception):
    """The PostgreSQL server could not be reached; ``reason`` is the driver's first line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@contextmanager
def scratch_postgres_database(prefix: str, server_url: str | None = None) -> Iterator[str]:
    """Create an empty database named ``<prefix>_<random>``; yield its URL; drop it.

    Parameters
    ----------
    prefix : str
        Start of the new database's name (e.g. ``"priorwatch_test"``).
    server_url : str, optional
        SQLAlchemy URL of any database on the server (used to create and
        drop); default :func:`scratch_server_url`.

    Raises
    ------
    ServerUnavailable
        Before yielding, when the server cannot be reached.
    """
    server = sa.engine.make_url(server_url or scratch_server_url())
    admin = sa.create_engine(
        server, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
    )
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.OperationalError as exc:
        admin.dispose()
        raise ServerUnavailable(str(exc.orig).strip().splitlines()[0]) from None
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

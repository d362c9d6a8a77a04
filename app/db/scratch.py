"""Throwaway PostgreSQL databases, for the test suite and the benchmarks.

:func:`scratch_postgres_database` creates an empty database on a server,
yields its URL and drops it afterwards (``WITH (FORCE)``: connections left
open by the block do not keep it alive). tests/conftest.py turns an
unreachable server into a skip (or a failure when PostgreSQL is required);
bench/_common.py into a skipped benchmark section.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa


class ServerUnavailable(Exception):
    """The PostgreSQL server could not be reached; ``reason`` is the driver's first line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@contextmanager
def scratch_postgres_database(server_url: str, prefix: str) -> Iterator[str]:
    """Create an empty database named ``<prefix>_<random>``; yield its URL; drop it.

    Parameters
    ----------
    server_url : str
        SQLAlchemy URL of any database on the server (used to create and drop).
    prefix : str
        Start of the new database's name (e.g. ``"priorwatch_test"``).

    Raises
    ------
    ServerUnavailable
        Before yielding, when the server cannot be reached.
    """
    server = sa.engine.make_url(server_url)
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

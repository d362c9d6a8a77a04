"""Several reads in one round trip: a psycopg pipeline on PostgreSQL.

:func:`read_all` runs Core statements through the driver's pipeline mode, each
compiled once per dialect (:func:`driver_sql`) and its values bound as
SQLAlchemy binds them; a driver error is raised as SQLAlchemy's. The
admission of a batch (:func:`app.db.queries.read_admission`) reads with it, and
its one-statement store runs a prepared statement compiled the same way (on
SQLite, statements compiled the same way on a raw sqlite3 connection).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy import CompoundSelect
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import ClauseElement, Select
from sqlalchemy.sql.compiler import SQLCompiler

Read = Select[Any] | CompoundSelect[Any]
"""A statement :func:`read_all` runs."""


def read_all(session: Session, reads: Sequence[tuple[Read, dict[str, Any]]]) -> list[list[Any]]:
    """The rows of each read: on PostgreSQL in one round trip (a driver pipeline;
    a driver error is raised as SQLAlchemy raises it), elsewhere one by one."""
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        return [list(connection.execute(statement, params)) for statement, params in reads]
    driver = connection.connection.driver_connection
    assert driver is not None
    with as_dbapi_error(), ExitStack() as stack:
        cursors = [stack.enter_context(driver.cursor()) for _ in reads]
        with driver.pipeline():
            for cursor, (statement, params) in zip(cursors, reads, strict=True):
                compiled = driver_sql(statement, session.get_bind().dialect)
                cursor.execute(compiled.sql, compiled.params(params))
        return [cursor.fetchall() for cursor in cursors]


@dataclass(frozen=True)
class DriverSql:
    """A Core statement compiled for the driver: its SQL text and how to bind values."""

    sql: str
    compiled: SQLCompiler
    processors: Mapping[str, Callable[[Any], Any]]

    def params(self, values: dict[str, Any]) -> dict[str, Any]:
        bound = self.compiled.construct_params(values)
        return {
            name: processor(value) if (processor := self.processors.get(name)) else value
            for name, value in bound.items()
        }

    def positional(self, values: dict[str, Any]) -> tuple[Any, ...]:
        """The values of :meth:`params` in the order of a positional dialect's
        placeholders (SQLite's ``?``)."""
        named = self.params(values)
        order = self.compiled.positiontup
        assert order is not None, "a statement compiled for a named paramstyle"
        return tuple(named[name] for name in order)


_DRIVER_SQL: dict[tuple[int, str], DriverSql] = {}


def driver_sql(statement: ClauseElement, dialect: Dialect) -> DriverSql:
    """``statement`` compiled once per dialect, for a driver cursor (named parameters)."""
    cache_key = (id(statement), dialect.name)
    if cache_key not in _DRIVER_SQL:
        compiled = statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        processors = {}
        for name, bind in compiled.binds.items():
            processor = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if processor is not None:
                processors[name] = processor
        _DRIVER_SQL[cache_key] = DriverSql(compiled.string, compiled, processors)
    return _DRIVER_SQL[cache_key]


@contextmanager
def as_dbapi_error(pooled: PoolProxiedConnection | None = None) -> Iterator[None]:
    """Raise a driver error met outside SQLAlchemy as SQLAlchemy would (``IntegrityError``,
    ``OperationalError``...: what the API's error handlers know). A ``pooled``
    psycopg connection that the error left broken is invalidated (the pool replaces it)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise DBAPIError.instance(None, None, exc, sqlite3.Error) from exc
    except psycopg.Error as exc:
        broken = pooled is not None and pooled.driver_connection.closed  # type: ignore[union-attr]
        if broken:
            assert pooled is not None
            pooled.invalidate(exc)
        raise DBAPIError.instance(
            None, None, exc, psycopg.Error, connection_invalidated=broken
        ) from exc

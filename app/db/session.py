"""Engine and session factory.

SQLite (embedded mode) is configured for one writer at a time: WAL journal (readers
never block the writer), foreign keys on, a busy timeout, and SQLAlchemy's
recommended explicit transaction control so that a writer can start its
transaction with ``BEGIN IMMEDIATE`` (take the write lock first, then read:
no lost updates between read and write). Use :func:`begin_write` for that.
"""

from __future__ import annotations

import math
import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg.pq import Format
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db.types import json_text

SQLITE_BEGIN_OPTION = "priorwatch_sqlite_begin"
"""Connection execution option naming the SQLite BEGIN mode (DEFERRED or IMMEDIATE)."""

_BINARY_OPTION = "priorwatch_binary_results"
BINARY_RESULTS = {_BINARY_OPTION: True}
"""Execution options of a statement whose rows PostgreSQL sends in binary format
(:func:`_binary_results`); ignored on SQLite. For the reads of histograms: an
80 KB ``bytea`` comes as its bytes instead of 160 KB of hex text that the server
encodes and the client parses (about 0.2 ms of each side's CPU per histogram)."""


def make_engine(database_url: str, settings: Settings | None = None) -> Engine:
    """An engine for ``database_url`` with the service's connection settings.

    Parameters
    ----------
    database_url : str
        SQLAlchemy URL (``sqlite:///file.db`` or ``postgresql+psycopg://...``).
    settings : Settings, optional
        Pool size, timeouts and SQLite busy timeout; defaults of :class:`Settings`
        if omitted.

    Notes
    -----
    Every wait is bounded: a free pooled connection (``pool_timeout``), a new
    connection (libpq ``connect_timeout``), a statement and a row lock
    (PostgreSQL ``statement_timeout`` and ``lock_timeout``, set for every
    session as connection options), SQLite's write lock (busy timeout). Pooled
    connections are tested before use, so the pool recovers by itself after
    the server restarted: with psycopg by a look at the socket
    (:func:`_check_alive`, no round trip), otherwise by ``pool_pre_ping``.
    """
    settings = settings or Settings(database_url=database_url)
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        engine = create_engine(
            url,
            connect_args={
                "timeout": settings.sqlite_busy_timeout_seconds,
                "check_same_thread": False,
            },
            pool_timeout=settings.database_pool_timeout_seconds,
            json_serializer=json_text,
        )
        _configure_sqlite(engine, settings)
        return engine
    connect_args: dict[str, Any] = {}
    if url.get_backend_name() == "postgresql":
        connect_args = postgres_connect_args(settings, url.query.get("options"))
    psycopg_driver = url.get_driver_name() == "psycopg"
    engine = create_engine(
        url,
        pool_size=settings.database_pool_size,
        max_overflow=settings.database_pool_size,
        pool_timeout=settings.database_pool_timeout_seconds,
        pool_pre_ping=not psycopg_driver,  # psycopg: _check_alive, no round trip
        connect_args=connect_args,
        json_serializer=json_text,
    )
    if url.get_backend_name() == "postgresql":
        event.listen(engine, "connect", _prefer_lz4_toast)
    if psycopg_driver:
        event.listen(engine, "checkout", _check_alive)
        event.listen(engine, "before_cursor_execute", _binary_results)
    return engine


def _check_alive(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Test a pooled psycopg connection before use without a round trip to the server.

    An idle connection has nothing to read: if its socket is readable, the
    server has closed it (a restart, a terminated backend: the closing
    message or the end of the stream is waiting) or sent what no idle
    session expects; either way it is replaced, as a failed ``pool_pre_ping``
    would have it (``DisconnectionError``: the pool reconnects, and drops the
    connections older than this one). A server that stopped answering
    without closing is found by the statement itself (the TCP and request
    deadlines bound it), as it was with a ping.
    """
    if dbapi_connection.closed:
        raise DisconnectionError("the connection is closed")
    poller = select.poll()  # not select.select: a descriptor may be above FD_SETSIZE
    poller.register(dbapi_connection.fileno(), select.POLLIN)
    if poller.poll(0):
        raise DisconnectionError("the server closed the connection or sent unexpected data")


TCP_KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}
"""libpq TCP settings: a connection to a server that went silent at the network level
(host down, path cut) fails after about 25 to 30 s instead of the kernel's two hours,
so the thread blocked on it, whose request the deadline already answered, ends and its
pooled connection is replaced. A frozen server process is not detected (its kernel
still answers): the request deadline covers it (app/api/guard.py)."""


def postgres_connect_args(settings: Settings, url_options: Any = None) -> dict[str, Any]:
    """libpq parameters bounding every wait of a PostgreSQL connection.

    ``connect_timeout`` (whole seconds, at least 1), :data:`TCP_KEEPALIVES`, and
    the server settings ``statement_timeout`` and ``lock_timeout`` (milliseconds)
    given as startup ``options``, after any ``options`` of the URL (those are kept).
    """
    statement_ms = max(1, round(settings.database_statement_timeout_seconds * 1000))
    lock_ms = max(1, round(settings.database_lock_timeout_seconds * 1000))
    options = f"-c statement_timeout={statement_ms} -c lock_timeout={lock_ms}"
    if isinstance(url_options, str) and url_options.strip():
        options = f"{url_options.strip()} {options}"
    return {
        "connect_timeout": max(1, math.ceil(settings.database_connect_timeout_seconds)),
        **TCP_KEEPALIVES,
        "options": options,
    }


def _prefer_lz4_toast(dbapi_connection: Any, _record: Any) -> None:
    """Compress large values (the 80 KB histograms) with lz4 where the server has it.

    Every batch rewrites its window's histograms; with PostgreSQL's default
    pglz that compression is most of the write (about 4x slower than lz4,
    bench/bench_ingest.py). Session-level, PostgreSQL 14+; stored values keep
    whatever compression they were written with, so mixing is harmless.
    """
    with dbapi_connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        row = cursor.fetchone()
        if row is not None and row[0]:
            cursor.execute("SET default_toast_compression = 'lz4'")
    dbapi_connection.commit()


def _binary_results(
    _conn: Any, cursor: Any, _statement: str, _params: Any, context: Any, _many: bool
) -> None:
    """Ask for binary rows when the statement has the :data:`BINARY_RESULTS` option.

    The values are the same either way (psycopg has a binary loader for every
    built-in type); only the wire format changes. The cursor serves this one
    statement (SQLAlchemy opens one per execution).
    """
    if context is not None and context.execution_options.get(_BINARY_OPTION):
        cursor.format = Format.BINARY


def _configure_sqlite(engine: Engine, settings: Settings) -> None:
    busy_ms = int(settings.sqlite_busy_timeout_seconds * 1000)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy (the "begin" hook below).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
        if engine.url.database not in (None, "", ":memory:"):
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")
        conn.exec_driver_sql(f"BEGIN {mode}")


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that never expire on commit (handlers read objects after commit)."""
    return sessionmaker(bind=engine, expire_on_commit=False, autoflush=False)


_SQLITE_WRITERS: dict[str, threading.Lock] = {}
_SQLITE_WRITERS_GUARD = threading.Lock()


def _sqlite_writer_lock(engine: Engine) -> threading.Lock:
    """One lock per SQLite database in this process: writers queue here, in order,
    instead of polling SQLite's busy handler."""
    key = str(engine.url)
    with _SQLITE_WRITERS_GUARD:
        return _SQLITE_WRITERS.setdefault(key, threading.Lock())


@contextmanager
def write_transaction(session: Session) -> Iterator[None]:
    """Run the block as one write transaction of ``session``, committed at the end.

    On SQLite: a read transaction left open by the session is ended first (it
    holds no writes), then the process's writer lock and ``BEGIN IMMEDIATE``
    are taken: writes are serialised and a read inside the block sees the
    latest data. On PostgreSQL an open transaction is kept (it may hold a
    transaction-level advisory lock); rows are locked by the queries.
    Any exception rolls the transaction back.
    """
    engine = session.get_bind()
    if engine.dialect.name != "sqlite":
        with _committed(session):
            yield
        return
    if session.new or session.dirty or session.deleted:
        raise RuntimeError("write_transaction() would discard pending changes")
    if session.in_transaction():
        session.rollback()
    assert isinstance(engine, Engine)
    with _sqlite_writer_lock(engine):
        begin_write(session)
        with _committed(session):
            yield


@contextmanager
def _committed(session: Session) -> Iterator[None]:
    """Commit ``session`` after the block; any exception rolls it back."""
    try:
        yield
        session.commit()
    except BaseException:
        session.rollback()
        raise


@contextmanager
def sqlite_write(engine: Engine) -> Iterator[Any]:
    """A pooled sqlite3 connection of ``engine`` in a write transaction for the block.

    As :func:`write_transaction` writes, without a session: the process's
    writer lock and ``BEGIN IMMEDIATE`` are taken, the transaction is
    committed after the block and rolled back if it raises. For statements
    run on the driver connection itself (app/db/queries.py), whose values are
    prepared before: the block should run nothing but the statements. The
    connection is taken from the pool before the lock and returned after it,
    so that the lock is held for the statements alone (a thread holding it
    waits for the GIL after each statement; the less Python it runs there,
    the less the other writers queue).
    """
    pooled = engine.raw_connection()
    try:
        driver = pooled.driver_connection
        assert driver is not None
        with _sqlite_writer_lock(engine):
            driver.execute("BEGIN IMMEDIATE")
            try:
                yield driver
            except BaseException:
                driver.rollback()
                raise
            driver.execute("COMMIT")
    finally:
        pooled.close()


def begin_write(session: Session) -> None:
    """Start ``session``'s transaction as a writer.

    On SQLite this issues ``BEGIN IMMEDIATE``, taking the database write lock
    before the first read, so a read-modify-write cannot interleave with
    another writer. On PostgreSQL it only starts the transaction; writers
    there lock rows (``SELECT ... FOR UPDATE``). Call it before any query.
    """
    if session.in_transaction():
        raise RuntimeError("begin_write() must be called before the session's first query")
    if session.get_bind().dialect.name == "sqlite":
        session.connection(execution_options={SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    else:
        session.connection()

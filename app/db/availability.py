"""Tell a database outage from a bug: which exceptions mean "try again later".

An outage is anything the client cannot fix and that ends on its own: the
server refuses or drops connections, a connection or pool wait timed out,
a statement ran past ``statement_timeout`` or waited past ``lock_timeout``,
SQLite's write lock stayed busy. The API answers these with 503 and
``Retry-After`` and logs one line (:func:`describe_outage`); the worker
backs off and retries. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sqlite3

import psycopg
from sqlalchemy import exc as sa_exc

_SQLITE_TRANSIENT = ("database is locked", "database is busy", "unable to open database")
"""SQLite OperationalError messages that mean the file is busy or unreachable
(others, e.g. "no such table", are not outages)."""


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` means the database is unreachable, overloaded or timed out.

    Parameters
    ----------
    error : BaseException
        An exception raised while talking to the database.
    """
    if isinstance(error, sa_exc.TimeoutError):  # pool checkout timed out
        return True
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return True
        error = error.orig if error.orig is not None else error
    if isinstance(error, sqlite3.OperationalError):
        message = str(error).lower()
        return any(m in message for m in _SQLITE_TRANSIENT)
    # Connection failures, QueryCanceled (statement_timeout), LockNotAvailable
    # (lock_timeout), AdminShutdown, deadlocks... are all psycopg.OperationalError.
    return isinstance(error, psycopg.OperationalError)


def describe_outage(error: BaseException) -> str:
    """One line naming the error: its class and the first line of its message."""
    if isinstance(error, sa_exc.DBAPIError) and error.orig is not None:
        error = error.orig
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}".strip()

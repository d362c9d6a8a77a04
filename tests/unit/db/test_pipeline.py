"""Statements run on a driver connection (app/db/pipeline.py): positional values in the
order of SQLite's placeholders, and driver errors raised as SQLAlchemy raises them."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import Integer, String, bindparam, literal, select
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError

from app.db.pipeline import as_dbapi_error, driver_sql


def test_positional_values_follow_the_placeholders_a_repeated_bind_included() -> None:
    statement = select(
        bindparam("b", type_=String),
        bindparam("a", type_=Integer),
        bindparam("b", type_=String) + literal("!"),
    )
    compiled = driver_sql(statement, sqlite.dialect())
    assert compiled.sql.count("?") == 4  # the literal is bound too
    with sqlite3.connect(":memory:") as conn:
        row = conn.execute(compiled.sql, compiled.positional({"a": 7, "b": "x"})).fetchone()
    assert row == ("x", 7, "x!")


def test_a_sqlite_error_is_raised_as_sqlalchemy_raises_it() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO t VALUES ('a')")
        with pytest.raises(IntegrityError) as raised, as_dbapi_error():
            conn.execute("INSERT INTO t VALUES ('a')")
    finally:
        conn.close()
    assert isinstance(raised.value.orig, sqlite3.IntegrityError)

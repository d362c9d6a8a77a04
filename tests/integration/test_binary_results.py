"""Statements with ``BINARY_RESULTS`` (PostgreSQL): their rows come in binary format and
hold the same values as in text format, for every column of the tables the worker reads
that way (aggregates with their histograms, deltas, models with their bin edges)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _worker_support import (
    fold_pending,
    post_batch,
    register_model,
    session_factory_for,
    utcnow,
)
from psycopg.pq import Format
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db.models import BatchDelta, Model, WindowAggregate
from app.db.session import BINARY_RESULTS

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_factory(pg_url: str) -> Iterator[sessionmaker[Session]]:
    with session_factory_for(pg_url) as f:
        yield f


def _rows(session: Session, table: Any, **options: Any) -> list[tuple[Any, ...]]:
    columns = list(table.__table__.c)
    return [tuple(r) for r in session.execute(sa.select(*columns), execution_options=options)]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return type(a) is type(b) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("table", [WindowAggregate, BatchDelta, Model])
def test_binary_rows_hold_the_same_values_as_text_rows(
    pg_factory: sessionmaker[Session], pg_url: str, table: Any
) -> None:
    settings = Settings(_env_file=None, database_url=pg_url)  # type: ignore[call-arg]
    model = register_model(pg_factory)
    post_batch(pg_factory, model, settings, at=utcnow(), rng=np.random.default_rng(3))
    if table is WindowAggregate:
        assert fold_pending(pg_url) == 1  # the aggregate's histograms are set by the fold
    with pg_factory() as session:
        text_rows = _rows(session, table)
        binary_rows = _rows(session, table, **BINARY_RESULTS)
    assert text_rows and len(text_rows) == len(binary_rows)
    arrays = [v for row in binary_rows for v in row if isinstance(v, np.ndarray)]
    assert arrays and all(a.size for a in arrays)  # bytea values were read both ways
    for text_row, binary_row in zip(text_rows, binary_rows, strict=True):
        for column, a, b in zip(table.__table__.c, text_row, binary_row, strict=True):
            assert _same(a, b), column.name


def test_the_option_asks_for_binary_rows_and_only_for_its_statement(
    pg_factory: sessionmaker[Session],
) -> None:
    formats: list[Format] = []

    def seen(_conn: Any, cursor: Any, *_args: Any) -> None:
        formats.append(cursor.format)

    engine = pg_factory.kw["bind"]
    sa.event.listen(engine, "after_cursor_execute", seen)
    try:
        with pg_factory() as session:
            session.execute(sa.select(sa.literal(1)), execution_options=BINARY_RESULTS)
            session.execute(sa.select(sa.literal(1)))
    finally:
        sa.event.remove(engine, "after_cursor_execute", seen)
    assert formats[-2:] == [Format.BINARY, Format.TEXT]

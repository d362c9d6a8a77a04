"""Queries of the API side. They flush at most; they never commit (the caller owns
the transaction)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Float, cast, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import ALL_SEGMENTS, ApiKey, Batch, Model, WindowAggregate


def get_model_by_name(session: Session, name: str) -> Model | None:
    return session.scalars(select(Model).where(Model.name == name)).one_or_none()


def list_models(session: Session) -> Sequence[Model]:
    return session.scalars(select(Model).order_by(Model.name)).all()


def find_api_key_by_hash(session: Session, token_hash: str) -> ApiKey | None:
    """The key whose token hashes to ``token_hash`` (revoked keys included)."""
    return session.scalars(select(ApiKey).where(ApiKey.token_hash == token_hash)).first()


def list_api_keys(session: Session, model_id: int) -> Sequence[ApiKey]:
    return session.scalars(
        select(ApiKey).where(ApiKey.model_id == model_id).order_by(ApiKey.created_at, ApiKey.id)
    ).all()


def get_api_key(session: Session, model_id: int, key_id: uuid.UUID) -> ApiKey | None:
    return session.get(ApiKey, (model_id, key_id))


def find_batch_by_idempotency_key(session: Session, model_id: int, key: str) -> Batch | None:
    return session.scalars(
        select(Batch).where(Batch.model_id == model_id, Batch.idempotency_key == key)
    ).one_or_none()


def model_example_total(session: Session, model_id: int) -> float:
    """Examples stored for the model: the sum of its all-traffic windows' ``n`` and
    ``n_unlabelled``.

    Summed as floating point, which cannot overflow (an integer SUM raises on
    SQLite past 2^63); exact to a few parts in 10^16, enough for a ceiling.
    """
    total = session.scalar(
        select(
            func.sum(cast(WindowAggregate.n, Float) + cast(WindowAggregate.n_unlabelled, Float))
        ).where(WindowAggregate.model_id == model_id, WindowAggregate.segment == ALL_SEGMENTS)
    )
    return float(total or 0.0)


def lock_window_aggregates(
    session: Session,
    model_id: int,
    window_start: datetime,
    segments: Sequence[str],
    thresholds: Sequence[float],
    now: datetime,
) -> list[WindowAggregate]:
    """Create the missing aggregates of one window, lock them all and read them: one statement.

    ``INSERT ... ON CONFLICT (key) DO UPDATE SET version = version ... RETURNING``
    over the rows in ascending ``segment`` order: a missing row is created
    empty, an existing one is locked by the (no-op) update, and either way the
    row comes back, in one round trip. Rows are taken in ascending ``segment``
    order, the one order every writer uses (the worker's
    ``invalidate_windows`` too), so a writer only ever waits for a row while
    holding rows that sort before it, and concurrent batches cannot deadlock
    (tests/integration/test_ingest_concurrency.py). A writer that meets
    another's uncommitted insert of the same row waits for it, then updates
    the committed row. On SQLite the caller holds the database write lock
    (BEGIN IMMEDIATE).

    Returns
    -------
    list of WindowAggregate
        One per distinct segment key, in ascending segment order, with the
        values of this transaction (identity map refreshed).
    """
    keys = sorted(set(segments))
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    empty_confusion = [
        {"threshold": float(t), "tp": 0, "fp": 0, "fn": 0, "tn": 0} for t in thresholds
    ]
    rows_in = [
        {
            "model_id": model_id,
            "segment": segment,
            "window_start": window_start,
            "n": 0,
            "positives": 0,
            "confusion": empty_confusion,
            "version": 0,
            "dirty": False,
            "created_at": now,
            "updated_at": now,
        }
        for segment in keys
    ]
    # An ORM bulk upsert (parameter list, not ``.values([...])``): the statement
    # compiles once per process and is cached, where a multi-VALUES construct is
    # compiled again on every call (about 3 ms, bench/bench_ingest.py). The rows
    # still go out as one INSERT, in ``keys`` order.
    upsert = (
        insert(WindowAggregate)
        .on_conflict_do_update(
            index_elements=[
                WindowAggregate.model_id,
                WindowAggregate.segment,
                WindowAggregate.window_start,
            ],
            set_={"version": WindowAggregate.version},
        )
        .returning(WindowAggregate)
    )
    rows = session.scalars(upsert, rows_in, execution_options={"populate_existing": True}).all()
    return sorted(rows, key=lambda row: row.segment)


@dataclass(frozen=True)
class StoredAnswer:
    """What a replay needs of an accepted batch: its key, body hash and response."""

    idempotency_key: str
    request_hash: str
    response: dict[str, Any]


def lock_and_find_answer(
    session: Session, lock_id: int, model_id: int, key: str
) -> tuple[bool, StoredAnswer | None]:
    """PostgreSQL: take the advisory lock ``lock_id`` if free, then look ``key`` up.

    Two statements in one round trip (psycopg pipeline mode) of the session's
    transaction. The server runs them in order, each with its own snapshot, so
    the lookup sees every batch committed before the lock was taken, exactly
    as two round trips would. The lock lives until the transaction ends.

    Returns
    -------
    locked : whether the lock was taken (if not, ignore the answer).
    answer : the stored answer of (model, key), or None.
    """
    driver = session.connection().connection.driver_connection
    assert driver is not None
    with driver.cursor() as lock_cursor, driver.cursor() as find_cursor:
        with driver.pipeline():
            lock_cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", (lock_id,))
            find_cursor.execute(
                "SELECT request_hash, response FROM batch"
                " WHERE model_id = %s AND idempotency_key = %s",
                (model_id, key),
            )
        lock_row = lock_cursor.fetchone()
        found = find_cursor.fetchone()
    locked = bool(lock_row is not None and lock_row[0])
    if found is None:
        return locked, None
    response = found[1] if isinstance(found[1], dict) else orjson.loads(found[1])
    return locked, StoredAnswer(key, str(found[0]), response)

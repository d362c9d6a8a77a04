"""Queries of the API side. They flush at most; they never commit (the caller owns
the transaction)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import BigInteger, Float, String, Subquery, cast, func, literal, select, union_all
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import ALL_SEGMENTS, ApiKey, Batch, BatchDelta, Model, WindowAggregate


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


@dataclass(frozen=True)
class ExampleTotals:
    """What :func:`example_totals` read (rows labelled or not).

    Attributes
    ----------
    window_counts : examples of each aggregate of the window, in the order asked.
    model_total : examples of the model's all-traffic windows, summed as
        floating point, which cannot overflow (an integer SUM raises on SQLite
        past 2^63); exact to a few parts in 10^16, enough for a ceiling.
    missing : the aggregates of the window that do not exist yet.
    """

    window_counts: list[int]
    model_total: float
    missing: list[str]


def example_totals(
    session: Session, model_id: int, window_start: datetime, segments: Sequence[str]
) -> ExampleTotals:
    """Examples in the window's aggregates and in the whole model, unfolded deltas included.

    One statement, a plain read (no lock): a batch committed meanwhile is not
    seen, which the headroom of the count ceilings absorbs
    (app/services/count_limits.py).

    The ``kind`` column tells the aggregates' rows (0) from the deltas' (1),
    so that the caller knows which aggregate rows must still be created.
    """
    parts = []
    tables: tuple[type[WindowAggregate] | type[BatchDelta], ...] = (WindowAggregate, BatchDelta)
    for kind, table in enumerate(tables):
        parts.append(
            select(
                literal(kind),
                table.segment,
                func.sum(table.n + table.n_unlabelled),
                literal(None, Float),
            )
            .where(
                table.model_id == model_id,
                table.window_start == window_start,
                table.segment.in_(list(segments)),
            )
            .group_by(table.segment)
        )
        parts.append(
            select(
                literal(kind),
                literal(None, String),
                literal(None, BigInteger),
                func.sum(cast(table.n, Float) + cast(table.n_unlabelled, Float)),
            ).where(table.model_id == model_id, table.segment == ALL_SEGMENTS)
        )
    counts: dict[str, int] = dict.fromkeys(segments, 0)
    existing: set[str] = set()
    model_total = 0.0
    for kind, segment, n, total in session.execute(union_all(*parts)).all():
        if segment is None:
            model_total += float(total or 0.0)
            continue
        counts[segment] += int(n or 0)
        if kind == 0:
            existing.add(segment)
    missing = [s for s in segments if s not in existing]
    return ExampleTotals(list(counts.values()), model_total, missing)


def ensure_window_aggregates(
    session: Session,
    model_id: int,
    window_start: datetime,
    segments: Sequence[str],
    thresholds: Sequence[float],
    now: datetime,
) -> None:
    """Create the window's aggregate rows that do not exist yet (empty, version 0).

    ``INSERT ... ON CONFLICT DO NOTHING``: an existing row is neither written
    nor locked, so concurrent batches into one window do not wait for each
    other (only for a concurrent, uncommitted creation of the same row). The
    rows are inserted in ascending ``segment`` order. On SQLite the caller
    holds the database write lock (BEGIN IMMEDIATE).
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
            "batches": 0,
            "version": 0,
            "dirty": False,
            "created_at": now,
            "updated_at": now,
        }
        for segment in keys
    ]
    # A parameter list (not ``.values([...])``): the statement compiles once per
    # process and is cached (bench/bench_ingest.py).
    session.execute(insert(WindowAggregate).on_conflict_do_nothing(), rows_in)


def unfolded_totals(model_id: int, segment: str) -> Subquery:
    """Per window of (model, segment) with unfolded deltas: ``deltas``, ``n``, ``positives``,
    ``n_unlabelled``."""
    return (
        select(
            BatchDelta.window_start,
            func.count().label("deltas"),
            func.sum(BatchDelta.n).label("n"),
            func.sum(BatchDelta.positives).label("positives"),
            func.sum(BatchDelta.n_unlabelled).label("n_unlabelled"),
        )
        .where(BatchDelta.model_id == model_id, BatchDelta.segment == segment)
        .group_by(BatchDelta.window_start)
        .subquery()
    )


def unfolded_deltas(
    session: Session, model_id: int, segment: str, starts: Collection[datetime]
) -> list[BatchDelta]:
    """The unfolded deltas of the windows of (model, segment) starting at ``starts``."""
    return list(
        session.scalars(
            select(BatchDelta).where(
                BatchDelta.model_id == model_id,
                BatchDelta.segment == segment,
                BatchDelta.window_start.in_(list(starts)),
            )
        )
    )


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

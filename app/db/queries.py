"""Queries of the API side. They flush at most; they never commit (the caller owns
the transaction)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import ApiKey, Batch, Model, WindowAggregate


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


def count_batches(session: Session, model_id: int) -> int:
    return int(
        session.scalar(select(func.count()).select_from(Batch).where(Batch.model_id == model_id))
        or 0
    )


def lock_window_aggregates(
    session: Session,
    model_id: int,
    window_start: datetime,
    segments: Sequence[str],
    thresholds: Sequence[float],
    now: datetime,
) -> list[WindowAggregate]:
    """Create the missing aggregates of one window, then lock them all for update.

    Missing rows are created empty by one ``INSERT ... ON CONFLICT DO NOTHING``
    (rows in ascending ``segment`` order), and only then are all rows locked
    with ``SELECT ... FOR UPDATE`` in ascending ``segment`` order, the one
    order every writer uses. Inserting before locking matters: a writer that
    waits on another's uncommitted insert holds no lock on an existing row,
    so concurrent batches cannot deadlock (tests/integration/
    test_ingest_concurrency.py). On SQLite the caller holds the database
    write lock (BEGIN IMMEDIATE) and ``FOR UPDATE`` is omitted.

    Returns
    -------
    list of WindowAggregate
        One per distinct segment key, in ascending segment order.
    """
    keys = sorted(set(segments))
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    empty_confusion = [
        {"threshold": float(t), "tp": 0, "fp": 0, "fn": 0, "tn": 0} for t in thresholds
    ]
    session.execute(
        insert(WindowAggregate)
        .values(
            [
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
        )
        .on_conflict_do_nothing()
    )
    return _select_for_update(session, model_id, window_start, keys)


def _select_for_update(
    session: Session, model_id: int, window_start: datetime, keys: list[str]
) -> list[WindowAggregate]:
    return list(
        session.scalars(
            select(WindowAggregate)
            .where(
                WindowAggregate.model_id == model_id,
                WindowAggregate.window_start == window_start,
                WindowAggregate.segment.in_(keys),
            )
            .order_by(WindowAggregate.segment)
            .with_for_update()
            .execution_options(populate_existing=True)
        ).all()
    )


def try_advisory_xact_lock(session: Session, lock_id: int) -> bool:
    """PostgreSQL: take the transaction-level advisory lock ``lock_id`` if free.

    The lock is released when the transaction ends (commit or rollback).
    """
    return bool(session.scalar(text("SELECT pg_try_advisory_xact_lock(:id)"), {"id": lock_id}))

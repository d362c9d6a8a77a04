"""Deleting rows: batch rows past the idempotency retention, old windows, whole models.

A batch's counts live in its window aggregates (folded from its deltas, which
the fold deletes), so a batch row only serves replays of its idempotency key.
The worker's housekeeping (app/worker/jobs.py) deletes rows older than the
retention in short transactions, and the windows past their model's
retention (app/services/refresh/retention.py); ``DELETE /v1/models/{name}`` deletes
a model with every row of it. Functions here never commit.

Locks (PostgreSQL): the model's row first, then its window aggregates in key
order, as a settings update does (app/db/queue.py, ``invalidate_windows``),
so a worker completing a claimed group (which locks aggregates in key order)
waits for the deletion or the deletion for it, never both. A claim that lost
its windows this way is fenced out at completion (its rows are gone), and the
rest of its group is stored. While the model's row is locked no batch of the
model can insert (its rows refer to the model), so no delta can be left
behind for a deleted window. One order differs: a claim that quarantines a
delta (app/db/queue.py) refers to the model after locking aggregates; should
it meet a deletion of the same model halfway, PostgreSQL fails one of the two
(a deadlock: the worker backs off and claims again, the request answers 503
with Retry-After).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, tuple_
from sqlalchemy.orm import Session

from app.db.models import WA, Batch, BatchDelta, Model, QuarantinedDelta


def delete_batches_received_before(session: Session, cutoff: datetime, *, limit: int) -> int:
    """Delete at most ``limit`` batch rows received before ``cutoff``; returns how many.

    Uses the ``received_at`` index; call again while it returns ``limit``.
    """
    oldest = (
        select(Batch.model_id, Batch.id)
        .where(Batch.received_at < cutoff)
        .order_by(Batch.received_at)
        .limit(limit)
    )
    result = session.execute(
        delete(Batch)
        .where(tuple_(Batch.model_id, Batch.id).in_(oldest))
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def models_with_retention(session: Session) -> list[int]:
    """The ids of the models whose ``retention`` is set (the others keep every window)."""
    return list(session.scalars(select(Model.id).where(Model.retention.is_not(None))))


def lock_model(session: Session, model_id: int) -> Model | None:
    """The model's row, locked and read again (None when it is gone)."""
    locked = select(Model).where(Model.id == model_id).with_for_update()
    return session.scalars(locked.execution_options(populate_existing=True)).first()


def _lock_windows(session: Session, model_id: int, starts: list[datetime] | None = None) -> None:
    """Lock the model's aggregates (those starting at ``starts``, if given) in key order."""
    windows = select(WA.segment, WA.window_start).where(WA.model_id == model_id)
    if starts is not None:
        windows = windows.where(WA.window_start.in_(starts))
    session.execute(windows.order_by(WA.segment, WA.window_start).with_for_update())


def delete_model(session: Session, model_id: int) -> bool:
    """Delete the model and every row of it; False when it was already gone.

    The foreign keys cascade from ``model`` (keys, batches, aggregates, their
    results, deltas, quarantined deltas; on SQLite with ``foreign_keys`` on,
    app/db/session.py).
    """
    if lock_model(session, model_id) is None:
        return False
    _lock_windows(session, model_id)
    session.execute(delete(Model).where(Model.id == model_id))
    return True


def delete_windows(
    session: Session,
    model_id: int,
    before: datetime,
    keep: tuple[datetime, datetime] | None,
    *,
    limit: int,
) -> int:
    """Delete the ``limit`` oldest window starts of the model before ``before`` (but for
    those in ``keep``, [from, to)) with every row of theirs; returns how many starts.

    The caller holds the model's row (:func:`lock_model`). Call again while it
    returns ``limit``.
    """
    expired = select(WA.window_start).where(WA.model_id == model_id, WA.window_start < before)
    if keep is not None:
        expired = expired.where((WA.window_start < keep[0]) | (WA.window_start >= keep[1]))
    starts = list(session.scalars(expired.distinct().order_by(WA.window_start).limit(limit)).all())
    if not starts:
        return 0
    _lock_windows(session, model_id, starts)
    for table in (BatchDelta, QuarantinedDelta, Batch, WA):  # window_metrics: cascade
        session.execute(
            delete(table)
            .where(table.model_id == model_id, table.window_start.in_(starts))
            .execution_options(synchronize_session=False)
        )
    return len(starts)

"""Retention of batch rows: they hold the idempotency keys, and nothing else needs them.

A batch's counts live in its window aggregates (folded from its deltas, which
the fold deletes), so a batch row only serves replays of its idempotency key.
The worker's housekeeping (app/worker/jobs.py) deletes rows older than the
retention in short transactions; functions here never commit.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select, tuple_
from sqlalchemy.orm import Session

from app.db.models import Batch


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

"""Window retention: how long a model's windows are kept, and which ones may go.

A model's ``retention`` setting (a duration such as ``"90d"``; null keeps
every window) bounds how long a window is kept after it ends. The worker's
housekeeping (app/worker/jobs.py) deletes older windows with every row of
theirs (app/db/retention.py), except the windows the drift reference of a
kept window sums: a fixed reference period's windows are never deleted, and
with trailing windows the k windows before the oldest kept one stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from app.db import retention as db_retention
from app.db.queue import database_now
from app.db.session import write_transaction
from app.services.models.config import ModelConfig
from app.services.models.retention import parse_retention
from app.services.windows.reference import reference_period
from app.timegrid import window_start


def kept_for(model: ModelConfig) -> timedelta | None:
    """How long after its end a window of ``model`` is kept; None: forever.

    The longer of ``retention`` and ``label_horizon``: labels still arrive for
    windows younger than the horizon, so none of them is deleted.
    """
    if model.retention is None:
        return None
    kept = parse_retention(model.retention)
    if model.label_horizon is None:
        return kept
    return max(kept, parse_retention(model.label_horizon, "label_horizon"))


@dataclass(frozen=True)
class Expired:
    """The windows of a model that the housekeeping deletes: those starting before
    ``before``, except those starting in ``keep`` ([from, to): the fixed drift
    reference period), if set."""

    before: datetime
    keep: tuple[datetime, datetime] | None


def expired_windows(model: ModelConfig, now: datetime) -> Expired | None:
    """Which windows of ``model`` are past its retention at ``now`` (None: none may go).

    A window is past it when it ended at least :func:`kept_for` before ``now``.
    """
    kept = kept_for(model)
    if kept is None:
        return None
    oldest_kept = window_start(now - kept, model.window)  # it ends after now - kept
    period = reference_period(model, oldest_kept)
    if period is None:
        return Expired(oldest_kept, None)
    if model.drift["reference"].get("trailing_windows"):
        return Expired(period.start, None)  # the oldest kept window's reference stays
    return Expired(oldest_kept, (period.start, period.end))


def delete_expired_windows(factory: sessionmaker[Session], *, limit: int) -> int:
    """Delete every model's windows past its retention, in transactions of at most
    ``limit`` window starts; returns how many starts were deleted.

    Each transaction locks the model's row and reads its settings under the
    lock, so a retention or drift reference changed meanwhile is honoured.
    """
    with factory() as session:
        now = database_now(session)
        ids = db_retention.models_with_retention(session)
    deleted = 0
    for model_id in ids:
        done = limit
        while done == limit:
            with factory() as session, write_transaction(session):
                row = db_retention.lock_model(session, model_id)
                expired = None if row is None else expired_windows(ModelConfig.from_row(row), now)
                if expired is None:
                    break
                done = db_retention.delete_windows(
                    session, model_id, expired.before, expired.keep, limit=limit
                )
            deleted += done
    return deleted

"""Every SQL statement of the window queue, in one module.

The queue is the unfolded deltas (``batch_delta``: a batch appends one per
aggregate it counts in) together with the ``dirty`` mark of
``window_aggregate`` (set when a window's drift reference or its model's
settings change). A window is waiting when it has either. No batch writes a
shared row. The worker protocol (docs/worker.md):

1. **claim** (one short transaction): pick the window with the oldest
   waiting change whose lease is free or expired with ``SELECT ... FOR
   UPDATE SKIP LOCKED`` (concurrent claimers skip each other's rows instead
   of waiting), increment its ``claim_attempt`` (the fencing token) and set
   ``lease_expires_at``; read the row's sums and its unfolded deltas (at
   most :data:`MAX_DELTAS_PER_CLAIM`) in the same transaction.
2. **compute** outside any transaction on the sums plus exactly those
   deltas (no lock is held while computing, so ingestion never waits for
   the worker).
3. **fold and complete** (one transaction): ``UPDATE ... WHERE claim_attempt
   = :mine`` proves that nobody claimed the window since and writes the
   folded sums (``version`` + 1) and clears ``dirty``; the claimed deltas
   are deleted (all of them, or the transaction fails); the result is
   upserted into ``window_metrics`` with the new version. If the fence
   fails (the lease expired and another worker claimed the window), nothing
   is written: a stale worker can never overwrite a newer result, and a
   delta is folded exactly once (a crash before the commit leaves the deltas
   in place for the next claim).

Times come from the database clock on PostgreSQL (``now()``), so workers on
machines with skewed clocks agree on lease expiry. Functions here never commit:
the caller (app/services/window_refresh.py) owns the transaction.

On SQLite (embedded mode) there is one claimer, in-process; ``FOR UPDATE`` is
not rendered, and the caller's ``write_transaction`` (BEGIN IMMEDIATE) gives
the same serialisation.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Select,
    Subquery,
    and_,
    case,
    delete,
    func,
    literal,
    or_,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import BatchDelta, WindowAggregate, WindowMetrics

WA = WindowAggregate
BD = BatchDelta

MAX_DELTAS_PER_CLAIM = 2_000
"""Most deltas one claim folds; a window with more stays waiting for the next claim
(bounds the claim's memory and the size of the fold's ``DELETE``)."""


@dataclass(frozen=True)
class Claim:
    """A window held by one worker until ``lease_expires_at``.

    Attributes
    ----------
    model_id, segment, window_start : the window's key.
    version : the aggregate version read in the claim transaction (the fold
        stores ``version + 1`` when it folds deltas, else ``version``).
    attempt : the fencing token (``claim_attempt`` after the increment).
    claimed_at, lease_expires_at : database times of the claim and of the
        lease's end.
    """

    model_id: int
    segment: str
    window_start: datetime
    version: int
    attempt: int
    claimed_at: datetime
    lease_expires_at: datetime


def database_now(session: Session) -> datetime:
    """The database's current time (UTC); the process clock on SQLite."""
    if session.get_bind().dialect.name == "postgresql":
        value = session.scalar(text("SELECT statement_timestamp()"))
        assert isinstance(value, datetime)
        return value.astimezone(UTC)
    return datetime.now(UTC)


def _key(model_id: int, segment: str, window_start: datetime) -> Any:
    return and_(WA.model_id == model_id, WA.segment == segment, WA.window_start == window_start)


def _waiting(*, detail_due: bool = False) -> Subquery:
    """(model_id, segment, window_start, since) of every waiting window: the oldest
    unfolded delta or the dirty mark, whichever is older. With ``detail_due``, a
    window's detail due time counts as a change too (the claim's one due time: a
    window waits for new data or for its detail, whichever is older)."""
    sources = [
        select(BD.model_id, BD.segment, BD.window_start, BD.received_at.label("since")),
        select(WA.model_id, WA.segment, WA.window_start, WA.dirty_since.label("since")).where(
            WA.dirty
        ),
    ]
    if detail_due:
        sources.append(
            select(WA.model_id, WA.segment, WA.window_start, WA.detail_due_at.label("since")).where(
                WA.detail_due_at.is_not(None)
            )
        )
    changes = union_all(*sources).subquery()
    return (
        select(
            changes.c.model_id,
            changes.c.segment,
            changes.c.window_start,
            func.min(changes.c.since).label("since"),
        )
        .group_by(changes.c.model_id, changes.c.segment, changes.c.window_start)
        .subquery()
    )


def _joined_waiting(columns: Any, waiting: Subquery) -> Select[Any]:
    return select(*columns).join(
        waiting,
        and_(
            WA.model_id == waiting.c.model_id,
            WA.segment == waiting.c.segment,
            WA.window_start == waiting.c.window_start,
        ),
    )


def _lease_free(now: datetime) -> Any:
    return or_(WA.lease_expires_at.is_(None), WA.lease_expires_at <= now)


def _settled(waiting: Subquery, now: datetime, settle_seconds: float) -> Any:
    """The window's oldest waiting change is at least ``settle_seconds`` old."""
    return waiting.c.since <= now - timedelta(seconds=settle_seconds)


def _claimable(now: datetime, settle_seconds: float) -> Select[Any]:
    waiting = _waiting(detail_due=True)
    return (
        _joined_waiting([WA], waiting)
        .where(_lease_free(now), _settled(waiting, now, settle_seconds))
        .order_by(waiting.c.since, WA.model_id, WA.segment, WA.window_start)
        .limit(1)
        .with_for_update(skip_locked=True, of=WA)
    )


def any_claimable(session: Session, *, settle_seconds: float = 0.0) -> bool:
    """Whether some window is waiting (a plain read: takes no lock)."""
    now = database_now(session)
    waiting = _waiting(detail_due=True)
    found = session.scalar(
        _joined_waiting([WA.model_id], waiting)
        .where(_lease_free(now), _settled(waiting, now, settle_seconds))
        .limit(1)
    )
    return found is not None


def claim_next(
    session: Session, *, lease_seconds: float, settle_seconds: float = 0.0
) -> tuple[Claim, WindowAggregate] | None:
    """Claim the oldest dirty window that no live lease holds.

    Parameters
    ----------
    session : Session
        In a write transaction (the caller commits to make the claim visible).
    lease_seconds : float
        How long the claim is exclusive. A worker killed while holding it
        delays the window by at most this long; another worker then claims it.

    Returns
    -------
    (Claim, WindowAggregate) or None
        The claim and the row as read under the lock (its sums are those of
        ``claim.version``); None when no window is waiting. Read its deltas
        with :func:`claimed_deltas` in the same transaction.
    """
    now = database_now(session)
    row = session.scalars(
        _claimable(now, settle_seconds).execution_options(populate_existing=True)
    ).one_or_none()
    if row is None:
        return None
    expires = now + timedelta(seconds=lease_seconds)
    attempt = session.execute(
        update(WA)
        .where(_key(row.model_id, row.segment, row.window_start))
        .values(claim_attempt=WA.claim_attempt + 1, lease_expires_at=expires)
        .returning(WA.claim_attempt)
        .execution_options(synchronize_session=False)
    ).scalar_one()
    claim = Claim(
        model_id=row.model_id,
        segment=row.segment,
        window_start=row.window_start,
        version=int(row.version),
        attempt=int(attempt),
        claimed_at=now,
        lease_expires_at=expires,
    )
    return claim, row


def claimed_deltas(session: Session, claim: Claim) -> list[BatchDelta]:
    """The unfolded deltas of the claimed window, oldest first (at most
    :data:`MAX_DELTAS_PER_CLAIM`); the claim folds exactly these."""
    return list(
        session.scalars(
            select(BD)
            .where(
                BD.model_id == claim.model_id,
                BD.segment == claim.segment,
                BD.window_start == claim.window_start,
            )
            .order_by(BD.received_at, BD.batch_id)
            .limit(MAX_DELTAS_PER_CLAIM)
        )
    )


class DoubleFold(RuntimeError):
    """A claimed delta was gone at fold time (the fold is rolled back)."""


def fence(
    session: Session,
    claim: Claim,
    *,
    release_only: bool = False,
    folded: Mapping[str, Any] | None = None,
    batch_ids: Sequence[uuid.UUID] = (),
    detail_due_at: datetime | None = None,
) -> int | None:
    """Lock the claimed row if ``claim`` still holds it; end the lease; fold.

    Unless ``release_only``, the dirty mark is cleared and the detail due time
    set to ``detail_due_at`` (None after a full refresh). With ``folded`` (the
    aggregate's column values with the claimed deltas added), the row takes
    those values, ``version`` + 1 and ``batches`` + ``len(batch_ids)``, and
    the deltas ``batch_ids`` of the window are deleted: every one of them,
    or :class:`DoubleFold` is raised (the caller's transaction must then roll
    back).

    Returns
    -------
    int or None
        The row's version after the fold, or None when another worker claimed
        the window since (the claim is stale: write nothing).
    """
    values: dict[str, Any] = {"lease_expires_at": None}
    if not release_only:
        values.update(dirty=False, dirty_since=None, detail_due_at=detail_due_at)
    if folded is not None:
        values.update(folded)
        values.update(version=WA.version + 1, batches=WA.batches + len(batch_ids))
    version = session.execute(
        update(WA)
        .where(
            _key(claim.model_id, claim.segment, claim.window_start),
            WA.claim_attempt == claim.attempt,
        )
        .values(**values)
        .returning(WA.version)
        .execution_options(synchronize_session=False)
    ).scalar_one_or_none()
    if version is None:
        return None
    if batch_ids:
        deleted = session.execute(  # type: ignore[attr-defined]
            delete(BD)
            .where(
                BD.model_id == claim.model_id,
                BD.segment == claim.segment,
                BD.window_start == claim.window_start,
                BD.batch_id.in_(batch_ids),
            )
            .execution_options(synchronize_session=False)
        ).rowcount
        if deleted != len(batch_ids):
            raise DoubleFold(
                f"{len(batch_ids) - deleted} of {len(batch_ids)} claimed deltas were already folded"
            )
    return int(version)


def has_deltas(session: Session, claim: Claim) -> bool:
    """Whether the claimed window has unfolded deltas (e.g. arrived after the claim)."""
    found = session.scalar(
        select(BD.batch_id)
        .where(
            BD.model_id == claim.model_id,
            BD.segment == claim.segment,
            BD.window_start == claim.window_start,
        )
        .limit(1)
    )
    return found is not None


def release(session: Session, claim: Claim) -> bool:
    """Give the window back unprocessed (graceful stop): its lease ends now.

    Returns False when the claim was already stale.
    """
    return fence(session, claim, release_only=True) is not None


def upsert_window_metrics(
    session: Session,
    claim: Claim,
    *,
    version: int,
    status: str,
    computed_at: datetime,
    document: Mapping[str, Any],
    keep: Collection[str] = (),
) -> None:
    """Store the result computed from aggregate ``version`` (call after :func:`fence`).

    ``document`` holds the columns ``metrics``, ``drift``, ``curves``,
    ``intervals``, ``reasons``, ``estimate``, ``error``, ``detail_version`` and
    ``detail_computed_at``. An existing row computed from a
    newer aggregate version is never replaced. The columns ``keep`` of an
    existing row stay as they are (a summary refresh keeps the stored detail).
    """
    values = {
        "model_id": claim.model_id,
        "segment": claim.segment,
        "window_start": claim.window_start,
        "aggregate_version": version,
        "computed_at": computed_at,
        "status": status,
        "metrics": document.get("metrics") or {},
        "drift": document.get("drift"),
        "curves": document.get("curves"),
        "intervals": document.get("intervals"),
        "reasons": document.get("reasons"),
        "estimate": document.get("estimate"),
        "error": document.get("error"),
        "detail_version": document.get("detail_version"),
        "detail_computed_at": document.get("detail_computed_at"),
    }
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(WindowMetrics).values(**values)
    updated = {
        k: stmt.excluded[k]
        for k in values
        if k not in ("model_id", "segment", "window_start") and k not in keep
    }
    session.execute(
        stmt.on_conflict_do_update(
            index_elements=["model_id", "segment", "window_start"],
            set_=updated,
            where=WindowMetrics.aggregate_version <= stmt.excluded.aggregate_version,
        )
    )


def stored_version(session: Session, claim: Claim) -> int | None:
    """The aggregate version of the stored result of the claimed window (None: none)."""
    value = session.scalar(
        select(WindowMetrics.aggregate_version).where(
            WindowMetrics.model_id == claim.model_id,
            WindowMetrics.segment == claim.segment,
            WindowMetrics.window_start == claim.window_start,
        )
    )
    return None if value is None else int(value)


def stored_intervals(session: Session, claim: Claim) -> dict[str, Any] | None:
    """The intervals of the claimed window's stored result (None: none stored)."""
    value = session.scalar(
        select(WindowMetrics.intervals).where(
            WindowMetrics.model_id == claim.model_id,
            WindowMetrics.segment == claim.segment,
            WindowMetrics.window_start == claim.window_start,
        )
    )
    return None if value is None else dict(value)


def invalidate_windows(
    session: Session,
    model_id: int,
    *,
    now: datetime,
    segment: str | None = None,
    start_from: datetime | None = None,
    start_to: datetime | None = None,
    exclude: tuple[datetime, datetime] | None = None,
    detail_due: bool = False,
) -> int:
    """Mark windows for recomputation although their aggregate did not change.

    Used when what a window's result depends on besides its own sums changed:
    its drift reference (a reference window received data) or the model's
    settings. Each matched window with data is marked dirty, its lease is
    ended and its ``claim_attempt`` incremented, which fences out a worker
    computing it right now with the old inputs.

    Rows are locked in key order first (``SELECT ... ORDER BY ... FOR
    UPDATE``), the order every multi-row locker uses, so concurrent
    invalidations cannot deadlock.

    Parameters
    ----------
    model_id : int
    now : datetime
        Stored as ``dirty_since`` where the window was clean.
    segment : str, optional
        Restrict to one segment key.
    start_from, start_to : datetime, optional
        Restrict to windows starting in [start_from, start_to).
    exclude : (datetime, datetime), optional
        Skip windows starting in this half-open range (the reference itself).
    detail_due : bool
        Also make the detail tier due now (a settings change: the stored curves
        were computed with the old settings; a reference change leaves them valid).

    Returns
    -------
    int
        The number of windows marked.
    """
    # every aggregate row has data (folded, or in deltas: a row is created with
    # its window's first batch), and a window whose first fold is in progress
    # (version 0) must be fenced out too
    conditions: list[Any] = [WA.model_id == model_id]
    if segment is not None:
        conditions.append(WA.segment == segment)
    if start_from is not None:
        conditions.append(WA.window_start >= start_from)
    if start_to is not None:
        conditions.append(WA.window_start < start_to)
    if exclude is not None:
        conditions.append(or_(WA.window_start < exclude[0], WA.window_start >= exclude[1]))
    keys = session.execute(
        select(WA.model_id, WA.segment, WA.window_start)
        .where(*conditions)
        .order_by(WA.segment, WA.window_start)
        .with_for_update()
    ).all()
    if not keys:
        return 0
    session.execute(
        update(WA)
        .where(*conditions)
        .values(
            dirty=True,
            dirty_since=func.coalesce(WA.dirty_since, now),
            lease_expires_at=None,
            claim_attempt=WA.claim_attempt + 1,
            **_due_now(now, detail_due),
        )
        .execution_options(synchronize_session=False)
    )
    return len(keys)


def _due_now(now: datetime, detail_due: bool) -> dict[str, Any]:
    if not detail_due:
        return {}
    at = literal(now, WA.detail_due_at.type)
    return {"detail_due_at": case((WA.detail_due_at < at, WA.detail_due_at), else_=at)}


@dataclass(frozen=True)
class QueueStats:
    """Depth and lag of the queue (for the exporter and the benchmarks).

    Attributes
    ----------
    dirty_windows : windows waiting for (re)computation (unfolded deltas or
        the dirty mark).
    leased_windows : of those, windows a worker holds right now.
    oldest_dirty_since : the oldest unprocessed change, or None.
    now : the database time of the reading.
    """

    dirty_windows: int
    leased_windows: int
    oldest_dirty_since: datetime | None
    now: datetime

    @property
    def lag_seconds(self) -> float:
        """Age of the oldest unprocessed change (0 when none)."""
        if self.oldest_dirty_since is None:
            return 0.0
        return max(0.0, (self.now - self.oldest_dirty_since).total_seconds())


def queue_stats(session: Session) -> QueueStats:
    """Count the waiting windows and find the oldest waiting change (one query)."""
    now = database_now(session)
    waiting = _waiting()
    leased = case((and_(WA.lease_expires_at.is_not(None), WA.lease_expires_at > now), 1), else_=0)
    count, held, oldest = session.execute(
        _joined_waiting(
            [func.count(), func.coalesce(func.sum(leased), 0), func.min(waiting.c.since)], waiting
        )
    ).one()
    return QueueStats(int(count), int(held), oldest, now)

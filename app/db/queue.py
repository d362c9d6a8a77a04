"""Every SQL statement of the window queue, in one module.

The queue is the ``window_aggregate`` table itself: a batch sets ``dirty`` and
bumps ``version`` (app/services/aggregates.py). The worker protocol
(docs/worker.md):

1. **claim** (one short transaction): pick the oldest dirty window whose lease
   is free or expired with ``SELECT ... FOR UPDATE SKIP LOCKED`` (concurrent
   claimers skip each other's rows instead of waiting), increment its
   ``claim_attempt`` (the fencing token) and set ``lease_expires_at``; read
   the row's sums and ``version`` in the same transaction.
2. **compute** outside any transaction (no lock is held while computing, so
   ingestion never waits for the worker).
3. **complete** (one transaction): ``UPDATE ... WHERE claim_attempt = :mine``
   locks the row and proves that nobody claimed it since; then the result is
   upserted into ``window_metrics`` with the version it was computed from,
   and ``dirty`` is cleared only if ``version`` did not move meanwhile. If the
   fence fails (the lease expired and another worker claimed the window),
   nothing is written: a stale worker can never overwrite a newer result.

Times come from the database clock on PostgreSQL (``now()``), so workers on
machines with skewed clocks agree on lease expiry. Functions here never commit:
the caller (app/services/window_refresh.py) owns the transaction.

On SQLite (embedded mode) there is one claimer, in-process; ``FOR UPDATE`` is
not rendered, and the caller's ``write_transaction`` (BEGIN IMMEDIATE) gives
the same serialisation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, case, func, or_, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import WindowAggregate, WindowMetrics

WA = WindowAggregate


@dataclass(frozen=True)
class Claim:
    """A window held by one worker until ``lease_expires_at``.

    Attributes
    ----------
    model_id, segment, window_start : the window's key.
    version : the aggregate version read in the claim transaction (the
        result will be stored with it).
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


def _claimable(now: datetime) -> Select[Any]:
    return (
        select(WA)
        .where(WA.dirty, or_(WA.lease_expires_at.is_(None), WA.lease_expires_at <= now))
        .order_by(WA.dirty_since, WA.model_id, WA.segment, WA.window_start)
        .limit(1)
        .with_for_update(skip_locked=True)
    )


def any_claimable(session: Session) -> bool:
    """Whether some window is waiting (a plain read: takes no lock)."""
    now = database_now(session)
    found = session.scalar(
        select(WA.model_id)
        .where(WA.dirty, or_(WA.lease_expires_at.is_(None), WA.lease_expires_at <= now))
        .limit(1)
    )
    return found is not None


def claim_next(session: Session, *, lease_seconds: float) -> tuple[Claim, WindowAggregate] | None:
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
        ``claim.version``); None when no window is waiting.
    """
    now = database_now(session)
    row = session.scalars(_claimable(now).execution_options(populate_existing=True)).one_or_none()
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


def fence(session: Session, claim: Claim, *, release_only: bool = False) -> int | None:
    """Lock the claimed row if ``claim`` still holds it; end the lease.

    Unless ``release_only``, the dirty mark is cleared when the version is
    still ``claim.version`` (no batch arrived since the claim); otherwise the
    window stays dirty with ``dirty_since`` = the claim time (every change
    after the version we read arrived after it).

    Returns
    -------
    int or None
        The row's current version, or None when another worker claimed the
        window since (the claim is stale: write nothing).
    """
    unchanged = WA.version == claim.version
    values: dict[str, Any] = {"lease_expires_at": None}
    if not release_only:
        values["dirty"] = ~unchanged
        values["dirty_since"] = case(
            (unchanged, None), else_=func.coalesce(WA.dirty_since, claim.claimed_at)
        )
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
    return None if version is None else int(version)


def release(session: Session, claim: Claim) -> bool:
    """Give the window back unprocessed (graceful stop): its lease ends now.

    Returns False when the claim was already stale.
    """
    return fence(session, claim, release_only=True) is not None


def upsert_window_metrics(
    session: Session,
    claim: Claim,
    *,
    status: str,
    computed_at: datetime,
    document: Mapping[str, Any],
) -> None:
    """Store the result computed from ``claim.version`` (call after :func:`fence`).

    ``document`` holds the columns ``metrics``, ``drift``, ``curves``,
    ``intervals``, ``reasons``, ``estimate`` and ``error``. An existing row computed from a
    newer aggregate version is never replaced.
    """
    values = {
        "model_id": claim.model_id,
        "segment": claim.segment,
        "window_start": claim.window_start,
        "aggregate_version": claim.version,
        "computed_at": computed_at,
        "status": status,
        "metrics": document.get("metrics") or {},
        "drift": document.get("drift"),
        "curves": document.get("curves"),
        "intervals": document.get("intervals"),
        "reasons": document.get("reasons"),
        "estimate": document.get("estimate"),
        "error": document.get("error"),
    }
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(WindowMetrics).values(**values)
    updated = {
        k: stmt.excluded[k] for k in values if k not in ("model_id", "segment", "window_start")
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


def invalidate_windows(
    session: Session,
    model_id: int,
    *,
    now: datetime,
    segment: str | None = None,
    start_from: datetime | None = None,
    start_to: datetime | None = None,
    exclude: tuple[datetime, datetime] | None = None,
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

    Returns
    -------
    int
        The number of windows marked.
    """
    conditions: list[Any] = [WA.model_id == model_id, WA.version > 0]
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
        )
        .execution_options(synchronize_session=False)
    )
    return len(keys)


@dataclass(frozen=True)
class QueueStats:
    """Depth and lag of the queue (for the exporter and the benchmarks).

    Attributes
    ----------
    dirty_windows : windows waiting for (re)computation.
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
    """Count the dirty windows and find the oldest dirty mark (one query)."""
    now = database_now(session)
    leased = case((and_(WA.lease_expires_at.is_not(None), WA.lease_expires_at > now), 1), else_=0)
    count, held, oldest = session.execute(
        select(func.count(), func.coalesce(func.sum(leased), 0), func.min(WA.dirty_since)).where(
            WA.dirty
        )
    ).one()
    return QueueStats(int(count), int(held), oldest, now)

"""Every SQL statement of the window queue, in one module.

The queue is the unfolded deltas (``batch_delta``: a batch appends one per
aggregate it counts in) together with the ``dirty`` mark of
``window_aggregate`` (set when a window's drift reference or its model's
settings change). A window is waiting when it has either. No batch writes a
shared row. The worker protocol (docs/worker.md):

1. **claim** (one short transaction): one ``UPDATE ... WHERE key IN (SELECT
   ... FOR UPDATE SKIP LOCKED LIMIT n)`` takes the ``n`` waiting windows
   with the oldest changes whose lease is free or expired, found among the
   oldest changes of each kind read along their indexes (:func:`_candidates`:
   the cost does not grow with the queue's length; concurrent
   claimers skip each other's rows instead of waiting), increments each one's
   ``claim_attempt`` (its fencing token) and sets ``lease_expires_at``; one
   more query reads their unfolded deltas (at most
   :data:`MAX_DELTAS_PER_CLAIM` per window), in the same transaction on
   PostgreSQL, after its commit on SQLite (the writer lock is held for the
   ``UPDATE`` alone; the lease keeps the windows as the transaction would).
2. **compute** outside any transaction on the sums plus exactly those
   deltas (no lock is held while computing, so ingestion never waits for
   the worker).
3. **fold and complete** (one transaction for the group): the rows are
   locked in key order and their ``claim_attempt`` compared with the
   claims' (:func:`lock_claimed`); for each window still held, the folded
   sums are written (``version`` + 1) and ``dirty`` is cleared, the claimed
   deltas are deleted (all of them, or the transaction fails) and the
   result is upserted into ``window_metrics`` with the new version
   (:func:`complete`, :func:`upsert_window_metrics`). A window whose claim
   was lost (the lease expired and another worker claimed it, or an
   invalidation fenced it out) gets nothing written: a stale worker can
   never overwrite a newer result, and a delta is folded exactly once (a
   crash before the commit leaves the deltas in place for the next claim).

A claimed delta that cannot be folded (app/services/windows/deltas.py,
:func:`~app.services.windows.deltas.fold_rows`) is moved to ``quarantined_delta`` in
the claim's transaction (on SQLite in one of its own, if the claim still holds:
:func:`lock_claimed`) (:func:`quarantine_deltas`), so it neither blocks its
window nor rolls back the other windows of the group.

Times come from the database clock on PostgreSQL (``now()``), so workers on
machines with skewed clocks agree on lease expiry. Functions here never commit:
the caller (app/services/refresh/groups.py) owns the transaction.

On SQLite (embedded mode) there is one claimer, in-process; ``FOR UPDATE`` is
not rendered, and the caller's ``write_transaction`` (BEGIN IMMEDIATE) gives
the same serialisation.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    FromClause,
    Integer,
    Interval,
    Row,
    Select,
    Subquery,
    Table,
    Update,
    and_,
    bindparam,
    case,
    delete,
    func,
    literal_column,
    or_,
    select,
    text,
    tuple_,
    type_coerce,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.visitors import ExternallyTraversible, replacement_traverse

from app.db.models import WA, BatchDelta, Model, QuarantinedDelta, WindowMetrics
from app.db.session import BINARY_RESULTS
from app.db.types import UTCDateTime
from app.statuses import StoredStatus

BD = BatchDelta
_WA_TABLE = cast(Table, WA.__table__)
_BD_TABLE = cast(Table, BD.__table__)
_QD_TABLE = cast(Table, QuarantinedDelta.__table__)

MAX_DELTAS_PER_CLAIM = 2_000
"""Most deltas one claim folds; a window with more stays waiting for the next claim
(bounds the claim's memory and the size of the fold's ``DELETE``)."""


AggregateKey = tuple[int, str, datetime]
"""A window's key: (model_id, segment, window_start)."""

_KEY = (WA.model_id, WA.segment, WA.window_start)


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
    stored_version, stored_intervals, stored_maturity : the aggregate version,
        the intervals and the ``maturity`` document of the window's stored result
        when it was claimed (None: no result yet). Only the completion of a claim
        writes that result, so they cannot change while this claim holds.
    stored_note : the ``error`` of that result when its status is fresh: what
        earlier refreshes quarantined (None: nothing), carried by this one.
    """

    model_id: int
    segment: str
    window_start: datetime
    version: int
    attempt: int
    claimed_at: datetime
    lease_expires_at: datetime
    stored_version: int | None
    stored_intervals: Mapping[str, Any] | None
    stored_maturity: Mapping[str, Any] | None = None
    stored_note: str | None = None

    @property
    def key(self) -> AggregateKey:
        return (self.model_id, self.segment, self.window_start)


@dataclass(frozen=True)
class KeyRange:
    """The windows of one model (of one segment, if given) whose start lies in
    [start_from, start_to) and outside the half-open range ``exclude``: a range of
    :data:`AggregateKey` (a read's time range is :class:`app.timegrid.WindowRange`)."""

    model_id: int
    segment: str | None = None
    start_from: datetime | None = None
    start_to: datetime | None = None
    exclude: tuple[datetime, datetime] | None = None

    @property
    def shape(self) -> RangeShape:
        """Which bounds are set (the form of :func:`_range_condition`)."""
        return RangeShape(
            self.segment is not None,
            self.start_from is not None,
            self.start_to is not None,
            self.exclude is not None,
        )

    def params(self, slot: int) -> dict[str, Any]:
        """The parameters of :func:`_range_condition` at ``slot``."""
        exclude_from, exclude_to = self.exclude or (None, None)
        values = {
            "model_id": self.model_id,
            "segment": self.segment,
            "start_from": self.start_from,
            "start_to": self.start_to,
            "exclude_from": exclude_from,
            "exclude_to": exclude_to,
        }
        return {f"r{slot}_{k}": v for k, v in values.items() if v is not None}


class RangeShape(NamedTuple):
    """Which bounds of a :class:`KeyRange` are set."""

    segment: bool
    start_from: bool
    start_to: bool
    exclude: bool


def _range_condition(slot: int, shape: RangeShape) -> Any:
    """The rows of the window range of this shape given by the parameters ``r<slot>_*``
    (:meth:`KeyRange.params`)."""

    def value(name: str) -> Any:
        return bindparam(f"r{slot}_{name}")

    conditions: list[Any] = [WA.model_id == value("model_id")]
    if shape.segment:
        conditions.append(WA.segment == value("segment"))
    if shape.start_from:
        conditions.append(WA.window_start >= value("start_from"))
    if shape.start_to:
        conditions.append(WA.window_start < value("start_to"))
    if shape.exclude:
        conditions.append(
            or_(WA.window_start < value("exclude_from"), WA.window_start >= value("exclude_to"))
        )
    return and_(*conditions)


def _ranges(ranges: Sequence[KeyRange]) -> tuple[tuple[RangeShape, ...], dict[str, Any]]:
    """The shapes of ``ranges`` (sorted, so that few statements are built and cached)
    and their parameters."""
    ordered = sorted(ranges, key=lambda r: r.shape)
    params: dict[str, Any] = {}
    for slot, window_range in enumerate(ordered):
        params |= window_range.params(slot)
    return tuple(r.shape for r in ordered), params


def _ranges_conditions(shapes: tuple[RangeShape, ...]) -> list[Any]:
    return [_range_condition(slot, shape) for slot, shape in enumerate(shapes)]


def database_now(session: Session) -> datetime:
    """The database's current time (UTC); the process clock on SQLite."""
    if session.get_bind().dialect.name == "postgresql":
        value = session.scalar(text("SELECT statement_timestamp()"))
        assert isinstance(value, datetime)
        return value.astimezone(UTC)
    return datetime.now(UTC)


def _oldest_per_window(changes: Subquery) -> Select[Any]:
    """(model_id, segment, window_start, since) of ``changes`` grouped by window, each
    at its oldest ``since``."""
    return select(
        changes.c.model_id,
        changes.c.segment,
        changes.c.window_start,
        func.min(changes.c.since).label("since"),
    ).group_by(changes.c.model_id, changes.c.segment, changes.c.window_start)


def _waiting() -> Subquery:
    """(model_id, segment, window_start, since) of every window waiting for new data:
    the oldest unfolded delta or the dirty mark, whichever is older (the queue's
    depth and lag; a claim reads only the oldest changes, :func:`_candidates`)."""
    changes = union_all(
        select(BD.model_id, BD.segment, BD.window_start, BD.received_at.label("since")),
        select(WA.model_id, WA.segment, WA.window_start, WA.dirty_since.label("since")).where(
            WA.dirty
        ),
    ).subquery()
    return _oldest_per_window(changes).subquery()


def _same_window(keyed: Any) -> Any:
    """The rows of ``keyed`` (a table, or a subquery's columns, named like the key)
    that belong to the window of the ``window_aggregate`` row in scope."""
    return and_(
        keyed.model_id == WA.model_id,
        keyed.segment == WA.segment,
        keyed.window_start == WA.window_start,
    )


def _same_updated_window(keyed: Any) -> Any:
    """:func:`_same_window` in the ``RETURNING`` clause of an ``UPDATE`` of
    ``window_aggregate``, the key written qualified: SQLite's compiler renders the
    updated table's columns there unqualified, and inside a subquery an unqualified
    ``model_id`` names the subquery's own column (``model_id = model_id`` holds for
    every row: the subquery would read another window's row)."""
    return and_(
        *(
            getattr(keyed, column.key) == literal_column(f"{_WA_TABLE.name}.{column.key}")
            for column in _KEY
        )
    )


def _joined_waiting(columns: Any, waiting: FromClause) -> Select[Any]:
    return select(*columns).join(waiting, _same_window(waiting.c))


_NOW = bindparam("now", type_=UTCDateTime())
_CUTOFF = bindparam("cutoff", type_=UTCDateTime())
_GROUP_SIZE = bindparam("group_size", type_=Integer())


def _claim_params(now: datetime, settle_seconds: float) -> dict[str, Any]:
    """The parameters of the claim statements: the time and the settle cutoff."""
    return {"now": now, "cutoff": now - timedelta(seconds=settle_seconds)}


def _lease_free() -> Any:
    return or_(WA.lease_expires_at.is_(None), WA.lease_expires_at <= _NOW)


CLAIM_SCAN_ROWS = 64
"""Most changes of each kind (unfolded deltas, dirty marks, due details) one claim
reads, the oldest settled ones of windows whose lease is free. The claim costs
the same with 10 or 10,000 windows waiting: each kind is read in its index's
order and the read stops there (docs/worker.md, "The queue"). 64 rows hold
several groups' worth of windows and keep PostgreSQL's plan on the indexes."""


def _candidates() -> Select[Any]:
    """(model_id, segment, window_start, since) of the claimable windows among the
    :data:`CLAIM_SCAN_ROWS` oldest settled changes of each kind whose window's
    lease is free (at the parameters ``now`` and ``cutoff``); ``since`` is the
    window's oldest change among them.

    The oldest changes of a kind come first in its index, so a window in the
    sample has its own oldest change of that kind in it, and a window outside it
    waits for a newer change than every window in it: the claim order is exact
    as long as the sample holds at least a group's worth of windows (a few
    windows with hundreds of deltas each can crowd it; they are claimed first,
    which is their turn anyway).

    The lease of a delta's window is read by a correlated subquery, not a join: a
    join of the two tables is planned as a hash join over every settled delta and
    every aggregate row (the planner expects a handful of matches, so the limit
    looks out of reach), while the subquery keeps the read on the ``received_at``
    index, stopped after :data:`CLAIM_SCAN_ROWS` matches (about 0.4 instead of
    12 ms of execution with 2,000 waiting deltas)."""
    free = _lease_free()
    window_free = select(free).where(_same_window(BD)).correlate(BD).scalar_subquery()
    deltas = (
        select(BD.model_id, BD.segment, BD.window_start, BD.received_at.label("since"))
        .where(window_free, BD.received_at <= _CUTOFF)
        .order_by(BD.received_at)
        .limit(CLAIM_SCAN_ROWS)
    )
    marks = [
        select(*_KEY, column.label("since"))
        .where(condition, free, column <= _CUTOFF)
        .order_by(column)
        .limit(CLAIM_SCAN_ROWS)
        for column, condition in (
            (WA.dirty_since, WA.dirty),
            (WA.detail_due_at, WA.detail_due_at.is_not(None)),
        )
    ]
    changes = union_all(
        *(select(source.subquery()) for source in (deltas, *marks))  # SQLite: LIMIT per member
    ).subquery()
    return _oldest_per_window(changes)


def _claimable(candidates: FromClause, *columns: Any) -> Select[Any]:
    """``columns`` of the windows a worker may claim at the parameters ``now`` and
    ``cutoff`` (:func:`_claim_params`), from ``candidates`` (:func:`_candidates`, whose
    ``since`` orders the claims). Every condition of a claim is here."""
    return _joined_waiting(columns, candidates).where(_lease_free())


@cache
def _any_claimable() -> Select[Any]:
    return _claimable(_candidates().subquery(), WA.model_id).limit(1)


def any_claimable(session: Session, *, settle_seconds: float = 0.0) -> bool:
    """Whether some window is waiting (a plain read: takes no lock)."""
    params = _claim_params(database_now(session), settle_seconds)
    return session.scalar(_any_claimable(), params) is not None


def _group_limit(candidates: FromClause) -> Any:
    """How many windows one claim takes: half of the claimable ones, at least 1 and at
    most the parameter ``group_size`` (so that concurrent workers share a short queue).

    The claimable windows are counted on ``candidates`` alone: each of their sources
    keeps only the windows whose lease is free, in the statement's one snapshot, so
    they are the windows :func:`_claimable` finds, one row each. Joined with
    ``window_aggregate`` again, the count cost PostgreSQL a scan of every aggregate
    row (a hash join: the planner expects too few candidates for the key's index),
    a third of the claim's execution at 1,100 windows and growing with them."""
    claimable = select(func.count().label("n")).select_from(candidates).subquery().c.n
    return select(
        case(
            (claimable >= 2 * _GROUP_SIZE, _GROUP_SIZE),
            (claimable >= 2, claimable // 2),
            else_=1,
        )
    ).scalar_subquery()


_FRESH = WindowMetrics.status == StoredStatus.FRESH


@cache
def _claim_statement(grouped: bool, dialect: str) -> Update:
    """The claim (built once; the times and the group size are parameters). A claim
    of one window needs no count of the claimable ones; a group's claim reads the
    candidates once (a common table expression) for the count and the pick.

    On PostgreSQL the statement reads the clock itself (:func:`_on_database_clock`):
    no ``SELECT`` of the time before it. It returns, with each window's row and
    stored result, the claim's time and its model's ``updated_at`` (the version of
    the model's settings, :class:`app.services.refresh.groups.ModelCache`)."""
    candidates = _candidates().cte("candidates") if grouped else _candidates().subquery()
    picked = (
        _claimable(candidates, *_KEY)
        .order_by(candidates.c.since, *_KEY)
        .limit(_group_limit(candidates) if grouped else 1)
        .with_for_update(skip_locked=True, of=WA)
        .correlate(None)
    )
    stored = [
        select(column).where(_same_updated_window(WindowMetrics)).scalar_subquery().label(label)
        for column, label in (
            (WindowMetrics.aggregate_version, "stored_version"),
            (WindowMetrics.intervals, "stored_intervals"),
            (WindowMetrics.maturity, "stored_maturity"),
            (case((_FRESH, WindowMetrics.error)), "stored_note"),
        )
    ]
    model_version = (
        select(Model.updated_at)
        .where(Model.id == literal_column(f"{_WA_TABLE.name}.model_id"))
        .scalar_subquery()
        .label("model_at")
    )
    table = _WA_TABLE
    statement = (
        update(table)
        .where(tuple_(*_KEY).in_(picked))
        .values(
            claim_attempt=table.c.claim_attempt + 1,
            lease_expires_at=_EXPIRES,
        )
        .returning(*table.c, *stored, model_version, _NOW.label("claimed_at"))
        .execution_options(**BINARY_RESULTS)
    )
    return _on_database_clock(statement) if dialect == "postgresql" else statement


_CLOCK = type_coerce(func.statement_timestamp(), UTCDateTime())
"""The time of the statement on PostgreSQL (as :func:`database_now` reads it)."""
_EXPIRES = bindparam("expires", type_=UTCDateTime())
_LEASE = bindparam("lease", type_=Interval(), literal_execute=True)
_SETTLE = bindparam("settle", type_=Interval(), literal_execute=True)


def _on_database_clock(statement: Update) -> Update:
    """``statement`` with its times read from the database clock: the parameter ``now``
    replaced by ``statement_timestamp()``, ``cutoff`` by that minus the parameter
    ``settle`` and ``expires`` by that plus the parameter ``lease`` (intervals).

    Every other value (the group size, the limits, the constants) is written into
    the statement's text as a literal, so that the statement has no parameter: its
    text is the same at every claim of a worker, the driver prepares it, and
    PostgreSQL plans it once (a prepared statement with parameters was planned
    again at every claim, about 0.5 ms of the server's CPU each)."""
    replaced = {"now": _CLOCK, "cutoff": _CLOCK - _SETTLE, "expires": _CLOCK + _LEASE}

    def replace(element: ExternallyTraversible, **_kw: Any) -> ExternallyTraversible | None:
        if not isinstance(element, BindParameter):
            return None
        if element.key in replaced:
            return replaced[element.key]
        literal = element._clone()
        literal.literal_execute = True
        return literal

    return cast(Update, replacement_traverse(statement, {}, replace))


def claim_group(
    session: Session, *, lease_seconds: float, settle_seconds: float = 0.0, group_size: int = 1
) -> list[tuple[Claim, Row[Any]]]:
    """Claim the waiting windows with the oldest changes that no live lease holds.

    One statement: ``UPDATE ... WHERE key IN (SELECT ... ORDER BY oldest change
    LIMIT n FOR UPDATE SKIP LOCKED) RETURNING ...`` increments each window's
    ``claim_attempt`` and sets its lease; concurrent claimers skip each other's
    rows instead of waiting. ``n`` is half of the claimable windows, at least 1
    and at most ``group_size``.

    Parameters
    ----------
    session : Session
        In a write transaction (the caller commits to make the claims visible).
    lease_seconds : float
        How long each claim is exclusive. A worker killed while holding it
        delays the windows by at most this long; another worker then claims them.
    settle_seconds : float
        Claim a window only once its oldest waiting change is this old.
    group_size : int
        Most windows claimed at once.

    Returns
    -------
    list of (Claim, Row)
        In key order (the order completions lock them); each ``window_aggregate``
        row as claimed (its sums are those of ``claim.version``) with its model's
        ``updated_at`` as ``model_at``. Empty when no window is claimable. Read
        their deltas with :func:`claimed_deltas` in the same transaction.
    """
    dialect = session.get_bind().dialect.name
    lease, settle = timedelta(seconds=lease_seconds), timedelta(seconds=settle_seconds)
    params: dict[str, Any] = {"group_size": group_size, "lease": lease, "settle": settle}
    if dialect != "postgresql":
        now = database_now(session)
        params |= _claim_params(now, settle_seconds) | {"expires": now + lease}
    rows = session.connection().execute(_claim_statement(group_size > 1, dialect), params).all()
    claims = [
        (
            Claim(
                model_id=row.model_id,
                segment=row.segment,
                window_start=row.window_start,
                version=int(row.version),
                attempt=int(row.claim_attempt),
                claimed_at=row.claimed_at,
                lease_expires_at=row.claimed_at + lease,
                stored_version=None if row.stored_version is None else int(row.stored_version),
                stored_intervals=row.stored_intervals,
                stored_maturity=row.stored_maturity,
                stored_note=row.stored_note,
            ),
            row,
        )
        for row in rows
    ]
    return sorted(claims, key=lambda pair: pair[0].key)


_BD = _BD_TABLE.c
_IN_CLAIMED = tuple_(_BD.model_id, _BD.segment, _BD.window_start).in_(
    bindparam("keys", expanding=True)
)


@cache
def _deltas_statement() -> Select[Any]:
    rank = (
        func.row_number()
        .over(
            partition_by=(_BD.model_id, _BD.segment, _BD.window_start),
            order_by=(_BD.received_at, _BD.batch_id),
        )
        .label("rank")
    )
    ranked = select(*_BD, rank).where(_IN_CLAIMED).subquery()
    return (
        select(*(ranked.c[c.name] for c in _BD))
        .where(ranked.c.rank <= MAX_DELTAS_PER_CLAIM)
        .order_by(ranked.c.received_at, ranked.c.batch_id)
        .execution_options(**BINARY_RESULTS)
    )


def claimed_deltas(session: Session, claims: Sequence[Claim]) -> dict[AggregateKey, list[Row[Any]]]:
    """The unfolded deltas (``batch_delta`` rows) of each claimed window, oldest first
    (at most :data:`MAX_DELTAS_PER_CLAIM` per window; one query); the claims fold
    exactly these."""
    found: dict[AggregateKey, list[Row[Any]]] = {c.key: [] for c in claims}
    rows = session.connection().execute(_deltas_statement(), {"keys": list(found)})
    for row in rows:
        found[(row.model_id, row.segment, row.window_start)].append(row)
    return found


def claimed_models(session: Session, model_ids: Collection[int]) -> Sequence[Model]:
    """The models of the claimed windows (one query, binary rows: their bin edges)."""
    return session.scalars(
        select(Model).where(Model.id.in_(model_ids)), execution_options=BINARY_RESULTS
    ).all()


@dataclass(frozen=True)
class Quarantined:
    """A claimed delta set aside because it cannot be folded.

    Attributes
    ----------
    key : its window.
    batch_id, received_at, n, n_unlabelled : the ``batch_delta`` row's values.
    reason : why it cannot be folded.
    """

    key: AggregateKey
    batch_id: uuid.UUID
    received_at: datetime
    n: int
    n_unlabelled: int
    reason: str


REASON_CHARS = 1_000
"""Longest reason stored (an exception's message may hold a whole array)."""


def quarantine_deltas(session: Session, deltas: Sequence[Quarantined], now: datetime) -> None:
    """Move claimed ``deltas`` from ``batch_delta`` to ``quarantined_delta`` (stamped ``now``).

    Call it while their windows are held: in the claim's transaction, or after
    :func:`lock_claimed` found the claims still held (SQLite, where the claim
    commits before its deltas are read). No other worker can have claimed them.
    """
    if not deltas:
        return
    connection = session.connection()
    connection.execute(
        _QD_TABLE.insert(),
        [
            {
                "model_id": d.key[0],
                "segment": d.key[1],
                "window_start": d.key[2],
                "batch_id": d.batch_id,
                "received_at": d.received_at,
                "quarantined_at": now,
                "n": d.n,
                "n_unlabelled": d.n_unlabelled,
                "reason": d.reason[:REASON_CHARS],
            }
            for d in deltas
        ],
    )
    connection.execute(_DELETE_CLAIMED, {"claimed": [(*d.key, d.batch_id) for d in deltas]})


@dataclass(frozen=True)
class Held:
    """A claim still held at completion, as read under its row lock.

    Attributes
    ----------
    version : the aggregate's version.
    deltas : the window's unfolded deltas, the claimed ones included (more than
        were claimed: some arrived since, and the window stays waiting).
    """

    version: int
    deltas: int


_IN_KEYS = tuple_(*_KEY).in_(bindparam("keys", expanding=True))


@lru_cache(maxsize=256)
def _lock_statement(shapes: tuple[RangeShape, ...], dialect: str) -> Select[Any]:
    """:func:`lock_claimed`'s statement for dependents of these shapes (built once);
    each row says whether it lies in one of the dependents' ranges, and on PostgreSQL
    holds the statement's time too."""
    deltas = select(func.count()).where(_same_window(BD)).scalar_subquery().label("deltas")
    ranges = _ranges_conditions(shapes)
    dependent = [or_(*ranges).label("dependent")] if ranges else []
    clock = [_CLOCK.label("now")] if dialect == "postgresql" else []
    return (
        select(*_KEY, WA.claim_attempt, WA.version, deltas, *dependent, *clock)
        .where(or_(_IN_KEYS, *ranges))
        .order_by(*_KEY)
        .with_for_update(of=WA)
    )


class Locked(NamedTuple):
    """What :func:`lock_claimed` locked.

    Attributes
    ----------
    held : the claims still held, by key.
    now : the database's time (:func:`database_now`).
    dependents : how many locked rows lie in the dependents' ranges (0: there is
        no window to mark, and :func:`mark_dependents` need not run).
    """

    held: dict[AggregateKey, Held]
    now: datetime
    dependents: int


def lock_claimed(
    session: Session, claims: Sequence[Claim], dependents: Sequence[KeyRange] = ()
) -> Locked:
    """Lock the rows of ``claims`` and of ``dependents`` (the windows the completion
    will mark), all in key order, in one statement; return the claims still held,
    the database's time (:func:`database_now`; read by the same statement on
    PostgreSQL when it locked a row) and how many of the rows are dependents.

    Every transaction that locks several aggregate rows takes them in key order
    (see also :func:`invalidate_windows`), so completions of concurrent groups
    and invalidations cannot deadlock. A claim is no longer held when another
    worker claimed its window since, or an invalidation fenced it out: its
    window must then be left alone.
    """
    shapes, params = _ranges(dependents)
    attempts = {c.key: c.attempt for c in claims}
    dialect = session.get_bind().dialect.name
    rows = (
        session.connection()
        .execute(_lock_statement(shapes, dialect), params | {"keys": list(attempts)})
        .all()
    )
    held = {
        (row.model_id, row.segment, row.window_start): Held(int(row.version), int(row.deltas))
        for row in rows
        if attempts.get((row.model_id, row.segment, row.window_start)) == row.claim_attempt
    }
    now = rows[0].now if rows and dialect == "postgresql" else database_now(session)
    return Locked(held, now, sum(1 for row in rows if shapes and row.dependent))


class DoubleFold(RuntimeError):
    """A claimed delta was gone at fold time (the fold is rolled back)."""


@dataclass(frozen=True)
class Completion:
    """How one held claim ends.

    Attributes
    ----------
    claim : the claim (held: see :func:`lock_claimed`).
    folded : the aggregate's column values with the claimed deltas added, or
        None when no delta was claimed (nothing to fold).
    batch_ids : the claimed deltas, which the fold deletes.
    release : give the window back uncomputed: only the lease ends and the
        window stays waiting (graceful stop).
    detail_due_at : the window's next detail due time (None after a full
        refresh or an error; app/services/refresh/tiers.py).
    """

    claim: Claim
    folded: Mapping[str, Any] | None = None
    batch_ids: Sequence[uuid.UUID] = ()
    release: bool = False
    detail_due_at: datetime | None = None


_HELD_KEY = (
    (WA.model_id == bindparam("key_model_id"))
    & (WA.segment == bindparam("key_segment"))
    & (WA.window_start == bindparam("key_window_start"))
    & (WA.claim_attempt == bindparam("key_attempt"))
)
DELETE_CHUNK = 1_000
"""Most claimed deltas one ``DELETE`` names (bounds its parameters)."""


def _held_key(claim: Claim) -> dict[str, Any]:
    return {
        "key_model_id": claim.model_id,
        "key_segment": claim.segment,
        "key_window_start": claim.window_start,
        "key_attempt": claim.attempt,
    }


@lru_cache(maxsize=8)
def _fold_statement(columns: tuple[str, ...]) -> Update:
    """The fold of a held window: ``columns`` take the parameters ``new_<column>``."""
    table = _WA_TABLE
    return (
        update(table)
        .where(_HELD_KEY)
        .values(
            {c: bindparam(f"new_{c}", type_=table.c[c].type) for c in columns}
            | {
                "version": table.c.version + 1,
                "batches": table.c.batches + bindparam("new_batches"),
                "dirty": False,
                "dirty_since": None,
                "detail_due_at": bindparam("new_detail_due_at"),
                "lease_expires_at": None,
            }
        )
    )


_CLEAR = (
    update(_WA_TABLE)
    .where(_HELD_KEY)
    .values(
        lease_expires_at=None,
        dirty=False,
        dirty_since=None,
        detail_due_at=bindparam("new_detail_due_at"),
    )
)
_RELEASE = update(_WA_TABLE).where(_HELD_KEY).values(lease_expires_at=None)
_DELETE_CLAIMED = delete(_BD_TABLE).where(
    tuple_(_BD.model_id, _BD.segment, _BD.window_start, _BD.batch_id).in_(
        bindparam("claimed", expanding=True)
    )
)


def complete(session: Session, completions: Sequence[Completion]) -> None:
    """End the leases of held claims (lock them with :func:`lock_claimed` first).

    Unless ``release``, the dirty mark is cleared and the detail due time set
    to ``detail_due_at``. With ``folded``, the row
    takes those values, ``version`` + 1 and ``batches`` + ``len(batch_ids)``,
    and the deltas ``batch_ids`` of the window are deleted: every one of them,
    or :class:`DoubleFold` is raised (the caller's transaction must then roll
    back). One ``executemany`` per kind of completion, one ``DELETE`` per
    :data:`DELETE_CHUNK` deltas; the statements are built once.
    """
    connection = session.connection()
    folds = [c for c in completions if c.folded is not None]
    if folds:
        connection.execute(
            _fold_statement(tuple(folds[0].folded or {})),
            [
                {
                    **_held_key(c.claim),
                    **{f"new_{k}": v for k, v in (c.folded or {}).items()},
                    "new_batches": len(c.batch_ids),
                    "new_detail_due_at": c.detail_due_at,
                }
                for c in folds
            ],
        )
    cleared = [
        {**_held_key(c.claim), "new_detail_due_at": c.detail_due_at}
        for c in completions
        if c.folded is None and not c.release
    ]
    if cleared:
        connection.execute(_CLEAR, cleared)
    released = [_held_key(c.claim) for c in completions if c.release]
    if released:
        connection.execute(_RELEASE, released)
    claimed = [(*c.claim.key, batch_id) for c in folds for batch_id in c.batch_ids]
    deleted = 0
    for first in range(0, len(claimed), DELETE_CHUNK):
        chunk = claimed[first : first + DELETE_CHUNK]
        deleted += connection.execute(_DELETE_CLAIMED, {"claimed": chunk}).rowcount
    if deleted != len(claimed):
        raise DoubleFold(
            f"{len(claimed) - deleted} of {len(claimed)} claimed deltas were already folded"
        )


@dataclass(frozen=True)
class StoredResult:
    """A result to store for a held claim, computed from aggregate ``version``.

    ``document`` holds the columns ``metrics``, ``drift``, ``curves``,
    ``intervals``, ``reasons``, ``estimate``, ``maturity``, ``error``, ``detail_version`` and
    ``detail_computed_at``; the columns ``keep`` of an existing row stay as they
    are (a summary refresh keeps the stored detail).
    """

    claim: Claim
    version: int
    status: str
    document: Mapping[str, Any]
    keep: Collection[str] = ()


def upsert_window_metrics(
    session: Session, results: Sequence[StoredResult], *, computed_at: datetime
) -> None:
    """Store ``results`` (call after :func:`complete`): one ``executemany`` per set of
    kept columns (the statements are built once).

    An existing row computed from a newer aggregate version is never replaced.
    """
    by_keep: dict[frozenset[str], list[StoredResult]] = {}
    for result in results:
        by_keep.setdefault(frozenset(result.keep), []).append(result)
    dialect = session.get_bind().dialect.name
    for keep, group in by_keep.items():
        session.connection().execute(
            _upsert_statement(dialect, keep), [_metrics_row(r, computed_at) for r in group]
        )


_METRICS_KEY = ("model_id", "segment", "window_start")
_DOCUMENT_COLUMNS = (
    "metrics",
    "drift",
    "curves",
    "intervals",
    "reasons",
    "estimate",
    "maturity",
    "error",
    "detail_version",
    "detail_computed_at",
)
"""The columns of ``window_metrics`` a :class:`StoredResult`'s document holds."""
_METRICS_COLUMNS = ("aggregate_version", "computed_at", "status", *_DOCUMENT_COLUMNS)


@lru_cache(maxsize=8)
def _upsert_statement(dialect: str, keep: frozenset[str]) -> Any:
    """Insert a ``window_metrics`` row or replace the one of an older aggregate version,
    except its columns ``keep``."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(cast(Table, WindowMetrics.__table__))
    return stmt.on_conflict_do_update(
        index_elements=list(_METRICS_KEY),
        set_={k: stmt.excluded[k] for k in _METRICS_COLUMNS if k not in keep},
        where=WindowMetrics.aggregate_version <= stmt.excluded.aggregate_version,
    )


def _metrics_row(result: StoredResult, computed_at: datetime) -> dict[str, Any]:
    document = result.document
    return {
        "model_id": result.claim.model_id,
        "segment": result.claim.segment,
        "window_start": result.claim.window_start,
        "aggregate_version": result.version,
        "computed_at": computed_at,
        "status": result.status,
        **{column: document.get(column) for column in _DOCUMENT_COLUMNS},
        "metrics": document.get("metrics") or {},
    }


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
    shapes, params = _ranges([KeyRange(model_id, segment, start_from, start_to, exclude)])
    keys = session.execute(
        select(WA.model_id, WA.segment, WA.window_start)
        .where(*_ranges_conditions(shapes))
        .order_by(WA.segment, WA.window_start)
        .with_for_update(),
        params,
    ).all()
    if not keys:
        return 0
    _mark_dirty(session, shapes, params | {"now": now}, detail_due)
    return len(keys)


def mark_dependents(session: Session, ranges: Sequence[KeyRange], now: datetime) -> int:
    """Mark the windows of ``ranges`` for recomputation (their drift reference
    changed), in one statement, as :func:`invalidate_windows` does; the caller
    already holds their row locks (:func:`lock_claimed`). Returns how many."""
    if not ranges:
        return 0
    shapes, params = _ranges(ranges)
    return _mark_dirty(session, shapes, params | {"now": now}, detail_due=False)


def _mark_dirty(
    session: Session, shapes: tuple[RangeShape, ...], params: dict[str, Any], detail_due: bool
) -> int:
    """Mark the aggregate rows of the window ranges dirty and fence out their claims."""
    result = session.connection().execute(_mark_dirty_statement(shapes, detail_due), params)
    return int(result.rowcount)


@lru_cache(maxsize=256)
def _mark_dirty_statement(shapes: tuple[RangeShape, ...], detail_due: bool) -> Update:
    """Mark dirty at the parameter ``now``; with ``detail_due``, make the detail due then
    at the latest (built once)."""
    table = _WA_TABLE
    values: dict[str, Any] = {
        "dirty": True,
        "dirty_since": func.coalesce(table.c.dirty_since, _NOW),
        "lease_expires_at": None,
        "claim_attempt": table.c.claim_attempt + 1,
    }
    if detail_due:
        due = table.c.detail_due_at
        values["detail_due_at"] = case((due < _NOW, due), else_=_NOW)
    return update(table).where(or_(*_ranges_conditions(shapes))).values(values)


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

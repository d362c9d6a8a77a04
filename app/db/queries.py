"""Queries of the API side. They flush at most; they never commit (the caller owns
the transaction)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import psycopg
from sqlalchemy import (
    CTE,
    BigInteger,
    ColumnElement,
    CompoundSelect,
    Connection,
    Engine,
    Float,
    Insert,
    Integer,
    String,
    Table,
    and_,
    bindparam,
    cast,
    exists,
    func,
    insert,
    literal,
    null,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.models import ALL_SEGMENTS, ApiKey, Batch, BatchDelta, Model, WindowAggregate
from app.db.pipeline import Read, as_dbapi_error, driver_sql, read_all
from app.db.session import sqlite_write
from app.db.types import UTCDateTime


def get_model_by_name(session: Session, name: str) -> Model | None:
    return session.scalars(select(Model).where(Model.name == name)).one_or_none()


def model_exists(session: Session, model_id: int) -> bool:
    return session.scalar(select(Model.id).where(Model.id == model_id)) is not None


def list_models(
    session: Session, *, after: str | None = None, limit: int | None = None
) -> Sequence[Model]:
    """The models by name; with ``after``, only names after it (a keyset page of ``limit``)."""
    query = select(Model).order_by(Model.name).limit(limit)
    if after is not None:
        query = query.where(Model.name > after)
    return session.scalars(query).all()


def find_api_key_by_hash(session: Session, token_hash: str) -> ApiKey | None:
    """The key whose token hashes to ``token_hash`` (revoked keys included)."""
    return session.scalars(select(ApiKey).where(ApiKey.token_hash == token_hash)).first()


def list_api_keys(session: Session, model_id: int) -> Sequence[ApiKey]:
    return session.scalars(
        select(ApiKey).where(ApiKey.model_id == model_id).order_by(ApiKey.created_at, ApiKey.id)
    ).all()


def get_api_key(session: Session, model_id: int, key_id: uuid.UUID) -> ApiKey | None:
    return session.get(ApiKey, (model_id, key_id))


@dataclass(frozen=True)
class ExampleTotals:
    """Examples in a window's aggregates and in the whole model, unfolded deltas
    included (rows labelled or not), as :func:`read_admission` read them.

    Attributes
    ----------
    window_counts : examples of each aggregate of the window, in the order asked.
    model_folded : examples in the model's all-traffic aggregates (read, or the
        value the caller gave: see :func:`read_admission`).
    model_unfolded : examples in the model's unfolded all-traffic deltas.
    missing : the aggregates of the window that do not exist yet.
    window_unfolded : examples of the unfolded deltas of each aggregate of the
        window (a part of ``window_counts``).

    The model's sums are floating point, which cannot overflow (an integer
    SUM raises on SQLite past 2^63); exact to a few parts in 10^16, enough
    for a ceiling.
    """

    window_counts: list[int]
    model_folded: float
    model_unfolded: float
    missing: list[str]
    window_unfolded: list[int]

    @property
    def model_total(self) -> float:
        """Examples of the model's all-traffic windows, folded or not."""
        return self.model_folded + self.model_unfolded

    @property
    def unfolded(self) -> UnfoldedTotals:
        """The part of these totals read from the unfolded deltas."""
        return UnfoldedTotals(tuple(self.window_unfolded), self.model_unfolded)


@dataclass(frozen=True)
class UnfoldedTotals:
    """The unfolded deltas' part of :class:`ExampleTotals`, as a caller may pass it
    back (a recent read): examples per aggregate of the window, and of the model."""

    window: tuple[int, ...]
    model: float


@dataclass(frozen=True)
class BatchTarget:
    """The aggregates a batch counts in: its window's all-traffic one, and its
    segment's if it names one."""

    window_start: datetime
    segment: str | None

    @property
    def segments(self) -> list[str]:
        return [ALL_SEGMENTS] if self.segment is None else [ALL_SEGMENTS, self.segment]

    def params(self, model_id: int) -> dict[str, Any]:
        """The values of the totals' statement."""
        return {
            "model_id": model_id,
            "window_start": self.window_start,
            "segment": ALL_SEGMENTS if self.segment is None else self.segment,
        }


@functools.cache
def _example_totals_statement(
    include_model_total: bool, include_unfolded: bool = True
) -> CompoundSelect[Any]:
    """The statement of :class:`ExampleTotals`, built once per shape (its values are bound).

    One statement, a plain read (no lock): a batch committed meanwhile is not
    seen, which the headroom of the count ceilings absorbs
    (app/services/windows/limits.py). The ``kind`` column tells the aggregates'
    rows (0) from the deltas' (1), so that the caller knows which aggregate
    rows must still be created. ``include_model_total``: whether to sum the model's
    all-traffic aggregates, one row per window of the model (the reason a
    caller may pass that sum instead). ``include_unfolded``: whether to sum the
    unfolded deltas (of the window, and of the model: a scan of every delta
    waiting, which a caller may also pass instead).
    """
    parts = []
    tables: tuple[type[WindowAggregate] | type[BatchDelta], ...] = (WindowAggregate, BatchDelta)
    model_id = bindparam("model_id", type_=Integer)
    for kind, table in enumerate(tables):
        if table is BatchDelta and not include_unfolded:
            break
        parts.append(
            select(
                literal(kind),
                table.segment,
                func.sum(table.n + table.n_unlabelled),
                cast(null(), Float),  # typed: the first rows of the union may all be these
            )
            .where(
                table.model_id == model_id,
                table.window_start == bindparam("window_start", type_=UTCDateTime()),
                table.segment.in_([literal(ALL_SEGMENTS), bindparam("segment", type_=String)]),
            )
            .group_by(table.segment)
        )
        if table is WindowAggregate and not include_model_total:
            continue
        parts.append(
            select(
                literal(kind),
                literal(None, String),
                literal(None, BigInteger),
                func.sum(cast(table.n, Float) + cast(table.n_unlabelled, Float)),
            ).where(table.model_id == model_id, table.segment == ALL_SEGMENTS)
        )
    return union_all(*parts)


def _example_totals_of(
    rows: Iterable[Any],
    segments: Sequence[str],
    model_folded: float | None,
    unfolded: UnfoldedTotals | None,
) -> ExampleTotals:
    counts = [dict.fromkeys(segments, 0), dict.fromkeys(segments, 0)]  # aggregates, deltas
    existing: set[str] = set()
    model_sums = [0.0, 0.0]  # folded, unfolded
    for kind, segment, n, total in rows:
        if segment is None:
            model_sums[kind] += float(total or 0.0)
            continue
        counts[kind][segment] += int(n or 0)
        if kind == 0:
            existing.add(segment)
    missing = [s for s in segments if s not in existing]
    folded = model_sums[0] if model_folded is None else model_folded
    if unfolded is None:
        unfolded = UnfoldedTotals(tuple(counts[1].values()), model_sums[1])
    window = [a + d for a, d in zip(counts[0].values(), unfolded.window, strict=True)]
    return ExampleTotals(window, folded, unfolded.model, missing, list(unfolded.window))


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


def window_holds_unlabelled(session: Session, model_id: int, segment: str, start: datetime) -> bool:
    """Whether the window (model, segment, start) holds unlabelled rows, folded or not."""
    folded = select(WindowAggregate.n_unlabelled).where(
        WindowAggregate.model_id == model_id,
        WindowAggregate.segment == segment,
        WindowAggregate.window_start == start,
        WindowAggregate.n_unlabelled > 0,
    )
    unfolded = select(BatchDelta.n_unlabelled).where(
        BatchDelta.model_id == model_id,
        BatchDelta.segment == segment,
        BatchDelta.window_start == start,
        BatchDelta.n_unlabelled > 0,
    )
    return bool(session.scalar(select(exists(folded) | exists(unfolded))))


@dataclass(frozen=True)
class StoredAnswer:
    """What a replay needs of an accepted batch: its key, body hash and response."""

    idempotency_key: str
    request_hash: str
    response: dict[str, Any]


_FIND_ANSWER = select(Batch.request_hash, Batch.response).where(
    Batch.model_id == bindparam("model_id"), Batch.idempotency_key == bindparam("key")
)


def find_answer(session: Session, model_id: int, key: str) -> StoredAnswer | None:
    """The stored answer of the batch of (model, ``key``), or None."""
    found = session.connection().execute(_FIND_ANSWER, {"model_id": model_id, "key": key}).first()
    return None if found is None else StoredAnswer(key, found[0], found[1])


def _bound_values(table: Table, prefix: str) -> dict[str, ColumnElement[Any]]:
    return {c.name: bindparam(prefix + c.name, type_=c.type) for c in table.columns}


@functools.cache
def _insert_batch_with_deltas(segments: int) -> Insert:
    """PostgreSQL: ``WITH b AS (INSERT INTO batch ...) INSERT INTO batch_delta ...``,
    one delta row per segment (``d_segment_0``...), the other delta columns
    bound once as ``d_<column>``, the batch's as ``b_<column>``."""
    batch = Batch.__table__
    assert isinstance(batch, Table)
    new_batch = insert(batch).values(_bound_values(batch, "b_")).returning(batch.c.id).cte("b")
    return _deltas_of(new_batch, segments)


def _deltas_of(new_batch: CTE, segments: int) -> Insert:
    """``INSERT INTO batch_delta``: a row per segment (``d_segment_0``...) for each
    row of ``new_batch`` (a data-modifying CTE returning the batch's id)."""
    delta = BatchDelta.__table__
    assert isinstance(delta, Table)
    names = [bindparam(f"d_segment_{i}", type_=String) for i in range(segments)]
    segment_rows = union_all(*(select(name.label("segment")) for name in names)).subquery("s")
    values = _bound_values(delta, "d_")
    values.update(segment=segment_rows.c.segment, batch_id=new_batch.c.id)
    rows = select(*values.values()).select_from(new_batch).join(segment_rows, true())
    return insert(delta).from_select(list(values), rows).add_cte(new_batch)


def insert_batch(
    session: Session, batch: dict[str, Any], delta: dict[str, Any], segments: Sequence[str]
) -> None:
    """Insert a batch row (columns of ``batch``) and its delta row in each of ``segments``
    (columns of ``delta`` but ``segment``).

    One statement on PostgreSQL (the batch row in a data-modifying CTE), two
    on SQLite (the batch row first: a reused idempotency key fails before the
    deltas are written). Core statements, compiled once per process: no ORM
    unit of work.
    """
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        connection.execute(insert(Batch), batch)
        connection.execute(insert(BatchDelta), [{**delta, "segment": s} for s in segments])
        return
    params = {f"b_{name}": value for name, value in batch.items()}
    params.update((f"d_{name}", value) for name, value in delta.items())
    params.update((f"d_segment_{i}", segment) for i, segment in enumerate(segments))
    connection.execute(_insert_batch_with_deltas(len(segments)), params)


@functools.cache
def _admitted_batch_row(
    segments: int, with_key: bool, with_model: bool, with_token: bool, with_lock: bool = False
) -> Insert:
    """``INSERT INTO batch ... SELECT`` the batch row (columns bound as ``b_<column>``)
    only when its admission holds, checked in the same statement.

    Every aggregate of the window exists, each counting at most ``room_<i>``
    examples (segment ``d_segment_<i>``). With ``with_key``: no batch holds
    ``b_idempotency_key``. With ``with_model``: the model's settings were
    last updated at ``model_updated_at``; with ``with_token``: the key of
    ``token_hash`` is not revoked. With ``with_lock`` (PostgreSQL, with the
    key): the advisory lock ``lock_id`` is taken too
    (``pg_try_advisory_xact_lock``, held until the transaction ends).
    """
    batch = Batch.__table__
    assert isinstance(batch, Table)
    values = _bound_values(batch, "b_")
    model_id = values["model_id"]
    aggregate = WindowAggregate
    with_room = [
        and_(
            aggregate.segment == bindparam(f"d_segment_{i}", type_=String),
            aggregate.n + aggregate.n_unlabelled <= bindparam(f"room_{i}", type_=BigInteger),
        )
        for i in range(segments)
    ]
    rooms = (
        select(func.count())
        .where(
            aggregate.model_id == model_id,
            aggregate.window_start == values["window_start"],
            or_(*with_room),
        )
        .scalar_subquery()
    )
    admitted: list[ColumnElement[bool]] = [rooms == segments]
    if with_lock:
        admitted.append(func.pg_try_advisory_xact_lock(bindparam("lock_id", type_=BigInteger)))
    if with_key:
        admitted.append(
            ~exists().where(
                Batch.model_id == model_id, Batch.idempotency_key == values["idempotency_key"]
            )
        )
    if with_model:
        updated_at = select(Model.updated_at).where(Model.id == model_id).scalar_subquery()
        admitted.append(updated_at == bindparam("model_updated_at", type_=UTCDateTime()))
    if with_token:
        admitted.append(
            exists().where(
                ApiKey.model_id == model_id,
                ApiKey.token_hash == bindparam("token_hash", type_=String),
                ApiKey.revoked_at.is_(None),
            )
        )
    rows = select(*values.values()).where(*admitted)
    return insert(batch).from_select(list(values), rows)


@functools.cache
def _insert_admitted_batch(
    segments: int, with_key: bool, with_model: bool, with_token: bool
) -> Insert:
    """PostgreSQL: :func:`_insert_batch_with_deltas` whose batch row is
    :func:`_admitted_batch_row`'s (with the advisory lock when ``with_key``),
    ``RETURNING`` the delta rows: none when the admission does not hold."""
    row = _admitted_batch_row(segments, with_key, with_model, with_token, with_lock=with_key)
    new_batch = row.returning(Batch.__table__.c.id).cte("b")
    return _deltas_of(new_batch, segments).returning(BatchDelta.__table__.c.batch_id)


@dataclass(frozen=True)
class PendingBatch:
    """A batch to store if its admission holds (:func:`read_admission`'s ``store``):
    the columns of its ``batch`` row and of its delta (but ``segment``), and per
    segment of its window the most examples that aggregate may hold for it to
    fit (``app.services.windows.limits.window_room``)."""

    batch: dict[str, Any]
    delta: dict[str, Any]
    rooms: Mapping[str, int]


def _insert_admitted(
    engine: Engine | Connection,
    pending: PendingBatch,
    lock_id: int | None,
    credential: CachedCredential | None,
) -> bool:
    """Store ``pending`` if its admission holds, checked as it is written; whether it
    was stored.

    The batch row and its delta in each segment of its rooms (as
    :func:`insert_batch`), stored only if no batch holds the key (when the
    batch has one), every aggregate of the window exists holding at most its
    room in examples, and ``credential`` still holds
    (:func:`_admitted_batch_row`). PostgreSQL: on a pooled connection in
    autocommit, as one prepared statement that also takes the advisory lock
    ``lock_id``: one round trip, the statement's own transaction. SQLite: on
    a pooled sqlite3 connection, in one write transaction
    (:func:`app.db.session.sqlite_write`), the batch row's statement and, if
    it wrote the row, the deltas'. Raises as SQLAlchemy does
    (``IntegrityError`` when another request stored the key meanwhile;
    ``OperationalError`` with ``connection_invalidated`` when a PostgreSQL
    connection broke, which is discarded).
    """
    assert isinstance(engine, Engine)
    batch, rooms = pending.batch, pending.rooms
    with_key = batch["idempotency_key"] is not None
    assert not with_key or lock_id is not None or engine.dialect.name == "sqlite"
    flags = (
        len(rooms),
        with_key,
        credential is not None,
        credential is not None and credential.token_hash is not None,
    )
    params = {f"b_{name}": value for name, value in batch.items()}
    params.update((f"d_{name}", value) for name, value in pending.delta.items())
    for i, segment in enumerate(rooms):
        params.update({f"d_segment_{i}": segment, f"room_{i}": rooms[segment]})
    if credential is not None:
        params["model_updated_at"] = credential.model_updated_at
        params["token_hash"] = credential.token_hash
    if engine.dialect.name == "sqlite":
        return _insert_admitted_sqlite(engine, _admitted_batch_row(*flags), params, list(rooms))
    params["lock_id"] = lock_id
    compiled = driver_sql(_insert_admitted_batch(*flags), engine.dialect)
    with as_dbapi_error():  # a server that refuses connections: as SQLAlchemy raises it
        connection = engine.raw_connection()
    try:
        driver = connection.driver_connection
        assert isinstance(driver, psycopg.Connection)
        with as_dbapi_error(connection):
            driver.autocommit = True
            try:
                with driver.cursor() as cursor:
                    cursor.execute(compiled.sql, compiled.params(params), prepare=True)
                    return cursor.fetchone() is not None
            finally:
                if not driver.closed:
                    driver.autocommit = False
    finally:
        connection.close()


@functools.cache
def _insert_delta() -> Insert:
    """``INSERT INTO batch_delta``, every column bound as ``d_<column>``."""
    delta = BatchDelta.__table__
    assert isinstance(delta, Table)
    return insert(delta).values(_bound_values(delta, "d_"))


def _insert_admitted_sqlite(
    engine: Engine, batch_row: Insert, params: dict[str, Any], segments: list[str]
) -> bool:
    """:func:`_insert_admitted` on SQLite: ``batch_row`` with ``params``, then, if it
    wrote the row, a delta row per segment, in one write transaction on the driver
    connection (statements compiled once per process, values bound before the
    writer lock is taken)."""
    row = driver_sql(batch_row, engine.dialect)
    delta = driver_sql(_insert_delta(), engine.dialect)
    row_values = row.positional(params)
    delta_values = [delta.positional({**params, "d_segment": s}) for s in segments]
    with as_dbapi_error(), sqlite_write(engine) as driver:
        if driver.execute(row.sql, row_values).rowcount != 1:
            return False
        driver.executemany(delta.sql, delta_values)
        return True


@dataclass(frozen=True)
class CachedCredential:
    """What a request's authorisation took from the process's cache, to be checked
    again by :func:`read_admission`: the model's settings as last updated at
    ``model_updated_at``, and the model key whose token hashes to ``token_hash``
    (None for the admin token, which is not stored)."""

    model_updated_at: datetime | None
    token_hash: str | None


@dataclass(frozen=True)
class Admission:
    """What :func:`read_admission` read.

    Attributes
    ----------
    locked : whether the advisory lock was taken (True when none was asked for).
    answer : the stored answer of (model, key), or None.
    totals : the window's :class:`ExampleTotals` if asked for, else None.
    credential_holds : whether the cached credential still holds (the model's
        settings unchanged, the key not revoked); True when none was given.
    unfolded_deltas : the model's unfolded all-traffic deltas (one per batch
        not yet folded), counted up to the cap asked for; None if not asked.
    stored : whether the batch given as ``store`` was stored.
    """

    locked: bool
    answer: StoredAnswer | None
    totals: ExampleTotals | None
    credential_holds: bool
    unfolded_deltas: int | None = None
    stored: bool = False


_TRY_LOCK = select(func.pg_try_advisory_xact_lock(bindparam("lock_id", type_=BigInteger)))
_CREDENTIAL_STATE = select(
    select(Model.updated_at).where(Model.id == bindparam("model_id")).scalar_subquery(),
    select(func.count())
    .select_from(ApiKey)
    .where(
        ApiKey.model_id == bindparam("model_id"),
        ApiKey.token_hash == bindparam("token_hash"),
        ApiKey.revoked_at.is_(None),
    )
    .scalar_subquery(),
)

_UNFOLDED_DELTAS = select(func.count()).select_from(
    select(literal(1))
    .where(
        BatchDelta.model_id == bindparam("model_id", type_=Integer),
        BatchDelta.segment == ALL_SEGMENTS,
    )
    .limit(bindparam("cap", type_=Integer))
    .subquery()
)
"""The model's unfolded all-traffic deltas, counted up to ``cap``: a scan of at most
``cap`` entries of the primary key's (model, segment) prefix, however many wait."""


def read_admission(
    session: Session,
    model_id: int,
    *,
    lock_id: int | None = None,
    key: str | None = None,
    window: BatchTarget | None = None,
    credential: CachedCredential | None = None,
    model_folded: float | None = None,
    unfolded: UnfoldedTotals | None = None,
    count_unfolded_up_to: int | None = None,
    store: PendingBatch | None = None,
) -> Admission:
    """Everything a batch's admission reads, in the session's transaction: try the
    advisory lock ``lock_id`` (PostgreSQL), look ``key`` up, read the window's
    :class:`ExampleTotals`, check ``credential``, count the model's unfolded
    deltas up to ``count_unfolded_up_to`` (each if given).

    ``store`` (nothing to count): instead, store that batch in a transaction of
    its own if the lock is free (PostgreSQL), the key unused, the credential
    holding and each aggregate of the window there with room for it
    (:func:`_insert_admitted`); nothing else is read, the answer says only
    whether it was ``stored`` (if not, the caller reads in full).

    ``model_folded``: the model's folded total, if the caller knows it (a recent
    read): its sum over every window of the model is then not read again.
    ``unfolded``: likewise the unfolded deltas' totals of the window and the
    model (a scan of every delta waiting), given for the same ``window``.

    On PostgreSQL the statements go in one round trip (psycopg pipeline mode).
    The server runs them in order, each with its own snapshot, so the lookup
    sees every batch committed before the lock was taken, exactly as separate
    round trips would. The lock lives until the transaction ends.
    """
    if store is not None:
        assert count_unfolded_up_to is None
        stored = _insert_admitted(session.get_bind(), store, lock_id, credential)
        return Admission(True, None, None, credential_holds=True, stored=stored)
    reads: list[tuple[Read, dict[str, Any]]] = []
    if lock_id is not None:
        reads.append((_TRY_LOCK, {"lock_id": lock_id}))
    if key is not None:
        reads.append((_FIND_ANSWER, {"model_id": model_id, "key": key}))
    if window is not None:
        statement = _example_totals_statement(model_folded is None, unfolded is None)
        reads.append((statement, window.params(model_id)))
    if credential is not None:
        token_hash = credential.token_hash
        reads.append((_CREDENTIAL_STATE, {"model_id": model_id, "token_hash": token_hash}))
    if count_unfolded_up_to is not None:
        reads.append((_UNFOLDED_DELTAS, {"model_id": model_id, "cap": count_unfolded_up_to}))
    if not reads:
        return Admission(locked=True, answer=None, totals=None, credential_holds=True)
    results = iter(read_all(session, reads))
    locked = True if lock_id is None else bool(next(results)[0][0])
    found = None if key is None else next(iter(next(results)), None)
    answer = None
    if key is not None and found is not None:
        response = found[1] if isinstance(found[1], dict) else orjson.loads(found[1])
        answer = StoredAnswer(key, str(found[0]), response)
    totals = None
    if window is not None:
        totals = _example_totals_of(next(results), window.segments, model_folded, unfolded)
    holds = True
    if credential is not None:
        updated_at, active_keys = next(results)[0]
        holds = updated_at is not None and updated_at == credential.model_updated_at
        holds = holds and (credential.token_hash is None or active_keys > 0)
    waiting = None if count_unfolded_up_to is None else int(next(results)[0][0])
    return Admission(locked, answer, totals, holds, waiting)

"""Batch ingestion: one transaction per accepted batch.

Order of work for ``POST /v1/models/{name}/batches``:

1. parse and validate the body (no database work; the body hash of a large
   body is computed in another thread meanwhile, once the parse lets it). If
   the body is refused, the key decides first, as if steps 2-3 had come
   before: 409 while in flight, the replay of its batch (or 422 for another
   body), else the body's error;
2. in-flight guard on (model, Idempotency-Key) -> 409 if held;
3. one read (app/db/queries.py ``read_admission``): the replay lookup (a
   batch with that key -> its stored answer, same body, or 422, other body;
   nothing stored), the window's and the model's totals for the count
   ceilings, unfolded deltas included (app/services/windows/limits.py; plain
   reads, no lock; the model's folded total from :data:`MODEL_TOTAL_CACHE` and
   the unfolded deltas' sums from :data:`UNFOLDED_TOTAL_CACHE` while fresh), the
   cached authorisation checked again (the route's key and model settings:
   :class:`~app.errors.StaleCredential` if either changed), and
   the model's unfolded deltas counted up to their bound unless this
   process counted them a moment ago
   (app/services/ingest/backpressure.py: 429 past the bound);
4. one write transaction: create the window's aggregate rows if the read
   found them missing (``ON CONFLICT DO NOTHING``: a row created meanwhile
   by another batch is neither written nor locked), insert the batch row
   and its deltas (one per aggregate it counts in: all traffic, and the
   segment's if any); commit. Any failure rolls all of it back. No statement
   waits for another batch's transaction (but for the first creation of an
   aggregate row); the worker folds the deltas into the aggregates later
   (app/services/refresh/groups.py).

While this process's totals of the window and the model and its tally of
the unfolded deltas are fresh (all but about one batch a second per
window), steps 2-4 are one statement that checks every admission condition
as it writes (:func:`_store_at_once`): it finds no batch with the key,
checks the cached authorisation and that every aggregate of the window
exists with room for the batch, and inserts the batch row and its deltas,
or writes nothing; then (a replay, a key in flight, the window's first
batch...) the full path below decides. On PostgreSQL it is one prepared
statement in autocommit, one round trip, that also takes the key's advisory
lock; on SQLite the key is held in this process's registry and the
statement, then the deltas' insert, run in one write transaction on a
sqlite3 connection (no session, no reads before). Otherwise
steps 2-4 share one transaction (the advisory lock of step 2 lives until
the commit), step 3 is one pipelined round trip and the inserts of step 4
one statement; on SQLite the write transaction of step 4 starts with BEGIN
IMMEDIATE after the reads, so only the inserts are serialised.
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import queries
from app.db.models import ALL_SEGMENTS
from app.db.session import write_transaction
from app.errors import InvalidInput, MalformedBody, ModelNotFound, RequestInFlight
from app.services.ingest import idempotency
from app.services.ingest.backpressure import UNFOLDED_COUNTS
from app.services.ingest.parse import ParsedBatch, parse_batch
from app.services.models.config import ModelConfig
from app.services.models.engine_cache import EngineCache
from app.services.windows.deltas import Delta
from app.services.windows.limits import (
    FOLDED_TOTAL_TTL_SECONDS,
    UNFOLDED_TOTAL_TTL_SECONDS,
    check_room,
    model_has_room,
    window_room,
)
from app.timegrid import isoformat_z

_HASHER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="priorwatch-body-hash")
"""Hashes large request bodies beside the request's own work: hashlib releases
the GIL on large inputs, so the hash of a 2 MB body (about 1.5 ms) runs on
another core while this thread bins, sums and waits for the database. It
starts only when the JSON parse ends: simdjson holds the GIL throughout,
and the hashing thread needs it to begin. (Parsing there too was measured
slower, for the same reason; bench/bench_ingest.py.)"""

MODEL_TOTAL_CACHE = EngineCache(ttl=FOLDED_TOTAL_TTL_SECONDS)
"""Per model, its folded example total as last read by this process: the
model ceiling's sum over every window of the model, read again once stale
(app/services/windows/limits.py)."""

UNFOLDED_TOTAL_CACHE = EngineCache(ttl=UNFOLDED_TOTAL_TTL_SECONDS)
"""Per (model, window, segment), the unfolded deltas' sums of the window's
aggregates and of the model as last read by this process: a scan of every
delta waiting, read again once stale (app/services/windows/limits.py)."""

INLINE_HASH_BYTES = 64 * 1024
"""Bodies up to this size are hashed in the request's thread: a small body
hashes in microseconds, less than handing it to another thread costs."""


@dataclass(frozen=True)
class IngestOutcome:
    """The response body, and whether it is the replay of an earlier request."""

    response: dict[str, Any]
    replayed: bool


def _hash_body(body: bytes) -> Future[str]:
    if len(body) > INLINE_HASH_BYTES:
        return _HASHER.submit(idempotency.request_hash, body)
    done: Future[str] = Future()
    done.set_result(idempotency.request_hash(body))
    return done


def _replay(earlier: queries.StoredAnswer, body_hash: Future[str]) -> IngestOutcome:
    return IngestOutcome(idempotency.replay_response(earlier, body_hash.result()), replayed=True)


def _lookup_replay(
    session: Session, model_id: int, key: str | None, body_hash: Future[str]
) -> IngestOutcome | None:
    earlier = None if key is None else queries.find_answer(session, model_id, key)
    return None if earlier is None else _replay(earlier, body_hash)


def batch_delta(batch_id: uuid.UUID, parsed: ParsedBatch) -> Delta:
    """The delta of a parsed batch: its histograms reduced to the non-empty bins."""
    labelled = (
        None
        if parsed.hist_positives is None or parsed.hist_negatives is None
        else (parsed.hist_positives, parsed.hist_negatives)
    )
    present = [h for h in (*(labelled or ()), parsed.unlabelled) if h is not None]
    bins = pos = neg = unl = None
    if present:
        nonzero = np.flatnonzero(np.logical_or.reduce([h != 0 for h in present]))
        bins = nonzero.astype(np.int32)
        if labelled is not None:
            pos = np.asarray(labelled[0][nonzero], dtype=np.int64)
            neg = np.asarray(labelled[1][nonzero], dtype=np.int64)
        if parsed.unlabelled is not None:
            unl = np.asarray(parsed.unlabelled[nonzero], dtype=np.int64)
    return Delta(
        batch_id=batch_id,
        n=parsed.n,
        positives=parsed.positives,
        confusion=parsed.confusion,
        bins=bins,
        bin_positives=pos,
        bin_negatives=neg,
        sums=parsed.sums,
        n_unlabelled=parsed.n_unlabelled,
        bin_unlabelled=unl,
    )


LATE_LABELS = (
    "is older than the accepted backfill age: labels this old are accepted within the "
    "model's label_horizon, for a window that holds unlabelled rows (their predictions), "
    "and this one holds none"
)
"""Why a labelled batch past the backfill age is refused (docs/maturity.md)."""


def _check_late_labels(session: Session, model: ModelConfig, parsed: ParsedBatch) -> None:
    """Refuse late labels (:attr:`ParsedBatch.late_labels`) of a window without predictions."""
    key = ALL_SEGMENTS if parsed.segment is None else parsed.segment
    try:
        if not queries.window_holds_unlabelled(session, model.id, key, parsed.window_start):
            raise InvalidInput("timestamp", LATE_LABELS)
    finally:
        session.rollback()  # end the read: the admission below opens its own


def _check_room(parsed: ParsedBatch, totals: queries.ExampleTotals) -> None:
    """Refuse a batch that would pass a count ceiling."""
    added = parsed.n + parsed.n_unlabelled  # labelled and unlabelled rows share the ceilings
    check_room(parsed.kind, added, totals.window_counts, totals.model_total)


def _parse_or_replay(
    session: Session,
    model: ModelConfig,
    body: bytes,
    key: str | None,
    body_hash: Future[str],
    settings: Settings,
    now: datetime,
    credential: queries.CachedCredential | None,
) -> ParsedBatch | IngestOutcome:
    """The parsed body; if it is refused, the key decides first, as if it had been
    looked up before parsing: 409 while held, else its replay (or 422 for another
    body), else the body's own error."""
    try:
        return parse_batch(body, model, settings, now)
    except (InvalidInput, MalformedBody):
        with idempotency.in_flight_guard(session, model.id, key, credential=credential) as read:
            if read.answer is not None:
                return _replay(read.answer, body_hash)
        raise


@dataclass(frozen=True)
class _Rows:
    """What storing a batch writes: its ``batch`` row, its ``delta`` row (one per
    segment of ``window``) and the answer stored in the batch row."""

    batch: dict[str, Any]
    delta: dict[str, Any]
    window: queries.BatchTarget
    response: dict[str, Any]


def _rows(
    model: ModelConfig, parsed: ParsedBatch, key: str | None, body_hash: str, now: datetime
) -> _Rows:
    batch_id = uuid.uuid4()
    response = {
        "batch_id": str(batch_id),
        "window_start": isoformat_z(parsed.window_start),
        "count": parsed.n + parsed.n_unlabelled,
    }
    batch = {
        "model_id": model.id,
        "id": batch_id,
        "idempotency_key": key,
        "request_hash": body_hash,
        "kind": parsed.kind,
        "event_at": parsed.event_at,
        "window_start": parsed.window_start,
        "segment": parsed.segment,
        "n": parsed.n,
        "positives": parsed.positives,
        "unlabelled": parsed.n_unlabelled,
        "response": response,
        "received_at": now,
    }
    delta = batch_delta(batch_id, parsed).to_row(model.id, ALL_SEGMENTS, parsed.window_start, now)
    return _Rows(batch, delta, queries.BatchTarget(parsed.window_start, parsed.segment), response)


def _store(
    session: Session, model: ModelConfig, rows: _Rows, missing: list[str], now: datetime
) -> None:
    """The write transaction's statements (everything they write was built before)."""
    if missing:  # the window's first batch (or a concurrent one): create the rows
        queries.ensure_window_aggregates(
            session, model.id, rows.window.window_start, missing, model.thresholds, now
        )
    queries.insert_batch(session, rows.batch, rows.delta, rows.window.segments)


def _store_at_once(
    session: Session,
    model: ModelConfig,
    rows: _Rows,
    key: str | None,
    credential: queries.CachedCredential | None,
    model_folded: float | None,
    unfolded: queries.UnfoldedTotals | None,
) -> bool:
    """Store the batch in one statement (on SQLite one write transaction of two) if
    every admission check can ride in it; whether it was stored (False: nothing
    was written, the full path decides).

    Only while this process's reads of the model's totals and unfolded
    deltas are fresh (``model_folded``, ``unfolded`` not None; the caller
    checks its tally of the unfolded deltas): the statement then checks the
    key (on PostgreSQL its advisory lock, on SQLite this process's registry
    of keys in flight; no stored batch), that each aggregate of the window
    exists with room for the batch (``window_room``), and ``credential``
    (app/db/queries.py ``read_admission`` with ``store``). The model ceiling
    is checked here, on the cached totals. Anything unusual (the window's
    first batch, a replay, a key in flight, a stale credential, a full
    window or model; a broken connection, when the request has a key: its
    retry) is left to the full path, which answers as before.
    """
    engine = session.get_bind()
    if not isinstance(engine, Engine) or model_folded is None or unfolded is None:
        return False
    added = rows.batch["n"] + rows.batch["unlabelled"]
    segments = rows.window.segments
    rooms = {s: window_room(added, u) for s, u in zip(segments, unfolded.window, strict=True)}
    if min(rooms.values()) < 0 or not model_has_room(added, model_folded + unfolded.model):
        return False
    try:
        with idempotency.held_in_process(engine, model.id, key):
            return queries.read_admission(
                session,
                model.id,
                lock_id=None if key is None else idempotency.advisory_lock_id(model.id, key),
                key=key,
                window=rows.window,
                credential=credential,
                model_folded=model_folded,
                unfolded=unfolded,
                store=queries.PendingBatch(rows.batch, rows.delta, rooms),
            ).stored
    except RequestInFlight:
        return False  # the full path answers 409
    except DBAPIError as exc:
        if exc.connection_invalidated and key is not None:
            return False  # a replay if it was stored: the full path tells
        raise


def ingest_batch(
    session: Session,
    model: ModelConfig,
    body: bytes,
    *,
    idempotency_key: str | None,
    settings: Settings,
    now: datetime,
    credential: queries.CachedCredential | None = None,
) -> IngestOutcome:
    """Validate and store one batch for ``model``, or replay an earlier answer.

    ``credential``: what the caller's authorisation took from a cache (``model``
    among it), checked again in the same round trip as the key.

    Raises
    ------
    StaleCredential
        ``credential`` no longer holds; nothing was answered or stored.
    RequestInFlight
        Another request with this key is being processed.
    IdempotencyKeyReused
        The key was used before with another body.
    MalformedBody, InvalidInput
        The body is not acceptable; nothing is stored.
    TooManyUnfoldedDeltas
        The model's unfolded deltas reached ``settings.max_unfolded_deltas``;
        nothing is stored.
    """
    key = idempotency.check_idempotency_key(idempotency_key)
    body_hash = _hash_body(body)
    try:
        parsed = _parse_or_replay(session, model, body, key, body_hash, settings, now, credential)
        if isinstance(parsed, IngestOutcome):
            return parsed
        if parsed.late_labels:
            _check_late_labels(session, model, parsed)
        rows = _rows(model, parsed, key, body_hash.result(), now)
        engine = session.get_bind()
        generation = MODEL_TOTAL_CACHE.generation
        folded: float | None = MODEL_TOTAL_CACHE.get(engine, model.id)
        unfolded_generation = UNFOLDED_TOTAL_CACHE.generation
        unfolded_key = (model.id, rows.window)
        unfolded: queries.UnfoldedTotals | None = UNFOLDED_TOTAL_CACHE.get(engine, unfolded_key)
        bound = settings.max_unfolded_deltas
        count_up_to = UNFOLDED_COUNTS.cap_to_count(engine, model.id, bound)
        at_once = count_up_to is None  # no count due: the tally is fresh and below the bound
        if at_once and _store_at_once(session, model, rows, key, credential, folded, unfolded):
            UNFOLDED_COUNTS.add_one(engine, model.id)
            return IngestOutcome(rows.response, replayed=False)
        guard = idempotency.in_flight_guard(
            session,
            model.id,
            key,
            rows.window,
            credential,
            model_folded=folded,
            unfolded=unfolded,
            count_unfolded_up_to=count_up_to,
        )
        with guard as read:
            if read.answer is not None:
                return _replay(read.answer, body_hash)
            assert read.totals is not None
            if folded is None:
                MODEL_TOTAL_CACHE.put(engine, model.id, read.totals.model_folded, generation)
            if unfolded is None:
                UNFOLDED_TOTAL_CACHE.put(
                    engine, unfolded_key, read.totals.unfolded, unfolded_generation
                )
            _check_room(parsed, read.totals)
            UNFOLDED_COUNTS.check(engine, model.id, bound, read.unfolded_deltas)
            with write_transaction(session):
                _store(session, model, rows, read.totals.missing, now)
            UNFOLDED_COUNTS.add_one(engine, model.id)
            return IngestOutcome(rows.response, replayed=False)
    except IntegrityError:
        # Another process stored the same key between our lookup and our write
        # (possible on SQLite with several processes; PostgreSQL holds an
        # advisory lock). The key now exists: answer as a replay would. Or the
        # model was deleted meanwhile (its rows' foreign key failed): 404.
        session.rollback()
        if not queries.model_exists(session, model.id):
            raise ModelNotFound(f"no model named {model.name!r}") from None
        replay = _lookup_replay(session, model.id, key, body_hash)
        if replay is None:
            raise
        return replay
    finally:
        if session.in_transaction():
            session.rollback()

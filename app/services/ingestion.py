"""Batch ingestion: one transaction per accepted batch.

Order of work for ``POST /v1/models/{name}/batches``:

1. in-flight guard on (model, Idempotency-Key) -> 409 if held;
2. replay lookup: a batch with that key -> its stored answer (same body) or
   422 (other body); nothing stored;
3. parse and validate the body (no database locks held; the body hash is
   computed beside steps 1-3 in another thread);
4. one write transaction: insert the batch row, lock the window's aggregates
   (all traffic, and the segment's if any) in segment order, check the count
   ceilings (app/services/count_limits.py), add the batch, bump versions,
   mark dirty; commit. Any failure rolls all of it back.

On PostgreSQL steps 1-4 share one transaction (the advisory lock of step 1
lives until the commit); on SQLite the write transaction of step 4 starts
with BEGIN IMMEDIATE after the reads.
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import queries
from app.db.models import ALL_SEGMENTS, Batch
from app.db.session import write_transaction
from app.services import idempotency
from app.services.aggregates import apply_batch
from app.services.batch_parsing import ParsedBatch, parse_batch
from app.services.count_limits import check_room
from app.services.model_config import ModelConfig
from app.services.windowing import isoformat_z

_HASHER = ThreadPoolExecutor(max_workers=4, thread_name_prefix="priorwatch-body-hash")
"""Hashes request bodies beside the request's own work: hashlib releases the
GIL on large inputs, so the hash of a 2 MB body (about 1.5 ms) runs on another
core while this thread waits for the database and parses. (Parsing there too
was measured slower: it holds the GIL; bench/bench_ingest.py.)"""


@dataclass(frozen=True)
class IngestOutcome:
    """The response body, and whether it is the replay of an earlier request."""

    response: dict[str, Any]
    replayed: bool


def _lookup_replay(
    session: Session, model_id: int, key: str | None, body_hash: Future[str]
) -> IngestOutcome | None:
    if key is None:
        return None
    earlier = queries.find_batch_by_idempotency_key(session, model_id, key)
    if earlier is None:
        return None
    return IngestOutcome(idempotency.replay_response(earlier, body_hash.result()), replayed=True)


def _store(
    session: Session,
    model: ModelConfig,
    parsed: ParsedBatch,
    key: str | None,
    body_hash: str,
    now: datetime,
) -> dict[str, Any]:
    batch_id = uuid.uuid4()
    response = {
        "batch_id": str(batch_id),
        "window_start": isoformat_z(parsed.window_start),
        "count": parsed.n + parsed.n_unlabelled,
    }
    session.add(
        Batch(
            model_id=model.id,
            id=batch_id,
            idempotency_key=key,
            request_hash=body_hash,
            kind=parsed.kind,
            event_at=parsed.event_at,
            window_start=parsed.window_start,
            segment=parsed.segment,
            n=parsed.n,
            positives=parsed.positives,
            unlabelled=parsed.n_unlabelled,
            response=response,
            received_at=now,
        )
    )
    session.flush()  # before the aggregates are locked: keeps the locked span short
    segments = [ALL_SEGMENTS] if parsed.segment is None else [ALL_SEGMENTS, parsed.segment]
    aggregates = queries.lock_window_aggregates(
        session, model.id, parsed.window_start, segments, model.thresholds, now
    )
    model_total = queries.model_example_total(session, model.id)
    added = parsed.n + parsed.n_unlabelled  # labelled and unlabelled rows share the ceilings
    check_room(parsed.kind, added, (a.n + a.n_unlabelled for a in aggregates), model_total)
    for aggregate in aggregates:
        apply_batch(aggregate, parsed, now)
    session.flush()
    return response


def ingest_batch(
    session: Session,
    model: ModelConfig,
    body: bytes,
    *,
    idempotency_key: str | None,
    settings: Settings,
    now: datetime,
) -> IngestOutcome:
    """Validate and store one batch for ``model``, or replay an earlier answer.

    Raises
    ------
    RequestInFlight
        Another request with this key is being processed.
    IdempotencyKeyReused
        The key was used before with another body.
    MalformedBody, InvalidInput
        The body is not acceptable; nothing is stored.
    """
    key = idempotency.check_idempotency_key(idempotency_key)
    body_hash = _HASHER.submit(idempotency.request_hash, body)
    try:
        with idempotency.in_flight_guard(session, model.id, key) as earlier:
            if earlier is not None:
                response = idempotency.replay_response(earlier, body_hash.result())
                return IngestOutcome(response, replayed=True)
            parsed = parse_batch(body, model, settings, now)
            with write_transaction(session):
                response = _store(session, model, parsed, key, body_hash.result(), now)
            return IngestOutcome(response, replayed=False)
    except IntegrityError:
        # Another process stored the same key between our lookup and our write
        # (possible on SQLite with several processes; PostgreSQL holds an
        # advisory lock). The key now exists: answer as a replay would.
        session.rollback()
        replay = _lookup_replay(session, model.id, key, body_hash)
        if replay is None:
            raise
        return replay
    finally:
        if session.in_transaction():
            session.rollback()

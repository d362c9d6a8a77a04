"""Idempotent batch ingestion: one accepted batch per (model, Idempotency-Key).

- The key is stored on the batch row (unique per model) together with the
  SHA-256 of the request body and the response body. The row is written in
  the same transaction as the aggregates, so a rejected or failed request
  leaves no key behind.
- A replay (same key, same body bytes) answers the stored response and stores
  nothing; the same key with another body is refused (422).
- While a request with a key is in flight, a second one with that key gets
  409 with Retry-After: on PostgreSQL through ``pg_try_advisory_xact_lock`` on
  a 64-bit hash of (model, key), held until the first transaction ends (so it
  works across API replicas; a batch stored in one statement holds it for
  that statement, its transaction); on SQLite (one process) through an
  in-process registry.
- Retention: keys live as long as their batch rows, which the worker deletes
  after the configured retention; the documented guarantee is at least 24
  hours (docs/api.md).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.db import queries
from app.errors import IdempotencyKeyReused, InvalidInput, RequestInFlight, StaleCredential

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
RETENTION_HOURS_GUARANTEED = 24
"""Replays are answered for at least this long (in fact for as long as the batch row exists)."""

_LOCK_NAMESPACE = b"priorwatch/idempotency\x00"


def check_idempotency_key(value: str | None) -> str | None:
    """The header value, validated: 1-255 visible ASCII characters, or None if absent."""
    if value is None:
        return None
    # visible ASCII (33-126): ASCII, printable (32-126), no space
    visible = value.isascii() and value.isprintable() and " " not in value
    if not (1 <= len(value) <= MAX_KEY_LENGTH) or not visible:
        raise InvalidInput(HEADER, f"must be 1 to {MAX_KEY_LENGTH} visible ASCII characters")
    return value


def request_hash(body: bytes) -> str:
    """Hex SHA-256 of the raw request body: a replay must send the same bytes."""
    return hashlib.sha256(body).hexdigest()


def advisory_lock_id(model_id: int, key: str) -> int:
    """Signed 64-bit PostgreSQL advisory-lock id of (model, key)."""
    digest = hashlib.sha256(_LOCK_NAMESPACE + f"{model_id}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class InFlightRegistry:
    """Keys being processed in this process (SQLite deployments run one process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[tuple[str, int, str]] = set()

    @contextmanager
    def hold(self, database: str, model_id: int, key: str) -> Iterator[None]:
        """Mark (model, key) in flight for the block; :class:`RequestInFlight` if it is."""
        item = (database, model_id, key)
        with self._lock:
            if item in self._held:
                raise RequestInFlight(f"a request with {HEADER} {key!r} is still being processed")
            self._held.add(item)
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(item)

    def is_held(self, database: str, model_id: int, key: str) -> bool:
        with self._lock:
            return (database, model_id, key) in self._held


IN_FLIGHT = InFlightRegistry()
"""The process's registry of in-flight keys (used on SQLite)."""


def held_in_process(engine: Engine, model_id: int, key: str | None) -> AbstractContextManager[None]:
    """On SQLite, (model, key) held in :data:`IN_FLIGHT` for the block
    (:class:`RequestInFlight` if it is already); otherwise nothing (PostgreSQL
    holds keys with advisory locks, in the statements)."""
    if key is None or engine.dialect.name != "sqlite":
        return nullcontext()
    return IN_FLIGHT.hold(str(engine.url), model_id, key)


@contextmanager
def in_flight_guard(
    session: Session,
    model_id: int,
    key: str | None,
    window: queries.BatchTarget | None = None,
    credential: queries.CachedCredential | None = None,
    model_folded: float | None = None,
    unfolded: queries.UnfoldedTotals | None = None,
    count_unfolded_up_to: int | None = None,
) -> Iterator[queries.Admission]:
    """Hold (model, key) for the block, or raise :class:`RequestInFlight`.

    Yields the admission read (:func:`app.db.queries.read_admission`): the
    batch already stored with that key (for :func:`replay_response`), looked
    up once the key is held; given ``window``, that window's totals (with the
    model's folded total ``model_folded`` and the unfolded deltas' totals
    ``unfolded`` if given, else read); given
    ``credential``, whether it still holds (:class:`StaleCredential` if not,
    before any answer about the key); given ``count_unfolded_up_to``, the
    model's unfolded deltas counted up to it.

    On PostgreSQL this starts the session's transaction and takes the advisory
    lock in it, in the same round trip as the reads; the lock is released when
    that transaction commits or rolls back, so the caller must write the batch
    in the same transaction.
    """
    bind = session.get_bind()
    reads: dict[str, Any] = {
        "key": key,
        "window": window,
        "credential": credential,
        "model_folded": model_folded,
        "unfolded": unfolded,
        "count_unfolded_up_to": count_unfolded_up_to,
    }
    if bind.dialect.name == "postgresql":
        lock_id = None if key is None else advisory_lock_id(model_id, key)
        admission = queries.read_admission(session, model_id, lock_id=lock_id, **reads)
        _check_credential(admission)
        if not admission.locked:
            session.rollback()
            raise RequestInFlight(f"a request with {HEADER} {key!r} is still being processed")
        yield admission
        return
    with held_in_process(bind.engine, model_id, key):
        admission = queries.read_admission(session, model_id, **reads)
        _check_credential(admission)
        yield admission


def _check_credential(admission: queries.Admission) -> None:
    if not admission.credential_holds:
        raise StaleCredential("the cached model settings or API key changed")


def replay_response(batch: queries.StoredAnswer, body_hash: str) -> dict[str, Any]:
    """The stored response of ``batch`` if the body matches, else :class:`IdempotencyKeyReused`."""
    if batch.request_hash != body_hash:
        raise IdempotencyKeyReused(
            f"{HEADER} {batch.idempotency_key!r} was already used with a different request body"
        )
    return dict(batch.response)

"""In-process cache of what authorises a batch: active keys and model settings.

Without it every ``POST .../batches`` pays two queries (the key by token
hash, the model by name) before its body is read (bench/bench_ingest.py).

A cached answer is never trusted alone: the batch route passes it to
ingestion, which checks it again in the batch's first round trip (the key
still unrevoked, the model's ``updated_at`` unchanged: app/db/queries.py
``read_admission``) and, if it no longer holds, the route clears the cache
and authorises from the database (docs/api.md, "Ingestion speed"). So a
revocation or a model update is seen at once by every process. In this
process, revoking a key (:func:`app.services.keys.revoke_key`) or updating a
model (:func:`app.services.models.update_model`) also clears the cache; an
entry lives at most :data:`TTL_SECONDS`, which bounds how long a forgotten
key stays in memory.

Only positive answers are cached (an unknown token or model is looked up
every time), per engine, so two apps over two databases never share entries.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

TTL_SECONDS = 2.0
"""How long an entry is kept (each use is checked again against the database)."""


@dataclass(frozen=True)
class CachedKey:
    """The part of an active API key that authorisation reads."""

    model_id: int
    scopes: frozenset[str]


class AuthCache:
    """Entries per engine, each trusted for ``ttl`` seconds of ``clock``.

    A generation counter, bumped by :meth:`clear`, keeps a lookup that raced
    with a revocation from storing what it read before the revocation.
    """

    def __init__(self, ttl: float = TTL_SECONDS, clock: Callable[[], float] = time.monotonic):
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: weakref.WeakKeyDictionary[Any, dict[Hashable, tuple[float, Any]]] = (
            weakref.WeakKeyDictionary()
        )
        self.generation = 0

    def get(self, engine: Any, key: Hashable) -> Any | None:
        """The live entry ``key`` of ``engine``, or None."""
        with self._lock:
            entry = self._entries.get(engine, {}).get(key)
        if entry is None or entry[0] < self._clock():
            return None
        return entry[1]

    def put(self, engine: Any, key: Hashable, value: Any, generation: int) -> None:
        """Store ``value`` unless the cache was cleared since ``generation`` was read."""
        with self._lock:
            if generation == self.generation:
                entries = self._entries.setdefault(engine, {})
                entries[key] = (self._clock() + self._ttl, value)

    def clear(self) -> None:
        """Forget every entry (a key was revoked or a model changed)."""
        with self._lock:
            self.generation += 1
            self._entries.clear()


AUTH_CACHE = AuthCache()
"""The process's cache (read by app/api/routes/batches.py)."""

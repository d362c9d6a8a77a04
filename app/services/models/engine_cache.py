"""A small in-process cache whose entries belong to one database (engine) and expire.

Used for what many requests read and may be a little stale: the keys and
model settings that authorise a batch (app/services/models/auth_cache.py), a
model's folded example total and its unfolded deltas' sums
(app/services/ingest/batch.py) and its tally of
unfolded deltas (app/services/ingest/backpressure.py). Entries are kept
per engine (weakly), so two apps over two databases never share one.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any


class EngineCache:
    """Entries per engine, each trusted for ``ttl`` seconds of ``clock``.

    A generation counter, bumped by :meth:`clear`, keeps a lookup that raced
    with a clear (a revocation, say) from storing what it read before it.
    """

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic):
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
        """Forget every entry (e.g. a key was revoked or a model changed)."""
        with self._lock:
            self.generation += 1
            self._entries.clear()

"""In-process cache of what authorises a batch: active keys and model settings.

Without it every ``POST .../batches`` pays two queries (the key by token
hash, the model by name) before its body is read (bench/bench_ingest.py).

A cached answer is never trusted alone: the batch route passes it to
ingestion, which checks it again in the batch's first round trip (the key
still unrevoked, the model's ``updated_at`` unchanged: app/db/queries.py
``read_admission``) and, if it no longer holds, the route clears the cache
and authorises from the database (docs/api.md, "Ingestion speed"). So a
revocation or a model update is seen at once by every process. In this
process, revoking a key (:func:`app.services.models.api_keys.revoke_key`) or updating a
model (:func:`app.services.models.registry.update_model`) also clears the cache; an
entry lives at most :data:`TTL_SECONDS`, which bounds how long a forgotten
key stays in memory.

Only positive answers are cached (an unknown token or model is looked up
every time), per engine, so two apps over two databases never share entries.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.services.models.engine_cache import EngineCache

TTL_SECONDS = 2.0
"""How long an entry is kept (each use is checked again against the database)."""


@dataclass(frozen=True)
class CachedKey:
    """The part of an active API key that authorisation reads."""

    model_id: int
    scopes: frozenset[str]


AUTH_CACHE = EngineCache(ttl=TTL_SECONDS)
"""The process's cache (read by app/api/routes/batches.py)."""

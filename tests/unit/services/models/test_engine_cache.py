"""EngineCache, the class of the authorisation cache: entries expire after the
TTL, clear() forgets them and refuses stale writes."""

from __future__ import annotations

from app.services.models.auth_cache import TTL_SECONDS
from app.services.models.engine_cache import EngineCache


class _Engine:
    """Stands in for an Engine: any weak-referenceable object."""


def test_ttl_bound_is_at_most_five_seconds() -> None:
    assert 0 < TTL_SECONDS <= 5


def test_entries_expire_after_the_ttl() -> None:
    now = [100.0]
    cache = EngineCache(ttl=2.0, clock=lambda: now[0])
    engine, other = _Engine(), _Engine()
    cache.put(engine, "k", 1, cache.generation)
    assert cache.get(engine, "k") == 1
    assert cache.get(other, "k") is None  # per engine
    now[0] = 102.0
    assert cache.get(engine, "k") == 1
    now[0] = 102.5
    assert cache.get(engine, "k") is None


def test_clear_forgets_and_refuses_a_write_read_before_it() -> None:
    cache = EngineCache(ttl=TTL_SECONDS)
    engine = _Engine()
    cache.put(engine, "k", 1, cache.generation)
    generation = cache.generation  # a lookup starts...
    cache.clear()  # ...a revocation commits...
    assert cache.get(engine, "k") is None
    cache.put(engine, "k", 2, generation)  # ...and the lookup's stale answer is not stored
    assert cache.get(engine, "k") is None
    cache.put(engine, "k", 3, cache.generation)
    assert cache.get(engine, "k") == 3

"""Backpressure: a bound on each model's unfolded deltas (docs/api.md, "Backpressure").

Every accepted batch appends one all-traffic delta that waits until a worker
folds it (app/services/refresh/groups.py). With the workers down or behind,
those deltas would pile up without end: storage grows, and so does the
cost of reading a window. ``PRIORWATCH_MAX_UNFOLDED_DELTAS`` (``limit``; 0:
no bound) caps them per model: a batch of a model with ``limit`` or more
unfolded deltas is refused with 429 and ``Retry-After``
(:class:`~app.errors.TooManyUnfoldedDeltas`), and stores nothing.

Cost: the count rides in the batch's admission read (no extra round trip)
and is capped at ``limit`` (``LIMIT``: at most ``limit`` index entries,
however many deltas wait). A process counts a model's deltas at most every
:data:`UNFOLDED_COUNT_TTL_SECONDS` while its tally (the count plus the
batches it has accepted since) stays below the limit, so the cost of a
batch does not grow with the backlog; once the tally reaches the limit,
every batch counts again, so a refusal always rests on a fresh count and
batches are accepted again as soon as a worker has folded. The bound is
soft by what other processes accept between two counts (their batches of
the last second at most) and by batches admitted at the same moment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.errors import TooManyUnfoldedDeltas
from app.services.models.engine_cache import EngineCache

UNFOLDED_COUNT_TTL_SECONDS = 1.0
"""How long a process trusts its tally of a model's unfolded deltas below the limit."""


@dataclass
class _Tally:
    count: int
    """Unfolded deltas as counted, plus the batches this process accepted since."""


class UnfoldedCounts:
    """Per engine and model, this process's tally of the model's unfolded deltas.

    Examples
    --------
    >>> from sqlalchemy import create_engine
    >>> counts, engine = UnfoldedCounts(ttl=60.0), create_engine("sqlite://")
    >>> counts.cap_to_count(engine, 1, limit=2)  # nothing known: count up to 2
    2
    >>> counts.check(engine, 1, limit=2, counted=1)
    >>> counts.add_one(engine, 1)
    >>> counts.cap_to_count(engine, 1, limit=2)  # 1 + 1 accepted: count again
    2
    >>> counts.check(engine, 1, limit=2, counted=0)  # folded meanwhile
    >>> counts.cap_to_count(engine, 1, limit=2) is None
    True
    >>> counts.check(engine, 1, limit=2, counted=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    app.errors.TooManyUnfoldedDeltas: ...
    """

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._tallies = EngineCache(ttl, clock)
        self._lock = threading.Lock()

    def cap_to_count(self, engine: Any, model_id: int, limit: int) -> int | None:
        """Up to how many deltas the batch's admission read must count: ``limit``,
        or None when there is no bound (0) or a recent tally is below it."""
        if limit == 0:
            return None
        tally: _Tally | None = self._tallies.get(engine, model_id)
        return None if tally is not None and tally.count < limit else limit

    def check(self, engine: Any, model_id: int, limit: int, counted: int | None) -> None:
        """Remember ``counted`` (if the read counted) and refuse the batch when it
        reaches ``limit``: :class:`TooManyUnfoldedDeltas`."""
        if counted is None:
            return
        self._tallies.put(engine, model_id, _Tally(counted), self._tallies.generation)
        if counted >= limit:
            raise TooManyUnfoldedDeltas(
                f"the model has {limit} or more batches waiting for a worker to fold them "
                f"(PRIORWATCH_MAX_UNFOLDED_DELTAS = {limit}): the workers are down or "
                f"behind; retry after {TooManyUnfoldedDeltas.retry_after_seconds} s"
            )

    def add_one(self, engine: Any, model_id: int) -> None:
        """Count a batch this process has just stored into the model's live tally."""
        tally: _Tally | None = self._tallies.get(engine, model_id)
        if tally is not None:
            with self._lock:
                tally.count += 1


UNFOLDED_COUNTS = UnfoldedCounts(UNFOLDED_COUNT_TTL_SECONDS)
"""The process's tallies (used by app/services/ingest/batch.py)."""

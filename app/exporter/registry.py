"""What ``GET /metrics`` serves: stored window results, rejections, process metrics."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from app.db.availability import describe_outage, is_outage
from app.exporter import names
from app.exporter.collector import WindowResultsCollector
from app.exporter.estimates import EstimateCollector
from app.exporter.exposition import COMPACT, Exposition
from app.exporter.maturity import MaturityCollector
from app.exporter.names import DATABASE_UP, DATABASE_UP_FAMILY
from app.exporter.reads import Shard
from app.exporter.rejections import RejectionCounter
from app.exporter.series import holds_process_series
from app.exporter.streaks import StreakCollector
from app.exporter.text import render_series

log = logging.getLogger("priorwatch.exporter")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Media type of the exposition (Prometheus text format 0.0.4)."""

MAX_SHARDS = 64
"""Most shard collectors (and caches) kept at once, least recently scraped dropped first."""


class Exporter:
    """The application's Prometheus exposition.

    Attributes
    ----------
    windows : WindowResultsCollector
        Stored window results, queue and ingestion counters (read per scrape);
        its text (:meth:`render`) includes the streaks, estimates and maturity. It
        serves the unsharded scrape; each shard has its own (:meth:`shard`).
    streaks : StreakCollector
        Consecutive flagged or breached windows (read per scrape).
    estimates : EstimateCollector
        Stored label-free estimates and their errors (read per scrape).
    maturity : MaturityCollector
        Label completeness, completed metrics and overdue windows (read per scrape).
    rejections : RejectionCounter
        Rejected batch requests of this process, by reason.
    process : CollectorRegistry
        The rejection counter, this process's bound on a model's unfolded
        deltas (``max_unfolded_deltas``, 0: none) and prometheus_client's
        process, platform and garbage-collector metrics.
    registry : CollectorRegistry
        Everything, as one prometheus_client registry (for library users; the
        endpoint writes the window families itself, see :meth:`render`).

    Each application (and each test) builds its own: nothing goes through
    prometheus_client's global registry.
    """

    def __init__(
        self,
        session_factory: Callable[[], Session],
        *,
        max_unfolded_deltas: int,
        exposition: Exposition = COMPACT,
    ) -> None:
        self._session_factory = session_factory
        self._exposition = exposition
        self._lock = threading.Lock()
        self._shards: OrderedDict[Shard, WindowResultsCollector] = OrderedDict()
        self.streaks = StreakCollector(session_factory)
        self.estimates = EstimateCollector(session_factory)
        self.maturity = MaturityCollector(session_factory)
        self.windows = self._collector(None, self.streaks, self.estimates, self.maturity)
        self.rejections = RejectionCounter()
        self.process = CollectorRegistry(auto_describe=False)
        self.process.register(self.rejections)
        Gauge(
            names.UNFOLDED_DELTAS_LIMIT,
            "Most unfolded deltas (batches not folded yet) of one model before 429 (0: no bound)",
            registry=self.process,
        ).set(max_unfolded_deltas)
        ProcessCollector(registry=self.process)
        PlatformCollector(registry=self.process)
        GCCollector(registry=self.process)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.windows)
        self.registry.register(self.streaks)
        self.registry.register(self.estimates)
        self.registry.register(self.maturity)
        self.registry.register(self.process)  # a registry is itself a collector

    def _collector(
        self,
        shard: Shard | None,
        streaks: StreakCollector,
        estimates: EstimateCollector,
        maturity: MaturityCollector,
    ) -> WindowResultsCollector:
        return WindowResultsCollector(
            self._session_factory,
            (streaks, estimates, maturity),
            exposition=self._exposition,
            shard=shard,
        )

    def shard(self, shard: Shard | None) -> WindowResultsCollector:
        """The collector of ``shard`` (None: unsharded), each with its own caches; the
        :data:`MAX_SHARDS` most recently scraped shards are kept."""
        if shard is None:
            return self.windows
        with self._lock:
            collector = self._shards.pop(shard, None) or self._collector(
                shard,
                StreakCollector(self._session_factory),
                EstimateCollector(self._session_factory),
                MaturityCollector(self._session_factory),
            )
            self._shards[shard] = collector
            while len(self._shards) > MAX_SHARDS:
                self._shards.popitem(last=False)
            return collector

    def render(self, shard: Shard | None = None) -> Iterator[bytes]:
        """The exposition of ``shard`` (None: everything) in text format 0.0.4: the
        database is read now, the text is written family by family as it is iterated.

        While the database is unavailable (:func:`~app.db.availability.is_outage`) the
        exposition still answers, as exporters do (postgres_exporter's ``pg_up``):
        ``priorwatch_database_up 0`` and the series of this process (rejections,
        process, platform, garbage collector), none read from the database and none
        cached from an earlier scrape. Other database errors propagate. The series of
        no model (these, and the queue) are on shard 0 only.
        """
        try:
            stored: Iterator[bytes] | None = self.shard(shard).read_text()
        except (sa_exc.DBAPIError, sa_exc.TimeoutError) as exc:
            if not is_outage(exc):
                raise
            log.warning("database unavailable for /metrics: %s", describe_outage(exc))
            stored = None
        return self._stream(stored, holds_process_series(shard))

    def _stream(self, stored: Iterator[bytes] | None, process: bool) -> Iterator[bytes]:
        if process:
            up = float(stored is not None)
            yield render_series((DATABASE_UP_FAMILY,), {DATABASE_UP: [((), up)]}).encode()
        yield from stored or ()
        if process:
            yield generate_latest(self.process)

"""What ``GET /metrics`` serves: stored window results, rejections, process metrics."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import FastAPI
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
from app.exporter.names import DATABASE_UP, DATABASE_UP_FAMILY
from app.exporter.rejections import RejectionCounter, RejectionCountingMiddleware
from app.exporter.streaks import StreakCollector
from app.exporter.text import render_series

log = logging.getLogger("priorwatch.exporter")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Media type of the exposition (Prometheus text format 0.0.4)."""


class Exporter:
    """The application's Prometheus exposition.

    Attributes
    ----------
    windows : WindowResultsCollector
        Stored window results, queue and ingestion counters (read per scrape);
        its text (:meth:`render`) includes the streaks and the estimates.
    streaks : StreakCollector
        Consecutive flagged or breached windows (read per scrape).
    estimates : EstimateCollector
        Stored label-free estimates and their errors (read per scrape).
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

    def __init__(self, session_factory: Callable[[], Session], *, max_unfolded_deltas: int) -> None:
        self.streaks = StreakCollector(session_factory)
        self.estimates = EstimateCollector(session_factory)
        self.windows = WindowResultsCollector(session_factory, parts=(self.streaks, self.estimates))
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
        self.registry.register(self.process)  # a registry is itself a collector

    def render(self) -> bytes:
        """The full exposition in text format 0.0.4 (window and streak families written
        directly).

        While the database is unavailable (:func:`~app.db.availability.is_outage`) the
        exposition still answers, as exporters do (postgres_exporter's ``pg_up``):
        ``priorwatch_database_up 0`` and the series of this process (rejections,
        process, platform, garbage collector), none read from the database and none
        cached from an earlier scrape. Other database errors propagate.
        """
        try:
            stored = self.windows.render_text()
        except (sa_exc.DBAPIError, sa_exc.TimeoutError) as exc:
            if not is_outage(exc):
                raise
            log.warning("database unavailable for /metrics: %s", describe_outage(exc))
            stored = None
        up = render_series((DATABASE_UP_FAMILY,), {DATABASE_UP: [((), float(stored is not None))]})
        return (up + (stored or "")).encode() + generate_latest(self.process)


def install_exporter(app: FastAPI) -> None:
    """Give ``app`` its :class:`Exporter` (``app.state.exporter``) and the
    rejection-counting middleware.

    Call it in ``create_app`` after ``app.state.session_factory`` and
    ``app.state.settings`` are set and after the other ``add_middleware``
    calls (the middleware must be outermost to see their answers). ``GET
    /metrics`` is app/api/routes/metrics.py.
    """
    exporter = Exporter(
        app.state.session_factory, max_unfolded_deltas=app.state.settings.max_unfolded_deltas
    )
    app.state.exporter = exporter
    app.add_middleware(RejectionCountingMiddleware, counter=exporter.rejections)

"""The FastAPI application: ``create_app()``; ``run()`` serves it (``priorwatch serve``).

Nothing happens at import time: the engine, the session factory and the
embedded worker are created by :func:`create_app` and its lifespan.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api.body_limit import BodySizeLimitMiddleware
from app.api.concurrency import ConcurrencyCap
from app.api.docs import OPENAPI_URL, install_docs
from app.api.errors import ADMIN_DISABLED, register_exception_handlers
from app.api.guard import ResponseGuardMiddleware
from app.api.openapi import register_documented_schemas
from app.api.routes import ROUTERS
from app.config import Settings, get_settings
from app.db.session import make_engine, make_session_factory
from app.exporter.exposition import Exposition
from app.exporter.registry import Exporter
from app.exporter.rejections import RejectionCountingMiddleware

API_VERSION = "1"

log = logging.getLogger("priorwatch.api")

StopFunction = Callable[[], None]


def start_embedded_worker(app: FastAPI, settings: Settings) -> StopFunction | None:
    """Start the in-process worker of embedded mode; return its stop function.

    Called once by the lifespan at startup. With a SQLite database and
    ``settings.embedded_worker``, one worker thread processes dirty windows
    through ``app.state.session_factory``; the returned function stops and
    joins it at shutdown. Otherwise None: PostgreSQL deployments run
    ``priorwatch worker`` processes instead.
    """
    if not (settings.is_sqlite and settings.embedded_worker):
        return None
    from app.worker.runner import start_in_process

    return start_in_process(app.state.session_factory)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application for ``settings`` (default: from the environment)."""
    settings = settings or get_settings()
    engine = make_engine(settings.database_url, settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.admin_token is None:
            log.warning(ADMIN_DISABLED)
        stop_worker = start_embedded_worker(app, settings)
        try:
            yield
        finally:
            if stop_worker is not None:
                stop_worker()
            engine.dispose()

    app = FastAPI(
        title="priorwatch",
        version=API_VERSION,
        description="Prior-invariant performance monitoring for binary classifiers. "
        "Errors are application/problem+json (RFC 9457); see docs/api.md.",
        lifespan=lifespan,
        docs_url=None,  # self-hosted by install_docs (no CDN)
        redoc_url=None,
        openapi_url=OPENAPI_URL if settings.docs_enabled else None,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.evaluate_cap = ConcurrencyCap(settings.evaluate_max_concurrency, "evaluations")
    app.add_middleware(
        ResponseGuardMiddleware,
        deadline_seconds=settings.request_deadline_seconds,
        retry_after_seconds=settings.database_retry_after_seconds,
        exempt_paths={"/metrics"},  # the exposition: Prometheus's scrape timeout bounds it
    )  # innermost: every request ends in a complete answer, in bounded time
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_body_bytes=settings.max_body_bytes,
        body_timeout_seconds=settings.body_timeout_seconds,
        route_limits={"/v1/evaluate": settings.evaluate_max_body_bytes},
    )
    _install_exporter(app)  # GET /metrics registry; rejection counter (outermost middleware)
    register_exception_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    register_documented_schemas(app)
    install_docs(app, enabled=settings.docs_enabled)
    return app


def run(host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the API with uvicorn (``priorwatch serve``); slow clients are bounded:
    headers (app/api/connections.py), bodies (app/api/body_limit.py), idle keep-alive."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from app.api.connections import server_config

    settings = get_settings()
    config = server_config(create_app(settings), settings, host=host, port=port, log_level="info")
    settle_garbage_collection()
    server = uvicorn.Server(config)
    server.run()
    if not server.started:  # e.g. the port is taken: exit as uvicorn.run would
        raise SystemExit(STARTUP_FAILURE)


FULL_COLLECTION_EVERY = 100
"""Young-generation collections between two full ones considered (Python's default: 10)."""


def settle_garbage_collection() -> None:
    """Make the garbage collector's full collections rare and short in a serving process.

    A full collection holds the GIL throughout, delaying every request of the process
    meanwhile; the objects a scrape reads and caches triggered 5-20 of them per round of
    4 fleet shards, of 100-400 ms each (the 100-row batch p99 during scrapes:
    docs/operations.md). So the objects of start-up (modules, the application), which
    live as long as the process, are frozen out of every later collection
    (``gc.freeze``), and a full collection is considered every
    :data:`FULL_COLLECTION_EVERY` collections of the middle generation instead of every
    10 (it still waits, as always, until a quarter of the long-lived objects are new).
    Called by :func:`run` once the application is built."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)


def _install_exporter(app: FastAPI) -> None:
    """Give ``app`` its :class:`Exporter` (``app.state.exporter``) and the
    rejection-counting middleware (here, not in app/exporter: the exporter knows
    no web framework).

    Called after ``app.state.session_factory`` and ``app.state.settings`` are set
    and after the other ``add_middleware`` calls (the middleware must be
    outermost to see their answers). ``GET /metrics`` is app/api/routes/metrics.py.
    """
    settings = app.state.settings
    exporter = Exporter(
        app.state.session_factory,
        max_unfolded_deltas=settings.max_unfolded_deltas,
        exposition=Exposition.parse(settings.metrics_exposition),
    )
    app.state.exporter = exporter
    app.add_middleware(RejectionCountingMiddleware, counter=exporter.rejections)

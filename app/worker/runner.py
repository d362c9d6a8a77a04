"""Starting and stopping workers: the ``priorwatch worker`` process and the
in-process worker thread of embedded mode (``priorwatch serve`` on SQLite).

Signals: SIGTERM and SIGINT ask the loop to stop; the window being computed
is finished and stored with the windows of its group computed before it (a
fraction of a second), the windows claimed but not started are released at
once, and the process exits with status 0.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings, get_settings
from app.db.availability import is_outage
from app.db.session import make_engine, make_session_factory
from app.metrics.dbt import dbt_reference
from app.services.refresh.groups import ClaimedWindow
from app.worker.allocator import tune_allocator
from app.worker.jobs import DatabaseJobs
from app.worker.loop import Backoff, LoopStats, WorkerLoop
from app.worker.node_store import CurveDirectory, NodeDirectory
from app.worker.settings import WorkerSettings

log = logging.getLogger("priorwatch.worker")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def build_loop(
    session_factory: sessionmaker[Session],
    worker_settings: WorkerSettings,
    stop: threading.Event,
) -> WorkerLoop[list[ClaimedWindow]]:
    """A loop over the database queue with the given settings."""
    jobs = DatabaseJobs(
        session_factory,
        lease_seconds=worker_settings.lease_seconds,
        batch_retention_hours=worker_settings.batch_retention_hours,
        housekeeping_interval_seconds=worker_settings.housekeeping_interval_seconds,
        settle_seconds=worker_settings.settle_seconds,
        claim_group_size=worker_settings.claim_group_size,
        detail_interval_seconds=worker_settings.detail_interval_seconds,
        reference_cache_mb=worker_settings.reference_cache_mb,
        detail_share=worker_settings.detail_share,
    )
    return WorkerLoop(
        jobs,
        stop=stop,
        poll_interval_seconds=worker_settings.poll_interval_seconds,
        backoff=Backoff(
            worker_settings.backoff_initial_seconds, worker_settings.backoff_max_seconds
        ),
        expected=is_outage,
    )


def warm_up(ops_node_dir: str = "") -> None:
    """Build the process's OPS reference curves and what a summary reads of them
    before the first claim (see WorkerSettings, ``ScoringReference.warm_up``); with
    ``ops_node_dir``, the curves and their AUC-PR and lift nodes are kept there
    (:mod:`app.worker.node_store`)."""
    from app.metrics.ops_scoring import scoring_reference

    if ops_node_dir:
        dbt_reference(store=CurveDirectory(Path(ops_node_dir)))  # the one scoring_reference reads
    reference = scoring_reference()
    if ops_node_dir:
        reference.store_nodes_in(NodeDirectory(Path(ops_node_dir), reference.dbt))
    reference.warm_up()


def install_stop_handlers(stop: threading.Event) -> Callable[[], None]:
    """Make SIGTERM/SIGINT set ``stop``; returns a function restoring the old handlers."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handler(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping after the current window", signal.Signals(signum).name)
        stop.set()

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def run(
    settings: Settings | None = None,
    worker_settings: WorkerSettings | None = None,
    stop: threading.Event | None = None,
) -> LoopStats:
    """Run one worker in this process until SIGTERM/SIGINT (``priorwatch worker``)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s[%(process)d] %(message)s"
    )
    settings = settings or get_settings()
    worker_settings = worker_settings or WorkerSettings()
    stop = stop or threading.Event()
    restore = install_stop_handlers(stop)
    engine = make_engine(settings.database_url, settings)
    tune_allocator()
    try:
        if worker_settings.warm_up:
            warm_up(worker_settings.ops_node_dir)
        loop = build_loop(make_session_factory(engine), worker_settings, stop)
        log.info("worker ready (lease %.1f s)", worker_settings.lease_seconds)
        return loop.run()
    finally:
        engine.dispose()
        restore()


class InProcessWorker:
    """The embedded-mode worker: one daemon thread running the loop.

    ``stop()`` sets the stop event and joins the thread (the current window is
    finished first).
    """

    def __init__(
        self, session_factory: sessionmaker[Session], worker_settings: WorkerSettings
    ) -> None:
        self.stop_event = threading.Event()
        self.settings = worker_settings
        self.loop = build_loop(session_factory, worker_settings, self.stop_event)
        self.thread = threading.Thread(target=self._main, name="priorwatch-worker", daemon=True)

    def _main(self) -> None:
        if self.settings.warm_up:
            warm_up(self.settings.ops_node_dir)
        self.loop.run()

    def start(self) -> InProcessWorker:
        self.thread.start()
        return self

    def stop(self, timeout_seconds: float = 30.0) -> None:
        self.stop_event.set()
        self.thread.join(timeout_seconds)
        if self.thread.is_alive():
            log.warning("in-process worker did not stop within %.0f s", timeout_seconds)


def start_in_process(
    session_factory: sessionmaker[Session], worker_settings: WorkerSettings | None = None
) -> Callable[[], None]:
    """Start the embedded worker thread; returns the function that stops and joins it."""
    worker = InProcessWorker(session_factory, worker_settings or WorkerSettings()).start()
    return worker.stop

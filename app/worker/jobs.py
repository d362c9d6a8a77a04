"""The loop's job source backed by the database queue (one session per job step).

A job is a group of windows (:class:`~app.services.refresh.groups.ClaimedWindow`)
claimed together: up to ``claim_group_size``, computed one by one and stored
in one transaction, so the database round trips of a claim and of a
completion are shared by the group.

Besides windows, it runs the housekeeping: every ``housekeeping_interval_seconds``,
before a claim, batch rows older than the idempotency retention are deleted
(app/db/retention.py), in transactions of at most :data:`HOUSEKEEPING_BATCH`
rows, then the windows past their model's ``retention``
(app/services/refresh/retention.py), at most :data:`HOUSEKEEPING_WINDOWS` window
starts per transaction. Folded deltas need no housekeeping: the fold deletes them.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from app.db.queue import database_now
from app.db.retention import delete_batches_received_before
from app.db.session import write_transaction
from app.services.refresh.budget import DetailBudget
from app.services.refresh.groups import (
    ClaimedWindow,
    ModelCache,
    Outcome,
    RefreshPolicy,
    claim_windows,
    persist_group,
    refresh_group,
)
from app.services.refresh.retention import delete_expired_windows
from app.services.windows.reference_cache import REFERENCE_CACHE_MB, ReferenceCache

log = logging.getLogger("priorwatch.worker")

HOUSEKEEPING_BATCH = 5_000
"""Most batch rows one housekeeping transaction deletes."""
HOUSEKEEPING_WINDOWS = 500
"""Most window starts (of one model) one housekeeping transaction deletes."""


class DatabaseJobs:
    """Claims groups of waiting windows, refreshes them, releases them on stop; keeps house.

    Parameters
    ----------
    session_factory : sessionmaker
    lease_seconds : float
        Exclusive hold of a claimed window (app/worker/settings.py).
    batch_retention_hours : float
        Age after which a batch row (its idempotency key) is deleted.
    housekeeping_interval_seconds : float
        Time between two housekeeping runs of this worker.
    settle_seconds : float
        Claim a window only once its oldest waiting change is this old.
    claim_group_size : int
        Most windows claimed, computed and stored together.
    detail_interval_seconds : float
        Longest lag of an open window's detail tier behind its data (0: every
        refresh is full; app/services/refresh/tiers.py).
    reference_cache_mb : float
        Bound of the cache of summed drift references (MiB).
    detail_share : float
        Most of the worker's computing time that detail refreshes may take
        under a backlog (app/services/refresh/budget.py; 1: no bound).
    """

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        lease_seconds: float,
        batch_retention_hours: float = 168.0,
        housekeeping_interval_seconds: float = 300.0,
        settle_seconds: float = 0.0,
        claim_group_size: int = 1,
        detail_interval_seconds: float = 0.0,
        reference_cache_mb: float = REFERENCE_CACHE_MB,
        detail_share: float = 1.0,
    ) -> None:
        self.session_factory = session_factory
        self.lease_seconds = lease_seconds
        self.batch_retention = timedelta(hours=batch_retention_hours)
        self.housekeeping_interval_seconds = housekeeping_interval_seconds
        self.settle_seconds = settle_seconds
        self.claim_group_size = claim_group_size
        self.cache = ReferenceCache(reference_cache_mb * 2**20)
        self.models = ModelCache()
        self.policy = RefreshPolicy(detail_interval_seconds, DetailBudget(detail_share))
        self.outcomes: dict[Outcome, int] = dict.fromkeys(Outcome, 0)
        self._next_housekeeping = time.monotonic()
        self.batches_deleted = 0
        self.windows_deleted = 0

    def housekeeping(self) -> int:
        """Delete the batch rows older than the idempotency retention, then the windows
        past their model's retention; returns how many batch rows."""
        deleted = 0
        while True:
            with self.session_factory() as session, write_transaction(session):
                cutoff = database_now(session) - self.batch_retention
                done = delete_batches_received_before(session, cutoff, limit=HOUSEKEEPING_BATCH)
            deleted += done
            if done < HOUSEKEEPING_BATCH:
                break
        if deleted:
            log.info("housekeeping: %d batch rows past the retention deleted", deleted)
        self.batches_deleted += deleted
        windows = delete_expired_windows(self.session_factory, limit=HOUSEKEEPING_WINDOWS)
        if windows:
            log.info("housekeeping: %d window starts past their model's retention deleted", windows)
        self.windows_deleted += windows
        return deleted

    def claim(self) -> list[ClaimedWindow] | None:
        if time.monotonic() >= self._next_housekeeping:
            self._next_housekeeping = time.monotonic() + self.housekeeping_interval_seconds
            self.housekeeping()
        with self.session_factory() as session:
            group = claim_windows(
                session,
                lease_seconds=self.lease_seconds,
                settle_seconds=self.settle_seconds,
                group_size=self.claim_group_size,
                models=self.models,
                references=self.cache,
            )
        return group or None

    def run(self, job: list[ClaimedWindow], stop: threading.Event | None = None) -> int:
        """Compute and store the group; once ``stop`` is set, the windows not computed
        yet are released. Returns how many windows were computed."""
        with self.session_factory() as session:
            outcomes = refresh_group(
                session,
                job,
                self.cache,
                should_stop=stop.is_set if stop else lambda: False,
                policy=self.policy,
            )
        for outcome in outcomes:
            self.outcomes[outcome] += 1
        return len(outcomes) - outcomes.count(Outcome.RELEASED)

    def release(self, job: list[ClaimedWindow]) -> None:
        with self.session_factory() as session:
            outcomes = persist_group(session, [], job)
        self.outcomes[Outcome.RELEASED] += len(outcomes)
